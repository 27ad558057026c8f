"""The Relax engine writes an MLF (``tvmc compile -f mlf`` on apache-tvm): AOT C of its own (apache-tvm
0.27 has no AOT executor), packaged in the Relay engine's layout, so the same ``mlf run`` builds it
with gcc and runs it; outputs agree with onnx.reference, TFLite's interpreter and the Relay
engine's build (with Vanilla's and Strawberry's kernels, bit for bit on BlazeFace).  The C is
embedded C: no runtime, no heap, the weights ``const``, one static workspace; the same model
gives the same archive."""
import json
import re
import subprocess
import tarfile

import numpy as np
import onnx
import pytest

from conftest import (MODELS, ZOO_FLOAT_INPUTS, assert_close, fetch, onnx_reference, random_inputs, run_tvmc,
                      shapes_option, tflite_reference, vanilla_relay_mlf)
from tvm_extension.testing import PLAIN_C
from test_relax_engine import RELAX_PYTHON, relax_engine
from tvm_extension.mlf import build

CNN = MODELS / "cnn.onnx"
RELAY_PLAIN_C = PLAIN_C  # TVM's own C as an embedded MLF (tvm_extension.testing)


def relax_mlf(model, out, target="c", *options):
    done = relax_engine("compile", str(model), "--target", target, "-f", "mlf", "-o", str(out), *options,
                        cwd=out.parent)
    assert done.returncode == 0, done.stderr[-3000:]
    if target == "c":
        assert done.stdout.strip() == "c: nothing offloaded", done.stdout
    return out


@pytest.fixture(scope="module")
def cnn_mlf(tmp_path_factory):
    return relax_mlf(CNN, tmp_path_factory.mktemp("relax_mlf") / "cnn.tar")


def workspace(archive) -> int:
    with tarfile.open(archive) as tar:
        metadata = json.loads(tar.extractfile("./metadata.json").read())
    return metadata["modules"]["default"]["memory"]["functions"]["main"][0]["workspace_size_bytes"]


def sources(archive):
    with tarfile.open(archive) as tar:
        return {m.name: tar.extractfile(m).read().decode() for m in tar.getmembers() if m.name.endswith((".c", ".h"))}


@pytest.mark.quick
@pytest.mark.relay  # compares with the Relay engine
def test_cnn_runs_as_an_mlf_and_agrees_with_onnx_reference_and_the_relay_engine(cnn_mlf, tmp_path):
    inputs = random_inputs(CNN, seed=4)
    (got,) = build(cnn_mlf, tmp_path / "relax").run(inputs)[0].values()
    np.testing.assert_allclose(got, onnx_reference(CNN, inputs)[0], rtol=1e-5, atol=1e-6)
    done = run_tvmc("compile", *RELAY_PLAIN_C, CNN, "-f", "mlf", "-o", tmp_path / "relay.tar", reuse=True)
    assert done.returncode == 0, done.stderr[-2000:]
    (relay,) = build(tmp_path / "relay.tar", tmp_path / "relay").run(inputs)[0].values()
    np.testing.assert_allclose(got, relay, rtol=1e-5, atol=1e-6)  # both TVM's own kernels, other schedules


@pytest.mark.quick
def test_the_c_is_embedded_c_with_the_relay_engines_interface(cnn_mlf, tmp_path):
    texts = sources(cnn_mlf)
    generated = texts["./codegen/host/src/default_lib0.c"]
    for runtime_use in ("malloc", "TVMBackend", '#include "tvm/', "__tvm_ffi", "DLTensor", "TVMFFI"):
        assert runtime_use not in generated, runtime_use
    weights = re.findall(r"static const float tvmgen_default_constant_\d+\[(\d+)\]", generated)
    assert len(weights) == 7  # four conv weights, a bias, the dense weights and bias
    header = texts["./codegen/host/include/tvmgen_default.h"]
    assert "struct tvmgen_default_inputs {\n  void* input;\n};" in header
    assert re.search(r"int32_t tvmgen_default_run\(\s*struct tvmgen_default_inputs\* inputs,\s*"
                     r"struct tvmgen_default_outputs\* outputs\s*\);", header)
    with tarfile.open(cnn_mlf) as tar:
        metadata = json.load(tar.extractfile("./metadata.json"))
    main = metadata["modules"]["default"]["memory"]["functions"]["main"][0]
    workspace = int(re.search(r"#define TVMGEN_DEFAULT_WORKSPACE_SIZE (\d+)", header).group(1))
    assert main["workspace_size_bytes"] == workspace > 0
    assert f"tvmgen_default_workspace[{workspace}]" in generated
    assert main["constants_size_bytes"] == 4 * sum(map(int, weights))
    assert main["inputs"] == {"input": {"dtype": "float32", "size": 3 * 16 * 16 * 4}}
    assert main["output_shapes"] == [[1, 10]]
    # Plain C11 that gcc accepts with every warning an error.
    tree = tmp_path / "tree"
    with tarfile.open(cnn_mlf) as tar:
        tar.extractall(tree, filter="data")
    subprocess.run(["gcc", "-std=c11", "-O2", "-Wall", "-Wextra", "-pedantic", "-Werror", "-c",
                    f"-I{tree / 'codegen/host/include'}", str(tree / "codegen/host/src/default_lib0.c"),
                    "-o", str(tmp_path / "model.o")], check=True)


