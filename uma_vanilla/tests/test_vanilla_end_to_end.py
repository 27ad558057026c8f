"""tvmc -> MLF -> gcc -> run, compared with onnx.reference and TVM's own CPU build."""
import io
import json
import re
import tarfile

import numpy as np
import pytest

pytest.importorskip("tvm.relay", reason="the Relay engine's end-to-end tests (hhb-tvm: TVM 0.16's tvmc, its options, report and MLF layout); on apache-tvm test_vanilla_either_engine.py runs this example end to end")

from tvm_extension.mlf import HostBuildError, build
from tvm_extension.testing import (assert_one_line_error, example_model, kernel_calls, mlf_sources, onnx_reference,
                                   onnxruntime_reference, random_inputs, run_tvmc, tvm_cpu_reference)
from tvm_extension.testing.models import float_model
from uma_vanilla.codegen import KERNEL_DIR

VANILLA_KERNELS = r"vanilla_(?:depthwise_)?conv2dn(?:chw|hwc)\w*"
# float32 with a different summation order than the references
TOLERANCE = dict(rtol=1e-4, atol=1e-5)


def compile_mlf(model, out, *extra):
    done = run_tvmc("compile", "--target", "vanilla_accelerator", model, "-f", "mlf", "-o", out, *extra)
    assert done.returncode == 0, done.stderr
    return out


@pytest.fixture(scope="module")
def cnn_mlf(tmp_path_factory):
    return compile_mlf(example_model("cnn"), tmp_path_factory.mktemp("cnn") / "cnn.tar")


@pytest.mark.parametrize("model,offloaded", [("conv2d.onnx", 1), ("cnn.onnx", 3)])
def test_runs_and_matches_references(tmp_path, model, offloaded):
    mlf = compile_mlf(example_model(model.removesuffix(".onnx")), tmp_path / "model.tar")
    assert kernel_calls(mlf, VANILLA_KERNELS) == offloaded
    inputs = random_inputs(example_model(model.removesuffix(".onnx")), seed=3)
    outputs, _ = build(mlf, tmp_path / "build").run(inputs)
    (got,) = outputs.values()
    np.testing.assert_allclose(got, onnx_reference(example_model(model.removesuffix(".onnx")), inputs)[0], **TOLERANCE)
    np.testing.assert_allclose(got, tvm_cpu_reference(example_model(model.removesuffix(".onnx")), inputs)[0], **TOLERANCE)


def test_offloaded_functions_are_calls_not_loops(cnn_mlf):
    offloaded = {n: t for n, t in mlf_sources(cnn_mlf).items() if "// offloaded to vanilla_accelerator" in t}
    assert len(offloaded) == 3
    for name, text in offloaded.items():
        assert "for (" not in text, f"{name} holds a loop nest"
        assert re.search(r"if \(vanilla_status != 0\) \{\s*return vanilla_status;", text), "status must be checked"
        # the kernel's scratch is a tensor of the AOT workspace, not a run-time allocation
        assert "TVMBackendAllocWorkspace" not in text, name


def test_archive_is_self_contained(cnn_mlf):
    with tarfile.open(cnn_mlf) as archive:
        names = archive.getnames()
        texts = [archive.extractfile(m).read().decode(errors="replace") for m in archive.getmembers() if m.isfile()]
    library = [n for n in names if n.endswith("vanilla_accelerator.c")]
    assert library == ["./codegen/host/src/vanilla_accelerator.c"], "kernel library exactly once"
    assert "./codegen/host/include/vanilla_accelerator.h" in names
    assert {"./runtime/include/tvm/runtime/c_backend_api.h", "./runtime/include/dlpack/dlpack.h"} <= set(names)
    assert any(n.startswith("./runtime/src/") and n.endswith(".c") for n in names)
    for text in texts:
        assert str(KERNEL_DIR.parent) not in text, "no absolute path of the build machine"
    assert not any(re.search(r'#include\s+"/', t) for t in texts)


def test_embedded_defaults(cnn_mlf):
    with tarfile.open(cnn_mlf) as archive:
        metadata = json.load(archive.extractfile("./metadata.json"))
    module = metadata["modules"]["default"]
    assert module["executors"] == ["aot"]
    assert module["external_dependencies"][0]["short_name"] == "tvm_standalone_crt"
    sources = "".join(mlf_sources(cnn_mlf).values())
    assert "struct tvmgen_default_inputs" in sources  # C interface
    assert "global_workspace" in sources  # statically planned memory, no allocator needed
    assert "float4" not in sources  # no vector types


def test_user_options_win(tmp_path):
    out = compile_mlf(example_model("cnn"), tmp_path / "o.tar", "--pass-config", "tir.disable_vectorize=0")
    assert re.search(r"\bfloat(4|8|16)\b", "".join(mlf_sources(out).values())), "vectorised as the user asked"
    assert kernel_calls(out, VANILLA_KERNELS) == 3


