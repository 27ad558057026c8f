"""``tvmc compile --tflite-exact`` (the Relax engine): int8 TFLite networks compute what
TFLite's reference kernels (BUILTIN_REF) compute, the whole network bit for bit, with QVanilla's
convs offloaded and with TVM's own kernels only (``--target llvm``); without the flag they do not.
The operators alone are checked over their whole domain, as the Relay engine's are
(tests/test_tflite_exact_ops.py, whose generated models these are)."""
import numpy as np
import pytest

from test_relax_engine import relax_engine
from test_relax_int8 import QVANILLA_EXT, model_inputs
from test_tflite_exact_ops import models, reference_kernels  # noqa: F401  (a fixture, used by name)
from tvm_extension.testing import fetch, tflite_interpreter


def compile_relax(model, target, output, exact=True):
    extension = ["--experimental-tvm-extension", str(QVANILLA_EXT)] if target == "qvanilla" else []
    done = relax_engine("compile", str(model), "--target", target, *extension, "-o", str(output),
                        *(["--tflite-exact"] if exact else []), cwd=output.parent)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def run_relax(library, inputs, work):
    np.savez(work / "in.npz", **inputs)
    done = relax_engine("run", str(library), "-i", "in.npz", "-o", "out.npz", cwd=work)
    assert done.returncode == 0, done.stderr
    with np.load(work / "out.npz") as outputs:
        return [outputs[f"output_{i}"] for i in range(len(outputs.files))]


def differing(library, model, inputs, work) -> int:
    """How many output values differ from TFLite's reference kernels."""
    got, expected = run_relax(library, inputs, work), reference_kernels(model, inputs)
    assert len(got) == len(expected) and all(g.dtype == e.dtype for g, e in zip(got, expected))
    return sum(int(np.count_nonzero(g.reshape(e.shape) != e)) for g, e in zip(got, expected))


@pytest.mark.real_model
@pytest.mark.parametrize("name, target, made_exact", [
    ("kws_dscnn_int8", "qvanilla", "avg_pool2d x1, matmul x1, quantize x1, softmax x1"),
    ("kws_dscnn_int8", "llvm", "avg_pool2d x1, conv2d x9, matmul x1, quantize x1, softmax x1"),
    # exhaustive: the default run has its MLF equal to the Relay engine's, which equals TFLite's (test_relax_mlf.py)
    pytest.param("kws_on_off_int8", "qvanilla", "add x24, avg_pool2d x1, matmul x1, softmax x1", marks=pytest.mark.exhaustive),
])
def test_real_network_equals_the_reference_kernels(tmp_path, name, target, made_exact):
    """Every output value equal to TFLite's over random inputs; the same library built without the
    flag differs (its pooling, FC, softmax and residual adds are TVM's float arithmetic)."""
    model = fetch(name)
    report = compile_relax(model, target, tmp_path / "exact.so")
    assert report[-1] == f"[tflite-exact] made exact: {made_exact}", report  # the last line, nothing left inexact
    compile_relax(model, target, tmp_path / "plain.so", exact=False)
    rng, plain_differs = np.random.default_rng(11), 0
    for _ in range(4):
        inputs = model_inputs(model, rng, (-40, 80))  # DS-CNN's float input covers its int8 range
        assert differing(tmp_path / "exact.so", model, inputs, tmp_path) == 0
        plain_differs += differing(tmp_path / "plain.so", model, inputs, tmp_path)
    assert plain_differs > 0, "TVM's own arithmetic gave TFLite's results: the test shows nothing"


@pytest.mark.parametrize("name, made_exact", [
    ("mul", "conv2d x2, multiply x1"), ("mul_broadcast", "conv2d x1, mean x1, multiply x1"),
    ("mean_channels", "conv2d x1, mean x1"), ("logistic", "conv2d x1, sigmoid x1"), ("tanh", "conv2d x1, tanh x1"),
])
def test_operators_after_a_convolution(models, tmp_path, name, made_exact):  # noqa: F811
    model = models / f"{name}.tflite"
    assert compile_relax(model, "llvm", tmp_path / "m.so")[1:] == [f"[tflite-exact] made exact: {made_exact}"]
    rng = np.random.default_rng(3)
    for _ in range(4):
        inputs = model_inputs(model, rng, None)
        assert differing(tmp_path / "m.so", model, inputs, tmp_path) == 0, name