@pytest.mark.quick
@pytest.mark.relay  # compares with the Relay engine
def test_tvmc_run_takes_the_relax_mlf(cnn_mlf, tmp_path):
    """TVM's own ``tvmc run`` (the Relay engine's environment) reads the archive as it reads the Relay
    engine's: the same files where tvmc looks for them."""
    with tarfile.open(cnn_mlf) as tar:
        names = set(tar.getnames())
        build_note = tar.extractfile("./codegen/host/BUILD.md").read().decode()
    assert {"./parameters/default.params", "./codegen/host/BUILD.md", "./metadata.json"} <= names
    assert "Compile every `.c` file" in build_note
    inputs = random_inputs(CNN, seed=6)
    np.savez(tmp_path / "in.npz", **inputs)
    done = run_tvmc("run", cnn_mlf, "--device", "cpu", "--inputs", tmp_path / "in.npz",
                    "--outputs", tmp_path / "out.npz")
    assert done.returncode == 0, done.stderr[-2000:]
    np.testing.assert_allclose(np.load(tmp_path / "out.npz")["output_0"], onnx_reference(CNN, inputs)[0],
                               rtol=1e-5, atol=1e-6)


@pytest.mark.quick
def test_a_conv_and_a_residual_input_in_one_function(tmp_path):
    """A conv's epilogue computed row by row beside a chain that reads only the other input
    (``relu(conv(x) + b) + y * 3``, one fused function): that chain is computed once, before it is
    read (moved into the rows, it was computed whole at every row and read before it was: wrong C)."""
    import onnx  # pylint: disable=import-outside-toplevel
    from onnx import TensorProto, helper, numpy_helper  # pylint: disable=import-outside-toplevel

    rng = np.random.default_rng(3)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["r"]),
         helper.make_node("Mul", ["y", "three"], ["y3"]), helper.make_node("Add", ["r", "y3"], ["out"])],
        "residual", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8]),
                     helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 4, 8, 8])],
        [numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w"),
         numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b"),
         numpy_helper.from_array(np.float32(3.0), "three")])
    model = tmp_path / "residual.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(model))
    inputs = random_inputs(model, seed=8)
    (got,) = build(relax_mlf(model, tmp_path / "residual.tar"), tmp_path / "b").run(inputs)[0].values()
    np.testing.assert_allclose(got, onnx_reference(model, inputs)[0], rtol=1e-5, atol=1e-5)


def test_the_same_model_gives_the_same_archive(cnn_mlf, tmp_path):
    again = relax_mlf(CNN, tmp_path / "again.tar")
    assert again.read_bytes() == cnn_mlf.read_bytes()


@pytest.mark.real_model
def test_blazeface_float_tflite_runs_as_an_mlf(tmp_path):
    model = fetch("blazeface")
    archive = relax_mlf(model, tmp_path / "blazeface.tar")
    inputs = {"input": np.random.default_rng(8).standard_normal((1, 128, 128, 3)).astype(np.float32)}
    got = build(archive, tmp_path / "b").run(inputs)[0]
    expected = tflite_reference(model, inputs)
    assert list(got) == ["regressors", "classificators"]  # the model's output names, in its order
    for (name, value), reference in zip(got.items(), expected):
        assert_close(value, reference, what=f"BlazeFace {name}")


@pytest.mark.quick
def test_vanillas_kernels_in_the_relax_mlf(tmp_path):
    """The offloaded convs call Vanilla's C API from the AOT C, its library in the archive once."""
    archive = relax_mlf(CNN, tmp_path / "cnn.tar", "vanilla_accelerator")
    texts = sources(archive)
    generated = texts["./codegen/host/src/default_lib0.c"]
    assert len(re.findall(r"\bvanilla_conv2dnchw_general\(", generated)) == 3  # the three offloaded convs
    assert '#include "vanilla_accelerator.h"' in generated
    assert "./codegen/host/src/vanilla_entry.c" in texts and "./codegen/host/include/vanilla_accelerator.h" in texts
    inputs = random_inputs(CNN, seed=5)
    (got,) = build(archive, tmp_path / "b").run(inputs)[0].values()
    np.testing.assert_allclose(got, onnx_reference(CNN, inputs)[0], rtol=1e-5, atol=1e-6)