@pytest.mark.parametrize("args,message", [
    (["-f", "so"], "add -f mlf"),
    (["-f", "mlf", "--executor", "graph"], "AOT executor with the unpacked API"),
    (["-f", "mlf", "--executor-aot-unpacked-api", "0"], "AOT executor with the unpacked API"),
])
def test_settings_that_cannot_call_offloaded_functions(tmp_path, args, message):
    done = run_tvmc("compile", "--target", "vanilla_accelerator", example_model("cnn"), *args, "-o", tmp_path / "o")
    assert_one_line_error(done, message)
    assert not (tmp_path / "o").exists()


def test_explicit_multi_target_with_c_options(tmp_path):
    done = run_tvmc("compile", "--target", "vanilla_accelerator,c", "--target-c-constants-byte-alignment", "64",
                    example_model("cnn"), "-f", "mlf", "-o", tmp_path / "o.tar")
    assert done.returncode == 0, done.stderr
    with tarfile.open(tmp_path / "o.tar") as archive:
        metadata = json.load(archive.extractfile("./metadata.json"))
    assert "-constants-byte-alignment=64" in metadata["modules"]["default"]["target"][0]
    assert kernel_calls(tmp_path / "o.tar", VANILLA_KERNELS) == 3
    inputs = random_inputs(example_model("cnn"), seed=4)
    got = build(tmp_path / "o.tar", tmp_path / "b").run(inputs)[0]["output"]
    np.testing.assert_allclose(got, onnx_reference(example_model("cnn"), inputs)[0], **TOLERANCE)


def test_module_name_is_followed(tmp_path):
    out = compile_mlf(example_model("cnn"), tmp_path / "o.tar", "--module-name", "net")
    sources = "".join(mlf_sources(out).values())
    assert "tvmgen_net_vanilla_accelerator_main_0" in sources and "tvmgen_default" not in sources
    inputs = random_inputs(example_model("cnn"), seed=5)
    got = build(out, tmp_path / "b").run(inputs)[0]["output"]
    np.testing.assert_allclose(got, onnx_reference(example_model("cnn"), inputs)[0], **TOLERANCE)


FAILING_KERNEL = b"""#include "vanilla_accelerator.h"
int32_t vanilla_conv2dnchw_general(int8_t* buf, int32_t buf_size, float* i, float* w, float* b, float* r, float* s,
                                   float* o, int32_t ic, int32_t ih, int32_t iw, int32_t oc, int32_t oh, int32_t ow,
                                   int32_t kh, int32_t kw, int32_t sh, int32_t sw, int32_t pt, int32_t pl, float lo,
                                   float hi) {
  return 7;
}
"""


def test_kernel_failure_stops_inference(cnn_mlf, tmp_path):
    """A kernel reporting an error makes the model fail instead of returning wrong numbers."""
    failing = tmp_path / "failing.tar"
    with tarfile.open(cnn_mlf) as source, tarfile.open(failing, "w") as target:
        for member in source.getmembers():
            data = source.extractfile(member).read() if member.isfile() else None
            if member.name.endswith("vanilla_accelerator.c"):
                data = FAILING_KERNEL
                member.size = len(data)
            target.addfile(member, io.BytesIO(data) if data is not None else None)
    program = build(failing, tmp_path / "b")
    with pytest.raises(HostBuildError, match="inference failed with status -1|status 7"):
        program.run(random_inputs(example_model("cnn")))