def test_operators_alone_over_their_domain(models, tmp_path):  # noqa: F811
    """MUL on all 65536 pairs of int8 values; LOGISTIC and TANH on every int8 value; MEAN on random ones."""
    Interpreter = tflite_interpreter().Interpreter

    values = np.arange(-128, 128, dtype=np.int8)
    rows, columns = np.meshgrid(values, values, indexing="ij")
    rng = np.random.default_rng(5)
    cases = {"mul_alone": [rows[None], columns[None]], "mean_alone": [rng.integers(-128, 128, (1, 6, 5, 16)).astype(np.int8)],
             "logistic_alone": [values[None]], "tanh_alone": [values[None]]}
    for name, arrays in cases.items():
        model = models / f"{name}.tflite"
        names = sorted(d["name"] for d in Interpreter(model_path=str(model)).get_input_details())  # a, then b
        report = compile_relax(model, "llvm", tmp_path / f"{name}.so")
        assert len(report) == 2 and "not exact" not in report[1], report
        assert differing(tmp_path / f"{name}.so", model, dict(zip(names, arrays)), tmp_path) == 0, name


@pytest.mark.quick
def test_onnx_model_refuses_the_flag(tmp_path):
    from conftest import ROOT

    done = relax_engine("compile", str(ROOT / "examples/models/cnn.onnx"), "--target", "llvm", "-o",
                        str(tmp_path / "m.so"), "--tflite-exact", cwd=tmp_path)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert done.stderr.strip() == "error: --tflite-exact applies to TFLite models only (this is an onnx model)"
    assert not (tmp_path / "m.so").exists()


@pytest.mark.real_model
@pytest.mark.relay  # compares with the Relay engine
def test_a_scaffolded_int8_backend_on_both_engines(tmp_path):
    """`python -m tvm_extension new my_q --int8` writes relax_patterns.py too: the same folder,
    unchanged, compiles the DS-CNN on both engines with --tflite-exact, its dense convs calls of
    my_q_conv2d_s8 (the depthwise ones stay on the CPU, said with the reason), and both give
    TFLite's reference kernels' outputs bit for bit."""
    import subprocess
    import sys

    from conftest import run_tvmc
    from tvm_extension.mlf import build

    subprocess.run([sys.executable, "-m", "tvm_extension", "new", "my_q", "--int8", "--directory", str(tmp_path)],
                   check=True, capture_output=True)
    project, model = tmp_path / "my_q", fetch("kws_dscnn_int8")
    done = relax_engine("compile", str(model), "--target", "my_q", "--experimental-tvm-extension", str(project),
                        "-o", "q.so", "--tflite-exact", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = done.stdout.splitlines()
    assert "[my_q] patterns: conv2d_int8_bias_clip x5" in report, report
    assert "[my_q] not offloaded: nn.conv2d: groups 64 (needs 1) x4" in report, report
    assert report[-1].startswith("[tflite-exact] made exact: avg_pool2d x1, conv2d x4,"), report
    done = run_tvmc("compile", "--target", "my_q", "--experimental-tvm-extension", project, "--tflite-exact", model,
                    "-f", "mlf", "-o", tmp_path / "q.tar")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "[my_q] offloaded: " in done.stdout and " in 5 functions" in done.stdout, done.stdout
    relay = build(tmp_path / "q.tar", tmp_path / "mlf")
    rng = np.random.default_rng(13)
    for _ in range(3):
        inputs = model_inputs(model, rng, (-40, 80))
        assert differing(tmp_path / "q.so", model, inputs, tmp_path) == 0
        (expected,), (got,) = reference_kernels(model, inputs), relay.run(inputs)[0].values()
        assert np.array_equal(got.reshape(expected.shape), expected)