SHAPES = {n: shapes_option(ZOO_FLOAT_INPUTS[n]) for n in ("mtcnn_pnet", "mtcnn_rnet", "mtcnn_onet")}  # dynamic in the files
FLOAT_NETWORKS = ["blazeface", "face_landmark", "kws_on_off_float32", "mtcnn_pnet", "mtcnn_rnet", "mtcnn_onet"]
INT8_NETWORKS = ["kws_on_off_int8", "kws_dscnn_int8"]
NETWORKS = ([(n, t) for n in FLOAT_NETWORKS for t in ("vanilla_accelerator", "strawberry")]
            + [(n, t) for n in INT8_NETWORKS for t in ("qvanilla", "chocolate", "c")] + [("mtcnn_onet", "chocolate")])
# The default run: every network once and every backend on a real network (float ones alternating
# Vanilla and Strawberry); the other pairs are exhaustive.
ONCE = {("blazeface", "vanilla_accelerator"), ("face_landmark", "strawberry"), ("kws_on_off_float32", "vanilla_accelerator"),
        ("mtcnn_pnet", "strawberry"), ("mtcnn_rnet", "vanilla_accelerator"), ("mtcnn_onet", "strawberry"),
        ("kws_on_off_int8", "qvanilla"), ("kws_dscnn_int8", "chocolate"), ("kws_dscnn_int8", "c"), ("mtcnn_onet", "chocolate")}
REPORTS = {"strawberry": "STRAWBERRY_REPORT", "chocolate": "CHOCOLATE_REPORT"}  # the hardware models' counters


@pytest.mark.real_model
@pytest.mark.parametrize("name, target", [pytest.param(n, t, marks=[] if (n, t) in ONCE else pytest.mark.exhaustive)
                                           for n, t in NETWORKS], ids=[f"{n}-{t}" for n, t in NETWORKS])
@pytest.mark.relay  # compares with the Relay engine
def test_real_networks_with_a_backend_equal_the_relay_engines_mlf(tmp_path, monkeypatch, name, target):
    """Every network of the zoo, float ones with Vanilla and Strawberry, int8 ones with QVanilla
    (--tflite-exact), Chocolate (TVM's rounding: under --tflite-exact it offloads nothing, on
    either engine) and TVM's own kernels alone (their CPU layers TVM's QNN integer arithmetic on both
    engines), through both engines into an MLF: the same interface, outputs equal bit for bit, and
    the hardware model's counters equal, and the workspace within 1.1x of the Relay engine's (USMP's)."""
    from test_relax_chocolate import counters  # pylint: disable=import-outside-toplevel

    model = fetch(name)
    options = (["--input-shapes", SHAPES[name]] if name in SHAPES else []) + (
        ["--tflite-exact"] if target == "qvanilla" else [])
    relax = relax_mlf(model, tmp_path / "relax.tar", target, *options)
    relay_target = RELAY_PLAIN_C if target == "c" else ["--target", target]
    done = vanilla_relay_mlf(name, tmp_path / "relay.tar") if target == "vanilla_accelerator" else run_tvmc(
        "compile", *relay_target, *options, model, "-f", "mlf", "-o", tmp_path / "relay.tar", reuse=True)
    assert done.returncode == 0, done.stderr[-2000:]
    programs = {"relax": build(relax, tmp_path / "relax"), "relay": build(tmp_path / "relay.tar", tmp_path / "relay")}
    rng = np.random.default_rng(9)
    inputs = {t.name: (rng.uniform(-40, 80, t.shape) if name in INT8_NETWORKS else rng.standard_normal(t.shape)
                       ).astype(t.dtype) for t in programs["relay"].inputs}
    seen = {}
    for engine, program in programs.items():
        if target in REPORTS:
            monkeypatch.setenv(REPORTS[target], str(tmp_path / f"{engine}.txt"))
        outputs = program.run(inputs)[0]
        seen[engine] = outputs, counters(tmp_path / f"{engine}.txt") if target in REPORTS else None
    (got, got_counters), (expected, expected_counters) = seen["relax"], seen["relay"]
    assert list(got) == list(expected)  # the same interface: names and order
    for output in got:
        assert np.array_equal(got[output], expected[output]), f"{name} on {target}: {output} differs"
    assert got_counters == expected_counters
    assert workspace(relax) <= 1.1 * workspace(tmp_path / "relay.tar"), (workspace(relax), workspace(tmp_path / "relay.tar"))
    if got_counters is not None:
        assert max(int(v) for k, v in got_counters.items() if "calls" in k) > 0, got_counters