def residual_block_model(path):
    """Conv(+bias) -> Add(skip) -> Relu twice, the skip once on each side of the Add, and a
    third Add whose other input is broadcast (stays on the CPU)."""
    import onnx
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(4)
    const = lambda name, shape: numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name)
    nodes = [
        helper.make_node("Conv", ["input", "w1", "b1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c1", "input"], ["a1"]),
        helper.make_node("Relu", ["a1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], kernel_shape=[1, 1]),
        helper.make_node("Add", ["r1", "c2"], ["a2"]),
        helper.make_node("Relu", ["a2"], ["r2"]),
        helper.make_node("Conv", ["r2", "w3", "b3"], ["c3"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c3", "row"], ["output"]),
    ]
    inits = [const("w1", (6, 6, 3, 3)), const("b1", (6,)), const("w2", (6, 6, 1, 1)), const("b2", (6,)),
             const("w3", (6, 6, 3, 3)), const("b3", (6,)), const("row", (1, 1, 1, 10))]
    onnx.save(float_model(nodes, inits, [1, 6, 9, 10], [1, 6, 9, 10], "residual"), path)
    return path


def test_residual_add_is_part_of_the_kernel_call(tmp_path):
    model = residual_block_model(tmp_path / "residual.onnx")
    out = tmp_path / "residual.tar"
    done = run_tvmc("compile", "--target", "vanilla_accelerator", model, "-f", "mlf", "-o", out)
    assert done.returncode == 0, done.stderr
    # both skip connections go into the call; the broadcast add stays on the CPU
    assert "offloaded: nn.conv2d x3, nn.bias_add x3, add x2, nn.relu x2 in 3 functions" in done.stdout, done.stdout
    calls = re.findall(r"= vanilla_conv2dnchw_general\(([^;]*)\);", "".join(mlf_sources(out).values()))
    residuals = sorted(call.split(", ")[5] != "absent" for call in calls)  # (scratch, size, ifmap, weights, bias, residual, ...)
    assert residuals == [False, True, True], calls
    inputs = {"input": np.random.default_rng(5).standard_normal((1, 6, 9, 10)).astype(np.float32)}
    (got,) = build(out, tmp_path / "build").run(inputs)[0].values()
    np.testing.assert_allclose(got, onnx_reference(model, inputs)[0], **TOLERANCE)
    np.testing.assert_allclose(got, tvm_cpu_reference(model, inputs)[0], **TOLERANCE)


def windows_model(path):
    """Convs of every window the engine takes, each with a different output stage: MTCNN's
    "valid" 3x3 with PReLU, stride 2 with ONNX's asymmetric SAME_UPPER padding, a depthwise 3x3,
    an even kernel, a strided 1x1, a 5x3 of strides (2, 1) with ReLU6."""
    import onnx
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(6)
    const = lambda name, shape, scale=0.3: numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)
    nodes = [
        helper.make_node("Conv", ["input", "w1", "b1"], ["c1"], kernel_shape=[3, 3]),
        helper.make_node("PRelu", ["c1", "slope"], ["p1"]),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER"),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("Conv", ["r2", "wd", "bd"], ["d"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=8),
        helper.make_node("Conv", ["d", "w3"], ["c3"], kernel_shape=[2, 2], pads=[1, 1, 0, 0]),
        helper.make_node("Conv", ["c3", "w4", "b4"], ["c4"], kernel_shape=[1, 1], strides=[2, 2]),
        helper.make_node("Conv", ["c4", "w5", "b5"], ["c5"], kernel_shape=[5, 3], strides=[2, 1], pads=[2, 1, 2, 1]),
        helper.make_node("Clip", ["c5", "zero", "six"], ["output"]),
    ]
    inits = [const("w1", (8, 3, 3, 3)), const("b1", (8,)), const("slope", (8, 1, 1), 0.1),
             const("w2", (8, 8, 3, 3)), const("b2", (8,)), const("wd", (8, 1, 3, 3)), const("bd", (8,)),
             const("w3", (6, 8, 2, 2)),
             const("w4", (12, 6, 1, 1)), const("b4", (12,)), const("w5", (4, 12, 5, 3)), const("b5", (4,)),
             numpy_helper.from_array(np.float32(0), "zero"), numpy_helper.from_array(np.float32(6), "six")]
    onnx.save(float_model(nodes, inits, [1, 3, 27, 23], [1, 4, 4, 6], "windows"), path)
    return path


def test_any_window_and_prelu_offload(tmp_path):
    model = windows_model(tmp_path / "windows.onnx")
    out = tmp_path / "windows.tar"
    done = run_tvmc("compile", "--target", "vanilla_accelerator", model, "-f", "mlf", "-o", out)
    assert done.returncode == 0, done.stderr
    offloaded = re.search(r"offloaded: (.*) in 6 functions", done.stdout).group(1).split(", ")
    assert sorted(offloaded) == ["clip x1", "nn.bias_add x5", "nn.conv2d x6", "nn.prelu x1", "nn.relu x1"], done.stdout
    assert "on the CPU: none" in done.stdout, done.stdout  # ONNX's explicit pad went into the conv
    assert kernel_calls(out, VANILLA_KERNELS) == 6
    inputs = {"input": np.random.default_rng(7).standard_normal((1, 3, 27, 23)).astype(np.float32)}
    (got,) = build(out, tmp_path / "build").run(inputs)[0].values()
    # onnx.reference (onnx 1.18) gets SAME_UPPER with stride 2 wrong (width 21 -> 10, not 11): onnxruntime instead
    np.testing.assert_allclose(got, onnxruntime_reference(model, inputs)[0], **TOLERANCE)
    np.testing.assert_allclose(got, tvm_cpu_reference(model, inputs)[0], **TOLERANCE)


def test_library_flags_reach_the_mlf_and_its_build(tmp_path):
    """The user's flags for the kernel library (a target attribute) go into the MLF beside its
    source, its BUILD.md lists them, and the host build compiles that source with them."""
    out = tmp_path / "flags.tar"
    done = run_tvmc("compile", "--target", "vanilla_accelerator", "--target-vanilla_accelerator-cflags=-fno-such-option-probe",
                    example_model("cnn"),
                    "-f", "mlf", "-o", out)
    assert done.returncode == 0, done.stderr
    with tarfile.open(out) as archive:
        flags = archive.extractfile("./codegen/host/src/vanilla_accelerator.cflags").read().decode()
        note = archive.extractfile("./codegen/host/BUILD.md").read().decode()
    assert flags.split()[-1] == "-fno-such-option-probe"
    assert f"`vanilla_accelerator.c`: `{flags.strip()}`" in note
    with pytest.raises(HostBuildError, match="fno-such-option-probe"):
        build(out, tmp_path / "b")
