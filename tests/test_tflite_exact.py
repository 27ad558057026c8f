"""``tvmc compile --tflite-exact``: int8 TFLite models compute exactly what TFLite's reference
kernels compute (``BUILTIN_REF``), through the generated C built with gcc; without the option
TVM's own arithmetic is unchanged (and differs)."""
import math

import numpy as np
import pytest

from conftest import MODELS, assert_one_line_error, run_tvmc
from model_zoo import fetch
from tvm_extension.mlf import build
from tvm_extension.tflite_exact.fixed_point import quantize_multiplier
from tvm_extension.tflite_exact.softmax import exp_on_negative_values, rdbpot, softmax_parameters, srdhm
from uma_qvanilla.quantization import fixed_point_multiplier

PLAIN_C = ["--target", "c", "--executor", "aot", "--executor-aot-interface-api", "c", "--executor-aot-unpacked-api",
           "1", "--runtime", "crt", "--pass-config", "tir.disable_vectorize=1"]


def reference_kernels(model, inputs):
    """TFLite's interpreter with its reference kernels."""
    from tflite_runtime.interpreter import Interpreter, OpResolverType

    interpreter = Interpreter(model_path=str(model), experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    interpreter.allocate_tensors()
    for detail in interpreter.get_input_details():
        interpreter.set_tensor(detail["index"], inputs[detail["name"]])
    interpreter.invoke()
    return [interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()]


def test_gemmlowp_helpers():
    """Spot checks of the Python emulation the softmax tables come from."""
    assert quantize_multiplier(0.5) == (1 << 30, 0) and quantize_multiplier(0.75) == (3 << 29, 0)
    for real in (0.0003, 0.123456, 0.9999999, 1.5, 3.75e-6):
        assert quantize_multiplier(real) == fixed_point_multiplier(real)  # the same frexp rounding
    assert srdhm(1 << 30, 1 << 30) == 1 << 29 and srdhm(-3, 1 << 30) == -1  # -1.5 rounds away from zero
    assert rdbpot(5, 1) == 3 and rdbpot(-5, 1) == -3 and rdbpot(6, 2) == 2 and rdbpot(-6, 2) == -2
    for x in (0.0, -0.1, -1.0, -2.5, -7.0, -20.0):
        got = exp_on_negative_values(int(round(x * (1 << 26)))) / 2 ** 31
        assert abs(got - math.exp(x)) < 1e-6, x
    multiplier, shift, diff_min = softmax_parameters(0.310796)
    assert (multiplier, shift, diff_min) == (1334858656, 25, -62)


@pytest.mark.real_model
@pytest.mark.parametrize("name, made_exact", [
    ("kws_dscnn_int8", "nn.avg_pool2d x1, nn.softmax x1, qnn.quantize x1, qnn.requantize x10"),
    ("kws_on_off_int8", "nn.avg_pool2d x1, nn.softmax x1, qnn.add x24, qnn.requantize x80"),  # int8 input
])
def test_real_int8_network_equals_the_reference_kernels(tmp_path, name, made_exact):
    model = fetch(name)
    exact, plain = tmp_path / "exact.tar", tmp_path / "plain.tar"
    done = run_tvmc("compile", *PLAIN_C, "--tflite-exact", model, "-f", "mlf", "-o", exact)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"[tflite-exact] made exact: {made_exact}\n" in done.stdout, done.stdout
    assert "not exact" not in done.stdout
    assert run_tvmc("compile", *PLAIN_C, model, "-f", "mlf", "-o", plain).returncode == 0
    programs = [build(exact, tmp_path / "b1"), build(plain, tmp_path / "b2")]
    rng = np.random.default_rng(7)
    differs = 0
    for _ in range(6):
        inputs = {}
        for tensor in programs[0].inputs:
            if tensor.dtype == "float32":  # DS-CNN quantizes a float input (its scale 0.88: wide values)
                inputs[tensor.name] = rng.uniform(-40, 80, tensor.shape).astype(np.float32)
            else:
                inputs[tensor.name] = rng.integers(-128, 128, tensor.shape).astype(tensor.dtype)
        expected = reference_kernels(model, inputs)
        got, tvm_own = (list(p.run(inputs)[0].values()) for p in programs)
        for g, e in zip(got, expected):
            assert g.dtype == e.dtype and np.array_equal(g, e), f"{name}: not TFLite's reference result"
        differs += any(not np.array_equal(t, e) for t, e in zip(tvm_own, expected))
    assert differs > 0, "TVM's own arithmetic matched TFLite on every input: the test shows nothing"


def test_other_formats_refuse_the_flag(tmp_path):
    done = run_tvmc("compile", *PLAIN_C, "--tflite-exact", MODELS / "cnn.onnx", "-f", "mlf", "-o", tmp_path / "o.tar")
    assert_one_line_error(done, "--tflite-exact applies to TFLite models only (this is a onnx model)")
    assert not (tmp_path / "o.tar").exists()


def test_help_lists_the_flag():
    done = run_tvmc("compile", "--help")
    assert done.returncode == 0 and "--tflite-exact" in done.stdout
