"""The Relax engine (apache-tvm 0.27, tvm_extension/relax; docs/relax.md) compiles the example CNN
for Vanilla: its convs become calls of Vanilla's C API linked into the shared library, and the
library, run with the Relax VM, agrees with onnx.reference.

The engine runs in its own environment (.venv-relax, made by scripts/env.sh test): its package is
named tvm like hhb-tvm's, so it runs here as subprocesses; the reference is computed in this one.
"""
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from onnx.reference import ReferenceEvaluator

from conftest import MODELS, ROOT, run_tvmc
from tvm_extension.mlf import HostBuildError, build

RELAX_PYTHON = ROOT / ".venv-relax" / "bin" / "python"
TVMC = ROOT / ".venv-relax" / "bin" / "tvmc"  # the console script, in that environment: tvmc on the Relax engine
CNN = MODELS / "cnn.onnx"


def relax_engine(*args, cwd, env=None):
    """``tvmc ARGS`` in the Relax environment, with no PYTHONPATH of this one."""
    assert TVMC.is_file(), (f"{TVMC} is missing: run `source scripts/env.sh test` (or scripts/test.sh) "
                                     "to set up the Relax engine's environment")
    environment = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run([str(TVMC), *args], cwd=cwd, capture_output=True, text=True, timeout=600,
                          env={**environment, **(env or {})})


def report_line(report: str, what: str, target="vanilla_accelerator") -> str:
    """The offload report's line ``[target] what: ...`` (tvmc's format), without its prefix; "" if absent."""
    prefix = f"[{target}] {what}: "
    return next((line[len(prefix):] for line in report.splitlines() if line.startswith(prefix)), "")


def patterns_matched(report: str, target="vanilla_accelerator") -> dict:
    """{pattern: calls} of the report's ``patterns:`` line."""
    items = (item.rsplit(" x", 1) for item in report_line(report, "patterns", target).split(", ") if item)
    return {name: int(n) for name, n in items}


def call_sites(library, kernel="vanilla_conv2dnchw_general"):
    """How many places of the library's code call ``kernel`` (objdump's disassembly)."""
    code = subprocess.run(["objdump", "-d", str(library)], capture_output=True, text=True, check=True).stdout
    return len(re.findall(rf"call\s+\S+\s+<{kernel}(?:@plt)?>", code))


@pytest.fixture(scope="module")
def cnn_library(tmp_path_factory):
    work = tmp_path_factory.mktemp("relax")
    done = relax_engine("compile", str(CNN), "--target", "vanilla_accelerator", "-o", "cnn.so", cwd=work)
    assert done.returncode == 0, done.stderr
    return work / "cnn.so", done.stdout


@pytest.mark.quick
def test_convs_become_calls_of_vanillas_c_api(cnn_library):
    library, report = cnn_library
    # Three of the four convs fit Vanilla; the dilated one stays on the CPU, said with its reason.
    assert report_line(report, "offloaded").endswith(" in 3 functions"), report
    assert "nn.conv2d x3" in report_line(report, "offloaded") and "nn.conv2d x1" in report_line(report, "on the CPU")
    assert report_line(report, "not offloaded") == "nn.conv2d: dilation 2x2 x1", report
    assert call_sites(library) == 3


@pytest.mark.quick
def test_outputs_agree_with_onnx_reference(cnn_library, tmp_path):
    library, _ = cnn_library
    x = np.random.default_rng(24).standard_normal((1, 3, 16, 16)).astype(np.float32)
    np.savez(tmp_path / "in.npz", input=x)
    done = relax_engine("run", str(library), "-i", "in.npz", "-o", "out.npz", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    with np.load(tmp_path / "out.npz") as out:
        got = out["output_0"]
    (expected,) = ReferenceEvaluator(str(CNN)).run(None, {"input": x})
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-4)