@pytest.mark.real_model
@pytest.mark.relay  # compares with the Relay engine
def test_int8_ds_cnn_with_qvanilla_equals_the_relay_engine_and_the_relax_vm(tmp_path):
    """With --tflite-exact both engines compute TFLite's integer arithmetic: the Relax engine's MLF
    equals the Relay engine's bit for bit.  Without it, it equals the Relax VM's library of the same
    model bit for bit (the float scales are written exactly: TVM would print them with 7 digits)."""
    model = fetch("kws_dscnn_int8")
    exact = relax_mlf(model, tmp_path / "exact.tar", "qvanilla", "--tflite-exact")
    plain = relax_mlf(model, tmp_path / "plain.tar", "qvanilla")
    done = run_tvmc("compile", "--target", "qvanilla", "--tflite-exact", model, "-f", "mlf", "-o",
                    tmp_path / "relay.tar", reuse=True)
    assert done.returncode == 0, done.stderr[-2000:]
    done = relax_engine("compile", str(model), "--target", "qvanilla", "-o", "plain.so", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    generated = sources(plain)["./codegen/host/src/default_lib0.c"]
    assert re.search(r"0x1\.[0-9a-f]+p-\d+f", generated) and not re.search(r"\de\+37f", generated)
    # The workspace planned by lifetimes (mlf/arena) is no larger than the Relay engine's (USMP's).
    assert 0 < workspace(exact) <= workspace(tmp_path / "relay.tar"), (workspace(exact), workspace(tmp_path / "relay.tar"))
    programs = [build(archive, tmp_path / archive.stem) for archive in (exact, tmp_path / "relay.tar", plain)]
    rng = np.random.default_rng(3)
    for run in range(3):
        inputs = {t.name: rng.uniform(-40, 80, t.shape).astype(t.dtype) for t in programs[0].inputs}
        got, relay, got_plain = (next(iter(p.run(inputs)[0].values())) for p in programs)
        assert np.array_equal(got, relay), f"run {run}: --tflite-exact differs from the Relay engine's MLF"
        np.savez(tmp_path / "in.npz", **inputs)
        done = relax_engine("run", "plain.so", "-i", "in.npz", "-o", "out.npz", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert np.array_equal(got_plain, np.load(tmp_path / "out.npz")["output_0"]), f"run {run}: differs from the VM"


@pytest.mark.real_model
@pytest.mark.relay  # compares with the Relay engine
def test_int8_ds_cnn_on_chocolate_as_on_the_relay_engine(tmp_path, monkeypatch):
    """Chocolate's program in the AOT C: DS-CNN at 8x8x8 gives the Relay engine's MLF outputs bit
    for bit, and every counter of the hardware model (DMA bytes and calls, core calls)."""
    from test_relax_chocolate import counters  # pylint: disable=import-outside-toplevel

    model, tiles = fetch("kws_dscnn_int8"), [f"--target-chocolate-tile_{d}=8" for d in "mnk"]
    relax = relax_mlf(model, tmp_path / "relax.tar", "chocolate", *tiles)
    done = run_tvmc("compile", "--target", "chocolate", *tiles, model, "-f", "mlf", "-o", tmp_path / "relay.tar",
                    reuse=True)
    assert done.returncode == 0, done.stderr[-2000:]
    # Chocolate leaves the depthwise convs on the CPU, computed in float by apache-tvm: row by row
    # (aot._banded), their temporaries take no more than the Relay engine's integer ones.
    assert 0 < workspace(relax) <= workspace(tmp_path / "relay.tar"), (workspace(relax), workspace(tmp_path / "relay.tar"))
    programs = {name: build(tmp_path / f"{name}.tar", tmp_path / name) for name in ("relax", "relay")}
    rng = np.random.default_rng(7)
    for run in range(2):
        inputs = {"input_1": rng.uniform(-40, 80, (1, 50, 10, 1)).astype(np.float32)}
        seen = {}
        for name, program in programs.items():
            report = tmp_path / f"{name}{run}.txt"
            monkeypatch.setenv("CHOCOLATE_REPORT", str(report))
            seen[name] = (next(iter(program.run(inputs)[0].values())), counters(report))
        assert np.array_equal(seen["relax"][0], seen["relay"][0]), f"run {run}"
        assert seen["relax"][1] == seen["relay"][1] and int(seen["relax"][1]["chocolate.core_calls"]) > 0


def test_the_relax_mlf_on_a_board(tmp_path):
    """The same archive cross-built for the Cortex-M4 board and run in QEMU: the host's outputs bit
    for bit, no heap, the workspace in the board's RAM report as in the metadata."""
    from tvm_extension.mlf import board  # pylint: disable=import-outside-toplevel

    archive = relax_mlf(CNN, tmp_path / "cnn.tar", "vanilla_accelerator")
    inputs = random_inputs(CNN, seed=6)
    (host,) = build(archive, tmp_path / "host").run(inputs)[0].values()
    program = board.build(archive, tmp_path / "board", "mps2-an386")
    (got,) = program.run(inputs)[0].values()
    assert np.array_equal(got, host)
    assert program.memory.heap == 0 and program.instructions > 0
    with tarfile.open(archive) as tar:
        metadata = json.load(tar.extractfile("./metadata.json"))
    assert program.memory.workspace == metadata["modules"]["default"]["memory"]["functions"]["main"][0][
        "workspace_size_bytes"]


def qdq_network(path, depthwise_second: bool):
    """Two ONNX QDQ convs, NCHW: 3x3 (per-channel weights, ReLU), then 3x3 stride 2 with asymmetric
    pads (depthwise, or dense with per-tensor weights) and Clip(0, 6); non-zero zero points."""
    from onnx import TensorProto, helper, numpy_helper  # pylint: disable=import-outside-toplevel

    rng, inits, nodes, x = np.random.default_rng(11), [], [], "x"
    layers = [(6, 8, 1, 1, [1, 1, 1, 1], True, "relu"), (8, 8, 8 if depthwise_second else 1, 2, [0, 1, 2, 1], False, "clip")]
    for i, (cin, cout, group, stride, pads, per_channel, act) in enumerate(layers):
        sx, sy = np.float32(0.05 + 0.03 * i), np.float32(0.1 + 0.05 * i)
        sw = (rng.uniform(0.005, 0.02, cout) if per_channel else np.array(0.01)).astype(np.float32)
        n = lambda name: f"{name}{i}"
        inits += [numpy_helper.from_array(np.array(sx), n("sx")), numpy_helper.from_array(np.array(2 - i, np.int8), n("zx")),
                  numpy_helper.from_array(rng.integers(-127, 128, (cout, cin // group, 3, 3)).astype(np.int8), n("w")),
                  numpy_helper.from_array(sw, n("sw")), numpy_helper.from_array(np.zeros(sw.shape, np.int8), n("zw")),
                  numpy_helper.from_array(rng.integers(-500, 500, cout).astype(np.int32), n("b")),
                  numpy_helper.from_array((sx * sw).astype(np.float32), n("sb")),
                  numpy_helper.from_array(np.zeros(sw.shape, np.int32), n("zb")),
                  numpy_helper.from_array(np.array(sy), n("sy")), numpy_helper.from_array(np.array(-3 + i, np.int8), n("zy")),
                  numpy_helper.from_array(np.float32(0), n("lo")), numpy_helper.from_array(np.float32(6), n("hi"))]
        axis = dict(axis=0) if per_channel else {}
        nodes += [helper.make_node("DequantizeLinear", [x, n("sx"), n("zx")], [n("xf")]),
                  helper.make_node("DequantizeLinear", [n("w"), n("sw"), n("zw")], [n("wf")], **axis),
                  helper.make_node("DequantizeLinear", [n("b"), n("sb"), n("zb")], [n("bf")], **axis),
                  helper.make_node("Conv", [n("xf"), n("wf"), n("bf")], [n("yf")], pads=pads, kernel_shape=[3, 3],
                                   group=group, strides=[stride, stride]),
                  helper.make_node("Relu", [n("yf")], [n("ya")]) if act == "relu"
                  else helper.make_node("Clip", [n("yf"), n("lo"), n("hi")], [n("ya")]),
                  helper.make_node("QuantizeLinear", [n("ya"), n("sy"), n("zy")], [n("y")])]
        x = n("y")
    graph = helper.make_graph(nodes, "qdq2", [helper.make_tensor_value_info("x", TensorProto.INT8, [1, 6, 12, 12])],
                              [helper.make_tensor_value_info(x, TensorProto.INT8, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path.write_bytes(model.SerializeToString())
    return path


@pytest.mark.parametrize("target, depthwise, offloaded", [("qvanilla", True, 2), ("chocolate", False, 2),
                                                          ("chocolate", True, 1)])
@pytest.mark.relay  # compares with the Relay engine
def test_onnx_qdq_convs_offload_as_on_the_relay_engine(tmp_path, target, depthwise, offloaded):
    """ONNX's int8 convs (QDQ, NCHW) are offloaded to the int8 backends: made NHWC around the chain,
    the transposes between two offloaded layers cancelled; ReLU and Clip(0, 6) the kernel's clamp;
    TVM's rounding, as the Relay engine (outputs equal to its MLF's bit for bit) and ONNX Runtime
    (within one step: ties)."""
    from tvm_extension.testing import onnxruntime_reference  # pylint: disable=import-outside-toplevel

    model = qdq_network(tmp_path / "qdq.onnx", depthwise)
    done = relax_engine("compile", str(model), "--target", target, "-f", "mlf", "-o", "relax.tar", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.search(rf"\] offloaded: .* in {offloaded} functions", done.stdout), done.stdout
    if offloaded == 2:  # only the model's input and output are transposed
        assert re.search(r"on the CPU: permute_dims x2$", done.stdout, re.M), done.stdout
    else:
        assert "depthwise (not a matrix product" in done.stdout, done.stdout
    done = run_tvmc("compile", "--target", target, model, "-f", "mlf", "-o", tmp_path / "relay.tar", reuse=True)
    assert done.returncode == 0, done.stderr[-2000:]
    programs = [build(tmp_path / f"{name}.tar", tmp_path / name) for name in ("relax", "relay")]
    rng = np.random.default_rng(2)
    for run in range(3):
        inputs = {"x": rng.integers(-128, 128, (1, 6, 12, 12)).astype(np.int8)}
        got, relay = (next(iter(p.run(inputs)[0].values())) for p in programs)
        assert got.shape == (1, 8, 6, 6) and np.unique(got).size > 10
        assert np.array_equal(got, relay), f"run {run}: differs from the Relay engine's MLF"
        assert np.abs(got.astype(np.int32) - onnxruntime_reference(model, inputs)[0]).max() <= 1


@pytest.mark.relay  # compares with the Relay engine
def test_chocolate_float_conv_in_an_int8_model_as_on_the_relay_engine(tmp_path, monkeypatch):
    """An int8 QDQ conv, then a float conv with bias and ReLU on its dequantized output: the int8
    chain is matched before folding, the float conv after, both on the core, as on the Relay engine
    (outputs and counters equal to its MLF's)."""
    from onnx import TensorProto, helper, numpy_helper  # pylint: disable=import-outside-toplevel
    import onnx  # pylint: disable=import-outside-toplevel
    from test_relax_chocolate import counters  # pylint: disable=import-outside-toplevel
    from tvm_extension.testing import onnxruntime_reference, qdq_model  # pylint: disable=import-outside-toplevel

    model = onnx.load(qdq_model(tmp_path / "int8.onnx", True, True))
    rng = np.random.default_rng(4)
    model.graph.initializer.extend([
        numpy_helper.from_array(rng.standard_normal((4, 8, 3, 3)).astype(np.float32), "fw"),
        numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "fb"),
        numpy_helper.from_array(np.float32(0.2), "sy2"), numpy_helper.from_array(np.int8(-5), "zy2")])
    model.graph.node.extend([helper.make_node("DequantizeLinear", ["y", "sy2", "zy2"], ["yf2"]),
                             helper.make_node("Conv", ["yf2", "fw", "fb"], ["z0"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
                             helper.make_node("Relu", ["z0"], ["z"])])
    del model.graph.output[:]
    model.graph.output.extend([helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 4, 10, 10])])
    onnx.save(model, tmp_path / "mixed.onnx")
    done = relax_engine("compile", "mixed.onnx", "--target", "chocolate", "-f", "mlf", "-o", "relax.tar", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "patterns: conv2d_int8_bias_clip x1, conv2d_bias_relu x1" in done.stdout, done.stdout
    assert re.search(r"on the CPU: permute_dims x2, dequantize x1$", done.stdout, re.M), done.stdout
    done = run_tvmc("compile", "--target", "chocolate", tmp_path / "mixed.onnx", "-f", "mlf", "-o",
                    tmp_path / "relay.tar", reuse=True)
    assert done.returncode == 0, done.stderr[-2000:]
    programs = {name: build(tmp_path / f"{name}.tar", tmp_path / name) for name in ("relax", "relay")}
    for run in range(2):
        inputs, seen = {"x": rng.integers(-128, 128, (1, 4, 10, 10)).astype(np.int8)}, {}
        for name, program in programs.items():
            monkeypatch.setenv("CHOCOLATE_REPORT", str(tmp_path / f"{name}{run}.txt"))
            seen[name] = (next(iter(program.run(inputs)[0].values())), counters(tmp_path / f"{name}{run}.txt"))
        assert np.array_equal(seen["relax"][0], seen["relay"][0]), f"run {run}"
        assert seen["relax"][1] == seen["relay"][1] and int(seen["relax"][1]["chocolate.core_calls"]) > 0
        # ONNX Runtime (onnx.reference has no DequantizeLinear of opset 13); no int8 tie on these inputs
        assert_close(seen["relax"][0], onnxruntime_reference(tmp_path / "mixed.onnx", inputs)[0], 1e-4)


@pytest.mark.quick
def test_the_workspace_plan_shares_bytes_only_between_buffers_never_live_at_once():
    """Random lifetimes: no two buffers live at the same call overlap in bytes, every offset is
    aligned, and the arena is no larger than one buffer after another (far smaller here); buffers
    offered as groups (never live at once, as in one Relax storage) likewise, and never a larger arena."""
    from tvm_extension.mlf.arena import ALIGN, plan_arena  # pylint: disable=import-outside-toplevel

    def assert_apart(buffers, offsets, arena):
        for i, (size, first, last) in enumerate(buffers):
            assert offsets[i] % ALIGN == 0 and offsets[i] + size <= arena
            for j, (other, first2, last2) in enumerate(buffers[:i]):
                if first <= last2 and first2 <= last:
                    assert offsets[i] + size <= offsets[j] or offsets[j] + other <= offsets[i], (buffers, offsets)

    rng = np.random.default_rng(8)
    for _ in range(200):
        buffers = []
        for _ in range(rng.integers(1, 30)):
            first = int(rng.integers(0, 20))
            buffers.append((int(rng.integers(1, 5000)), first, first + int(rng.integers(0, 4))))
        offsets, arena = plan_arena(buffers)
        assert_apart(buffers, offsets, arena)
        assert arena <= sum((size + ALIGN - 1) // ALIGN * ALIGN for size, _, _ in buffers)
        groups = []  # each buffer joins the first group it is never live at once with, or one of its own
        for i, (_, first, last) in enumerate(buffers):
            group = next((g for g in groups if all(last < buffers[j][1] or buffers[j][2] < first for j in g)), None)
            group.append(i) if group is not None else groups.append([i])
        grouped, size = plan_arena(buffers, [g for g in groups if len(g) > 1])
        assert_apart(buffers, grouped, size)
        assert size <= arena
    # Three calls, each reading the last one's output: two buffers' bytes suffice.
    assert plan_arena([(100, 0, 1), (100, 1, 2), (100, 2, 3)]) == ([0, 112, 0], 224)


def test_tflite_exact_keeps_a_backends_chains_on_the_cpu_when_it_lacks_tflites_rounding(tmp_path):
    """Chocolate's core rounds as TVM does: under --tflite-exact its int8 chains stay on the CPU,
    the report says why in the Relay engine's words, and the MLF computes TFLite's reference kernels."""
    from tvm_extension.testing import tflite_interpreter  # pylint: disable=import-outside-toplevel

    model = fetch("kws_dscnn_int8")
    done = relax_engine("compile", str(model), "--target", "chocolate", "--tflite-exact", "-f", "mlf", "-o",
                        "exact.tar", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "[chocolate] offloaded: none in 0 functions" in done.stdout, done.stdout
    assert "nn.conv2d: the model asks for TFLite's rounding, which this backend does not compute x5" in done.stdout
    assert "pattern did not match" not in done.stdout, done.stdout
    tflite = tflite_interpreter()
    interpreter = tflite.Interpreter(model_path=str(model), experimental_op_resolver_type=tflite.OpResolverType.BUILTIN_REF)
    interpreter.allocate_tensors()
    program = build(tmp_path / "exact.tar", tmp_path / "exact")
    inputs = {"input_1": np.random.default_rng(12).uniform(-40, 80, (1, 50, 10, 1)).astype(np.float32)}
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], inputs["input_1"])
    interpreter.invoke()
    (got,) = program.run(inputs)[0].values()
    assert np.array_equal(got, interpreter.get_tensor(interpreter.get_output_details()[0]["index"]))



def constants_model(path):
    """float32 x [1, 8] -> double, times and plus scalar float64 constants of 16 digits (TIR
    constants in the C): y (float64); and a float32 tensor two operators read, a matmul between
    them: z = (x + c) @ w + c (float32)."""
    from onnx import TensorProto, helper, numpy_helper
    inits = [numpy_helper.from_array(np.array(SCALE), "scale"), numpy_helper.from_array(np.array(SHIFT), "shift"),
             numpy_helper.from_array(C, "c"), numpy_helper.from_array(W, "w")]
    nodes = [helper.make_node("Cast", ["x"], ["xd"], to=TensorProto.DOUBLE),
             helper.make_node("Mul", ["xd", "scale"], ["m"]), helper.make_node("Add", ["m", "shift"], ["y"]),
             helper.make_node("Add", ["x", "c"], ["a"]), helper.make_node("MatMul", ["a", "w"], ["p"]),
             helper.make_node("Add", ["p", "c"], ["z"])]
    graph = helper.make_graph(nodes, "constants", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [1, 8]),
                               helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 8])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


SCALE, SHIFT = 0.1234567890123456, -2.718281828459045
C = (np.linspace(0.1, 0.9, 8, dtype=np.float32) / 3).reshape(1, 8)
W = np.eye(8, dtype=np.float32)[::-1] * np.float32(0.5)


def test_float64_constants_are_exact_and_a_shared_constant_is_one_array(tmp_path):
    """float64 constants are written exactly as float32 ones are (TVM prints both with 7 digits):
    the outputs equal numpy's bit for bit; a constant two operators read is one C array."""
    model = constants_model(tmp_path / "constants.onnx")
    archive = relax_mlf(model, tmp_path / "m.tar")
    x = np.linspace(-2, 2, 8, dtype=np.float32).reshape(1, 8) + np.float32(1 / 3)
    got = list(build(archive, tmp_path / "mlf").run({"x": x})[0].values())
    expected = onnx_reference(model, {"x": x})
    np.testing.assert_array_equal(expected[0], x.astype(np.float64) * SCALE + SHIFT)  # the reference is numpy's
    assert len(got) == 2 and got[0].dtype == np.float64
    np.testing.assert_array_equal(got[0].reshape(1, 8), expected[0])
    np.testing.assert_array_equal(got[1].reshape(1, 8), expected[1])
    code = "\n".join(sources(archive).values())
    arrays = re.findall(r"static const (?:float|double) (\w+)\[", code)
    assert len(arrays) == 2, arrays  # c (read by two operators) and w
    assert not re.search(r"\d\.\d{6}e[+-]\d+", code)  # every float constant exact (hexadecimal)


# Compiles with TVM's C printer writing 9 digits instead of 7 (as a TVM release might): the
# engine's markers for exact constants are no longer found in the C.
COMPILE_WITH_ANOTHER_PRINTER = """
import re, sys
import tvm
from tvm_extension.relax import UserError, compile_model
get_global_func = tvm.get_global_func
class Printed:
    def __init__(self, source):
        self.source = source
    def inspect_source(self):
        return self.source
def nine_digits(mod, target):
    return Printed(re.sub(r"(\\d)\\.(\\d{6})e", r"\\1.\\g<2>00e", get_global_func("target.build.c")(mod, target).inspect_source()))
tvm.get_global_func = lambda name, *args: nine_digits if name == "target.build.c" else get_global_func(name, *args)
try:
    compile_model(sys.argv[1], "c", "m.tar", output_format="mlf")
except UserError as err:
    print(err)
"""


def test_constants_the_printer_writes_another_way_stop_the_compile(tmp_path):
    """Never C that computes something else: if TVM prints float constants otherwise than the engine
    expects, the compile stops in one line and writes nothing."""
    done = subprocess.run([str(RELAX_PYTHON), "-c", COMPILE_WITH_ANOTHER_PRINTER, str(CNN)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("the C printer left a decimal constant (7.00000"), done.stdout
    assert "prints float constants in a way this engine was not written for" in done.stdout
    assert not (tmp_path / "m.tar").exists()


# A Relax main whose operator reads a view of its input 32 bytes in, as another type.
VIEW_AT_AN_OFFSET = """import tvm
from tvm import relax, tirx
from tvm.script import ir as I, relax as R, tirx as T
from tvm_extension.relax import aot

@I.ir_module
class Module:
    @T.prim_func
    def twice(a: T.Buffer((2, 4), "int32"), b: T.Buffer((2, 4), "int32")):
        for i, j in T.grid(2, 4):
            b[i, j] = a[i, j] * 2

    @R.function
    def main(x: R.Tensor((4, 8), "float32")) -> R.Tensor((2, 4), "int32"):
        cls = Module
        with R.dataflow():
            v = R.memory.view(x, R.shape([2, 4]), R.dtype("int32"), R.prim_value(T.int64(32)))
            y = R.call_tir(cls.twice, (v,), out_ty=R.Tensor((2, 4), "int32"))
            R.output(y)
        return y

print(next(line for line in aot.aot_c(Module, ["y"]).source.splitlines() if "status = tvmgen_default_twice(" in line))
"""


def test_a_view_at_an_offset_passes_the_bytes_from_there(tmp_path):
    """``relax.memory.view`` with a byte offset and another dtype: the operator gets the tensor's
    pointer moved by the offset and cast (the engine took the tensor's first byte before)."""
    (tmp_path / "view.py").write_text(VIEW_AT_AN_OFFSET)  # TVMScript reads its source file
    done = subprocess.run([str(RELAX_PYTHON), "view.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "tvmgen_default_twice((int32_t*)((uint8_t*)(inputs->x) + 32), " in done.stdout, done.stdout


# Compiles with TVM's pipeline as a new TVM might run it: the entry function annotated (its
# __tvm_ffi_main alias needs TVM's runtime), and on an apache-tvm the engine was not tested with.
COMPILE_AS_ANOTHER_TVM = """
import sys
from tvm_extension.relax import UserError, compile_model, tvm_internals
tvm_internals._PACKED_API.remove("tirx.AnnotateEntryFunc")
tvm_internals.TESTED_VERSIONS = ("0.0.0",)
try:
    compile_model(sys.argv[1], "c", "m.tar", output_format="mlf")
except UserError as err:
    print(err)
"""


def test_operator_c_that_needs_tvms_runtime_stops_the_compile(tmp_path):
    """A lowering the engine does not undo (the packed API's entry alias) stops the compile in one
    line, with nothing written; an untested apache-tvm is named in one warning line first."""
    done = subprocess.run([str(RELAX_PYTHON), "-c", COMPILE_AS_ANOTHER_TVM, str(MODELS / "conv2d.onnx")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("the operators' C needs TVM's runtime (__tvm_ffi_main): apache-tvm "), done.stdout
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning: apache-tvm ")]
    assert len(warnings) == 1 and "tested with apache-tvm 0.0.0" in warnings[0], done.stderr
    assert not (tmp_path / "m.tar").exists()