def test_target_llvm_offloads_nothing_and_run_can_time(tmp_path):
    """--target llvm: TVM's own kernels only (what an offload is compared with); run --print-time
    --repeat N prints the mean time of N more runs, as tvmc does."""
    done = relax_engine("compile", str(CNN), "--target", "llvm", "-o", "plain.so", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == "llvm: nothing offloaded", done.stdout + done.stderr
    assert call_sites(tmp_path / "plain.so") == 0
    x = np.random.default_rng(5).standard_normal((1, 3, 16, 16)).astype(np.float32)
    np.savez(tmp_path / "in.npz", input=x)
    done = relax_engine("run", "plain.so", "-i", "in.npz", "-o", "out.npz", "--print-time", "--repeat", "3", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(r"Execution time summary:\n mean \(ms\) of 3 runs\n \d+\.\d{4}", done.stdout.strip()), done.stdout
    with np.load(tmp_path / "out.npz") as out:
        np.testing.assert_allclose(out["output_0"], ReferenceEvaluator(str(CNN)).run(None, {"input": x})[0], atol=1e-4)


def test_target_attribute_reaches_the_patterns(tmp_path):
    """max_kernel_size 3: the 5x5 conv stays on the CPU too, and the kernel is called twice."""
    done = relax_engine("compile", str(CNN), "--target", "vanilla_accelerator", "-o", "cnn.so",
                        "--target-vanilla_accelerator-max_kernel_size=3", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "kernel 5x5 larger than the window buffer (max_kernel_size 3)" in done.stdout
    assert call_sites(tmp_path / "cnn.so") == 2


REGISTERED = """
import sys
import onnx
import tvm
from tvm import relax
from tvm.relax.backend import get_patterns_with_prefix
from tvm.relax.frontend.onnx import from_onnx
patterns = get_patterns_with_prefix("vanilla_accelerator")
print(sorted(p.name for p in patterns))
# a Relax pipeline of the user's own: the registered checks refuse what Vanilla cannot compute
mod = relax.transform.FoldConstant()(from_onnx(onnx.load(sys.argv[1]), keep_params_in_input=False))
mod = relax.transform.FuseOpsByPattern(patterns, annotate_codegen=False)(mod)
print(sum(1 for _, f in mod.functions.items() if f.attrs is not None and "Composite" in f.attrs))
"""


@pytest.mark.parametrize("autoload", ["1", "0"])
def test_an_installed_backend_registers_at_import_tvm(tmp_path, autoload):
    """uma_vanilla, pip-installed in the Relax environment (scripts/env.sh), declares a "tvm.backends"
    entry point: a plain `import tvm` puts its patterns in TVM's pattern registry (and the engine
    finds it with no option, as every test here compiles); TVM_DEVICE_BACKEND_AUTOLOAD=0 turns it off."""
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([str(RELAX_PYTHON), "-c", REGISTERED, str(CNN)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, env={**environment, "TVM_DEVICE_BACKEND_AUTOLOAD": autoload})
    assert done.returncode == 0, done.stderr  # (and no abort at exit: the check functions are released in time)
    names, composites = done.stdout.splitlines()
    if autoload == "1":
        stages, activations = ("", "_bias", "_bias_residual"), ("", "_relu", "_clip", "_prelu", "_flat_prelu")
        assert eval(names) == sorted(f"vanilla_accelerator.conv2d{s}{a}" for s in stages for a in activations)
        assert composites == "3"  # of the 4 convs: the dilated one is refused, as by the engine
    else:
        assert (names, composites) == ("[]", "0")


SCAFFOLD_MODEL = """
import sys
sys.path.insert(0, sys.argv[1])
from test_my_npu import conv_model
conv_model(sys.argv[2])
"""


@pytest.mark.relay  # compares with the Relay engine
def test_a_scaffolded_backend_compiles_on_both_engines(tmp_path):
    """`python -m tvm_extension new my_npu` writes relax_patterns.py too: the same folder, unchanged,
    compiles with tvmc (Relay, MLF) and with tvmc on apache-tvm (Relax, a shared library calling its C),
    and both agree with onnx.reference and with each other."""
    subprocess.run([sys.executable, "-m", "tvm_extension", "new", "my_npu", "--directory", str(tmp_path)], check=True,
                   capture_output=True)
    project = tmp_path / "my_npu"
    model = tmp_path / "conv.onnx"
    subprocess.run([sys.executable, "-c", SCAFFOLD_MODEL, str(project / "tests"), str(model)], check=True)
    done = relax_engine("compile", model, "--target", "my_npu", "--experimental-tvm-extension", project, "-o", "conv.so",
                        cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert report_line(done.stdout, "offloaded", "my_npu").startswith("nn.conv2d x1"), done.stdout
    assert report_line(done.stdout, "offloaded", "my_npu").endswith(" in 1 functions"), done.stdout
    assert call_sites(tmp_path / "conv.so", "my_npu_conv2d") == 1
    x = np.random.default_rng(3).standard_normal((1, 4, 9, 9)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    done = relax_engine("run", "conv.so", "-i", "in.npz", "-o", "out.npz", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    with np.load(tmp_path / "out.npz") as out:
        relax_output = out["output_0"]
    done = run_tvmc("compile", "--target", "my_npu", "--experimental-tvm-extension", project, model, "-f", "mlf",
                    "-o", tmp_path / "conv.tar")
    assert done.returncode == 0, done.stderr
    (relay_output,) = build(tmp_path / "conv.tar", tmp_path / "mlf").run({"x": x})[0].values()
    (expected,) = ReferenceEvaluator(str(model)).run(None, {"x": x})
    np.testing.assert_allclose(relax_output, expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(relay_output, relax_output, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("args, message", [
    (["-f", "elf"], "error: argument -f/--output-format: invalid choice: 'elf'"),
    (["--input-shapes", "inp:[1,3,16,16]"], "error: --input-shapes names 'inp', which is not an input of 'cnn.onnx' "
                                            "(its inputs: input)"),
    (["--input-shapes", "input:[1,3"], "error: --input-shapes 'input:[1,3': expected NAME:[D1,D2,...]"),
    (["--executor", "aot"], "error: --executor aot: -f so builds a library for the Relax VM, which has no executor "
                            "or runtime to choose; AOT C on the CRT is -f mlf"),
    (["--target", "no_such_accelerator"], "error: unknown target 'no_such_accelerator' for the Relax engine "
                                          "(backends with a relax_patterns.py found: chocolate, qvanilla, strawberry, vanilla_accelerator)"),
    (["--target", "vanilla_accelerator", "--target-vanilla_accelerator-max_kernel_size=9"],
     "error: target 'vanilla_accelerator': attribute 'max_kernel_size' must be between 1 and 8, got 9"),
])
@pytest.mark.quick
def test_user_errors_are_one_line(tmp_path, args, message):
    if "--target" not in args:
        args = [*args, "--target", "vanilla_accelerator"]
    done = relax_engine("compile", str(CNN), *args, "-o", "cnn.so", cwd=tmp_path)
    assert done.returncode == 1 and done.stderr.startswith(message) and len(done.stderr.splitlines()) == 1, done.stderr
    assert not (tmp_path / "cnn.so").exists()


@pytest.mark.quick
def test_a_malformed_source_date_epoch_stops_the_mlf_in_one_line(tmp_path):
    """As on the Relay engine (test_reproducible_mlf.py): the reproducible-builds date is checked before compiling."""
    done = relax_engine("compile", str(CNN), "--target", "vanilla_accelerator", "-f", "mlf", "-o", "cnn.tar",
                        cwd=tmp_path, env={"SOURCE_DATE_EPOCH": "yesterday"})
    assert done.returncode == 1 and len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith("error: SOURCE_DATE_EPOCH must be a whole number of seconds since 1970, not "
                                  "'yesterday'"), done.stderr
    assert not (tmp_path / "cnn.tar").exists()

BAD_STRIDE = """
import numpy as np
from tvm_extension.relax import UserError, backends, compile_model, run_model
vanilla = backends.find("vanilla_accelerator")
geometry = vanilla.conv_geometry
vanilla.conv_geometry = lambda conv: {**geometry(conv), "stride_w": 0}  # VANILLA_ESTRIDE from the kernel
compile_model(%r, "vanilla_accelerator", "bad.so")
compile_model(%r, "vanilla_accelerator", "bad.tar", output_format="mlf")
try:
    run_model("bad.so", {"input": np.zeros((1, 3, 16, 16), "float32")})
except UserError as err:
    print(err)
"""


def test_a_kernels_refusal_fails_the_inference(tmp_path):
    """A non-zero status of the C kernel is an error at the call, not wrong numbers; the MLF's
    ``tvmgen_default_run`` returns the kernel's own status (VANILLA_ESTRIDE), as the Relay engine's does."""
    assert RELAX_PYTHON.is_file(), f"{RELAX_PYTHON} is missing: run `source scripts/env.sh test`"
    done = subprocess.run([str(RELAX_PYTHON), "-c", BAD_STRIDE % (str(CNN), str(CNN))], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ("running 'bad.so' failed: vanilla_accelerator: the kernel refused "
                                   "vanilla_accelerator.conv2d_relu (a non-zero status)")
    assert_mlf_refuses(tmp_path / "bad.tar", {"input": np.zeros((1, 3, 16, 16), np.float32)},
                       "inference failed with status 3 conv2d_relu: a kernel refused its arguments")


def assert_mlf_refuses(mlf, inputs, message):
    """The MLF, built and run on the host, fails with ``message`` (the harness's line: the status
    ``tvmgen_default_run`` returned and TVMGetLastError())."""
    with pytest.raises(HostBuildError) as refused:
        build(mlf, mlf.parent / "mlf").run(inputs)
    assert str(refused.value).startswith(message), refused.value


# The real float networks of the test suite (tests/test_real_networks.py, the Relay engine's): the
# zoo's files are fetched (and cached) here and handed to the Relax environment as paths.
# name: input shapes, the framework's interpreter, {pattern: count} of the matches offloaded
# (every conv of the network, with the output stage the Relay engine fuses too), and the call
# sites of each kernel in the library's code (identical layers share one function).
NHWC, DEPTHWISE_NHWC, NCHW = "vanilla_conv2dnhwc_general", "vanilla_depthwise_conv2dnhwc", "vanilla_conv2dnchw_general"
REAL_NETWORKS = {
    "blazeface": ({"input": (1, 128, 128, 3)}, "tflite",
                  {"conv2d_bias_relu": 1, "conv2d_bias": 20, "conv2d_bias_residual_relu": 16}, {NHWC: 18, DEPTHWISE_NHWC: 12}),
    "kws_on_off_float32": ({"serving_default_input_1:0": (1, 98, 1, 104)}, "tflite",
                           {"conv2d_bias": 1, "conv2d_bias_relu": 54, "conv2d_bias_residual_relu": 24},
                           {NHWC: 20, DEPTHWISE_NHWC: 12}),
    # TFLite's PReLU, imported flattened between two reshapes, is offloaded with its conv, one slope per channel.
    "face_landmark": ({"input_1": (1, 192, 192, 3)}, "tflite",
                      {"conv2d_bias_flat_prelu": 3, "conv2d_bias": 22, "conv2d_bias_residual_flat_prelu": 20},
                      {NHWC: 14, DEPTHWISE_NHWC: 12}),
    # Dynamic spatial size, fixed as tvmc's --input-shapes does.  onnx.reference 1.18 gives P-Net
    # another output size and refuses O-Net's MatMul: ONNX Runtime is the framework's reference, as for Relay.
    "mtcnn_pnet": ({"input_1": (1, 24, 24, 3)}, "onnxruntime", {"conv2d_bias_prelu": 3, "conv2d_bias": 2}, {NCHW: 5}),
    "mtcnn_onet": ({"input_3": (1, 48, 48, 3)}, "onnxruntime", {"conv2d_bias_prelu": 4}, {NCHW: 4}),
}

COMPILE = """
import sys
from tvm_extension.relax import compile_model
print("\\n".join(compile_model(sys.argv[1], "vanilla_accelerator", sys.argv[2], shapes=eval(sys.argv[3]))))
"""


def relax_outputs(library, inputs, work):
    np.savez(work / "in.npz", **inputs)
    done = relax_engine("run", str(library), "-i", "in.npz", "-o", "out.npz", cwd=work)
    assert done.returncode == 0, done.stderr
    with np.load(work / "out.npz") as out:
        return [out[f"output_{i}"] for i in range(len(out.files))]


@pytest.mark.real_model
@pytest.mark.parametrize("name", list(REAL_NETWORKS))
@pytest.mark.relay  # compares with the Relay engine
def test_real_float_network(tmp_path, name):
    """Every conv of the network is a call of Vanilla's C API in the library; its outputs agree with
    the framework's interpreter and with the Relay engine's MLF on the same inputs (1e-4 of the
    output's scale: float32 sums in other orders)."""
    from conftest import ZOO_FLOAT_INPUTS, assert_close, onnxruntime_reference, tflite_reference, vanilla_relay_mlf
    from tvm_extension.mlf import build
    from tvm_extension.testing.model_zoo import fetch

    shapes, framework, offloaded, sites = REAL_NETWORKS[name]
    assert shapes == ZOO_FLOAT_INPUTS[name]
    model, library = fetch(name), tmp_path / "model.so"
    environment = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run([str(RELAX_PYTHON), "-c", COMPILE, str(model), str(library), repr(shapes)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=900, env=environment)
    assert done.returncode == 0, done.stderr[-2000:]
    total = sum(offloaded.values())
    assert patterns_matched(done.stdout) == offloaded, done.stdout
    assert f"nn.conv2d x{total}," in report_line(done.stdout, "offloaded"), done.stdout
    assert report_line(done.stdout, "offloaded").endswith(f" in {total} functions"), done.stdout
    assert "conv2d" not in report_line(done.stdout, "on the CPU") and "not offloaded" not in done.stdout, done.stdout
    kernels = (NCHW, NHWC, DEPTHWISE_NHWC, "vanilla_depthwise_conv2dnchw")
    assert {k: call_sites(library, k) for k in kernels} == {k: sites.get(k, 0) for k in kernels}

    rng = np.random.default_rng(11)
    inputs = {n: rng.standard_normal(s).astype(np.float32) for n, s in shapes.items()}
    got = relax_outputs(library, inputs, tmp_path)
    expected = (tflite_reference if framework == "tflite" else onnxruntime_reference)(model, inputs)
    relay = vanilla_relay_mlf(name, tmp_path / "model.tar")
    assert relay.returncode == 0, relay.stderr[-2000:]
    relay_outputs = list(build(tmp_path / "model.tar", tmp_path / "build").run(inputs)[0].values())
    assert len(got) == len(expected) == len(relay_outputs) >= 1
    for i, (g, e, r) in enumerate(zip(got, expected, relay_outputs)):
        assert_close(g, e, what=f"{name} output {i} vs {framework}")
        assert_close(g, r, what=f"{name} output {i} vs the Relay engine's MLF")


@pytest.mark.parametrize("name, content, message", [
    ("model.tflite", b"not a flatbuffer", "error: 'model.tflite' is not a readable TFLite model: no TFL3 flatbuffer identifier"),
    ("model.tflite", b"\x1c\x00\x00\x00TFL3" + bytes(8), "error: TVM's Relax TFLite frontend cannot import 'model.tflite': "),
    ("model.pb", b"", "error: 'model.pb': the Relax engine reads ONNX (.onnx) and TFLite (.tflite) models"),
])
def test_a_model_it_cannot_read_is_one_line(tmp_path, name, content, message):
    (tmp_path / name).write_bytes(content)
    done = relax_engine("compile", name, "--target", "vanilla_accelerator", "-o", "model.so", cwd=tmp_path)
    assert done.returncode == 1 and done.stderr.startswith(message) and len(done.stderr.splitlines()) == 1, done.stderr
    assert not (tmp_path / "model.so").exists()



def stage_model(path):
    """NCHW conv -> bias -> Relu, then a depthwise conv -> bias -> + the first's output -> Relu: the
    depthwise NCHW call none of the real networks above has."""
    from onnx import TensorProto, helper, numpy_helper, save

    rng = np.random.default_rng(6)
    const = lambda name, *shape: numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["a1"]),
        helper.make_node("Conv", ["a1", "w2", "b2"], ["c2"], group=8, strides=[1, 1], pads=[2, 1, 2, 1]),
        helper.make_node("Add", ["a1", "c2"], ["s"]),
        helper.make_node("Relu", ["s"], ["y"]),
    ]
    initializers = [const("w1", 8, 3, 3, 3), const("b1", 8), const("w2", 8, 1, 5, 3), const("b2", 8)]
    graph = helper.make_graph(nodes, "stages", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 12, 10])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 12, 10])], initializers)
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))


def test_depthwise_residual_nchw(tmp_path):
    stage_model(tmp_path / "stages.onnx")
    done = relax_engine("compile", "stages.onnx", "--target", "vanilla_accelerator", "-o", "stages.so", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert patterns_matched(done.stdout) == {"conv2d_bias_relu": 1, "conv2d_bias_residual_relu": 1}, done.stdout
    assert "conv2d" not in report_line(done.stdout, "on the CPU"), done.stdout
    assert (call_sites(tmp_path / "stages.so"), call_sites(tmp_path / "stages.so", "vanilla_depthwise_conv2dnchw")) == (1, 1)
    x = np.random.default_rng(7).standard_normal((1, 3, 12, 10)).astype(np.float32)
    (got,) = relax_outputs(tmp_path / "stages.so", {"x": x}, tmp_path)
    (expected,) = ReferenceEvaluator(str(tmp_path / "stages.onnx")).run(None, {"x": x})
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-4)


def test_clip_of_an_onnx_model(tmp_path):
    """ONNX's Clip (TIR maximum, then minimum, as the frontend imports it) becomes relax.clip, the
    output stage of Vanilla's patterns; a Clip with only a lower bound stays on the CPU."""
    from onnx import TensorProto, helper, numpy_helper, save

    rng = np.random.default_rng(8)
    const = lambda name, value: numpy_helper.from_array(np.asarray(value, np.float32), name)
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Clip", ["c1", "zero", "six"], ["a1"]),  # ReLU6
        helper.make_node("Conv", ["a1", "w2", "b2"], ["c2"], group=8, pads=[1, 1, 1, 1]),
        helper.make_node("Clip", ["c2", "minus_one", "one"], ["a2"]),
        helper.make_node("Clip", ["a2", "zero"], ["y"]),
    ]
    initializers = [const("w1", rng.standard_normal((8, 3, 3, 3))), const("b1", rng.standard_normal(8)),
                    const("w2", rng.standard_normal((8, 1, 3, 3))), const("b2", rng.standard_normal(8)),
                    const("zero", 0), const("six", 6), const("minus_one", -1), const("one", 1)]
    graph = helper.make_graph(nodes, "clips", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 10, 10])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 10, 10])], initializers)
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(tmp_path / "clips.onnx"))
    done = relax_engine("compile", "clips.onnx", "--target", "vanilla_accelerator", "-o", "clips.so", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert patterns_matched(done.stdout) == {"conv2d_bias_clip": 2}, done.stdout
    x = np.random.default_rng(9).standard_normal((1, 3, 10, 10)).astype(np.float32) * 4
    (got,) = relax_outputs(tmp_path / "clips.so", {"x": x}, tmp_path)
    (expected,) = ReferenceEvaluator(str(tmp_path / "clips.onnx")).run(None, {"x": x})
    assert (expected == 1).any() and (expected == 0).any() and got.shape == expected.shape  # the clamps are reached
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-4)


RELU6_TFLITE = """
import sys
import numpy as np
import tensorflow as tf
tf.keras.utils.set_random_seed(6)
x = tf.keras.Input((12, 10, 3), batch_size=1)
a = tf.keras.layers.Conv2D(8, 3, padding="same", activation=tf.nn.relu6)(x)
d = tf.keras.layers.DepthwiseConv2D(3, padding="same", bias_initializer="random_normal")(a)
y = tf.keras.layers.ReLU(max_value=6.0)(tf.keras.layers.Add()([a, d]))
open(sys.argv[1], "wb").write(tf.lite.TFLiteConverter.from_keras_model(tf.keras.Model(x, y)).convert())
"""


def test_relu6_of_a_tflite_model(tmp_path):
    """TFLite's fused RELU6 imports as relax.clip(0, 6): Vanilla's output stage clamps it, after
    the residual too."""
    from conftest import tflite_reference

    done = subprocess.run([sys.executable, "-c", RELU6_TFLITE, str(tmp_path / "relu6.tflite")], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    done = relax_engine("compile", "relu6.tflite", "--target", "vanilla_accelerator", "-o", "relu6.so", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert patterns_matched(done.stdout) == {"conv2d_bias_clip": 1, "conv2d_bias_residual_clip": 1}, done.stdout
    assert "conv2d" not in report_line(done.stdout, "on the CPU"), done.stdout
    x = np.random.default_rng(7).standard_normal((1, 12, 10, 3)).astype(np.float32) * 4
    name = "serving_default_input_1:0"
    (got,) = relax_outputs(tmp_path / "relu6.so", {name: x}, tmp_path)
    (expected,) = tflite_reference(tmp_path / "relu6.tflite", {name: x})
    assert (expected == 6).any() and got.shape == expected.shape  # the clamp is reached
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-4)
