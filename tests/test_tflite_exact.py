"""``tvmc compile --tflite-exact``: int8 TFLite models compute exactly what TFLite's reference
kernels compute (``BUILTIN_REF``), through the generated C built with gcc, on the CPU and with
their convolutions offloaded to QVanilla; without the option TVM's own arithmetic is unchanged
(and differs)."""
import math
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from conftest import MODELS, VANILLA_EXT, assert_one_line_error, kernel_calls, mlf_sources, run_tvmc
from tvm_extension.testing.model_zoo import fetch
from tvm_extension.mlf import build
from tvm_extension.tflite_exact.fixed_point import quantize_multiplier
from tvm_extension.tflite_exact.softmax import exp_on_negative_values, rdbpot, softmax_parameters, srdhm
from tvm_extension.kit.quantization import fixed_point_multiplier
from tvm_extension.testing import tflite_interpreter

# the networks fixture: compiled once (pytest-xdist runs the module in one worker)
pytestmark = pytest.mark.xdist_group("tflite_exact")

QVANILLA = ["--target", "qvanilla"]  # installed: the same command as test_relax_mlf's, one compile in the build cache
CHOCOLATE = ["--target", "chocolate", "--experimental-tvm-extension", VANILLA_EXT]
QVANILLA_CALL = r"qvanilla_(?:depthwise_)?conv2d_nhwc_packed_s8"
PLAIN_C = ["--target", "c", "--executor", "aot", "--executor-aot-interface-api", "c", "--executor-aot-unpacked-api",
           "1", "--runtime", "crt", "--pass-config", "tir.disable_vectorize=1"]


def reference_kernels(model, inputs):
    """TFLite's interpreter with its reference kernels."""
    tflite = tflite_interpreter()
    Interpreter, OpResolverType = tflite.Interpreter, tflite.OpResolverType

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


def random_inputs(program, rng, float_range):
    inputs = {}
    for tensor in program.inputs:
        if tensor.dtype == "float32":  # quantized by the model: a range its input scale covers
            inputs[tensor.name] = rng.uniform(*float_range, tensor.shape).astype(np.float32)
        else:
            inputs[tensor.name] = rng.integers(-128, 128, tensor.shape).astype(tensor.dtype)
    return inputs


def check_exact(tmp_path, model, target, made_exact, convs, runs=6, float_range=(-1.0, 1.0)):
    """Compiled with the option, the MLF equals BUILTIN_REF on every output for ``runs`` random
    inputs; compiled without it, it differs on at least one.  With QVanilla, all ``convs`` convs
    are offloaded and called with TFLite's rounding; Chocolate, whose kernel rounds as TVM does,
    leaves them all on the CPU and says why."""
    options = {"qvanilla": QVANILLA, "chocolate": CHOCOLATE}.get(target, PLAIN_C)
    exact, plain = tmp_path / "exact.tar", tmp_path / "plain.tar"
    done = run_tvmc("compile", *options, "--tflite-exact", model, "-f", "mlf", "-o", exact, reuse=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"[tflite-exact] made exact: {made_exact}\n" in done.stdout, done.stdout
    assert "not exact" not in done.stdout, done.stdout
    if target == "qvanilla":
        assert f"[qvanilla] offloaded: " in done.stdout and f" in {convs} functions" in done.stdout, done.stdout
        calls = [c for text in mlf_sources(exact).values() if "// offloaded to" in text
                 for c in re.findall(rf"= {QVANILLA_CALL}\(([^;]*)\);", text)]
        assert len(calls) == kernel_calls(exact, QVANILLA_CALL) == convs
        assert all(c.replace(" ", "").endswith(",1") for c in calls), "a call without QVANILLA_ROUNDING_TFLITE"
    if target == "chocolate":
        assert "[chocolate] offloaded: none in 0 functions" in done.stdout, done.stdout
        reason = "qnn.requantize: the model asks for TFLite's rounding, which this backend does not compute x"
        assert reason in done.stdout, done.stdout
    done = run_tvmc("compile", *options, model, "-f", "mlf", "-o", plain, reuse=True)  # test_relax_mlf's too
    assert done.returncode == 0, done.stderr[-3000:]
    programs = [build(exact, tmp_path / "b1"), build(plain, tmp_path / "b2")]
    rng = np.random.default_rng(7)
    differs = 0
    for _ in range(runs):
        inputs = random_inputs(programs[0], rng, float_range)
        expected = reference_kernels(model, inputs)
        got, tvm_own = (list(p.run(inputs)[0].values()) for p in programs)
        assert len(got) == len(expected) >= 1
        for g, e in zip(got, expected):
            assert g.dtype == e.dtype and np.array_equal(g, e), f"{model.name}: not TFLite's reference result"
        differs += any(not np.array_equal(t, e) for t, e in zip(tvm_own, expected))
    assert differs > 0, "TVM's own arithmetic matched TFLite on every input: the test shows nothing"


REAL_NETWORKS = [
    ("kws_dscnn_int8", "nn.avg_pool2d x1, nn.softmax x1, qnn.quantize x1, qnn.requantize x10", 9),
    ("kws_on_off_int8", "nn.avg_pool2d x1, nn.softmax x1, qnn.add x24, qnn.requantize x80", 79),  # int8 input
]


@pytest.mark.real_model
@pytest.mark.parametrize("name, made_exact, convs, target", [
    # the larger network on TVM's C alone (its two compiles take minutes): exhaustive
    pytest.param(*network, target, marks=pytest.mark.exhaustive if (network[0], target) == ("kws_on_off_int8", "c") else [])
    for target in ("c", "qvanilla") for network in REAL_NETWORKS])
def test_real_int8_network_equals_the_reference_kernels(tmp_path, name, made_exact, convs, target):
    check_exact(tmp_path, fetch(name), target, made_exact, convs, float_range=(-40, 80))  # DS-CNN's input scale: 0.88


# Small int8 networks made here: every operator of the option in one graph, per-channel scales.
MAKE_NETWORKS = textwrap.dedent("""
    import sys
    from pathlib import Path
    import numpy as np
    import tensorflow as tf

    tf.keras.utils.set_random_seed(0)
    layers = tf.keras.layers
    inp = tf.keras.Input((16, 16, 3), batch_size=1)
    x = layers.Conv2D(8, 3, padding="same", activation="relu")(inp)
    y = layers.DepthwiseConv2D(3, padding="same", activation=tf.nn.relu6)(x)
    z = layers.Conv2D(8, 1, strides=1)(y)
    s = layers.Add()([x, z])
    pooled = [layers.AveragePooling2D(3, strides=2, padding="same")(s),
              layers.AveragePooling2D(2, strides=2, padding="valid")(s),
              layers.MaxPooling2D(2, padding="same")(s)]
    c = layers.Concatenate()(pooled)
    c = layers.Conv2D(8, 3, strides=2, padding="valid", activation="relu")(c)
    out = layers.Softmax()(layers.Dense(10)(layers.Flatten()(c)))
    model = tf.keras.Model(inp, out)
    rng = np.random.default_rng(0)
    data = rng.uniform(-1, 1, (64, 1, 16, 16, 3)).astype(np.float32)
    for name, io_type in (("ops_int8_io", tf.int8), ("ops_float_io", tf.float32)):
        converter = tf.lite.TFLiteConverter.from_keras_model(model)
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = lambda: ([x] for x in data)
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        converter.inference_input_type = converter.inference_output_type = io_type
        Path(sys.argv[1], name + ".tflite").write_bytes(converter.convert())
""")


@pytest.fixture(scope="module")
def networks(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tflite_exact_networks")
    done = subprocess.run([sys.executable, "-c", MAKE_NETWORKS, str(folder)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return folder


@pytest.mark.parametrize("target", ["c", "qvanilla", "chocolate"])
@pytest.mark.parametrize("name, made_exact", [
    ("ops_int8_io", "nn.avg_pool2d x2, nn.softmax x1, qnn.add x1, qnn.requantize x5"),
    ("ops_float_io", "nn.avg_pool2d x2, nn.softmax x1, qnn.add x1, qnn.quantize x1, qnn.requantize x5"),
])
def test_generated_network_equals_the_reference_kernels(tmp_path, networks, name, made_exact, target):
    """Conv (ReLU), depthwise (ReLU6), 1x1 conv, ADD, AVERAGE_POOL SAME and VALID, MAX_POOL,
    CONCATENATION, strided valid conv, FULLY_CONNECTED, SOFTMAX; int8 or float input/output."""
    check_exact(tmp_path, networks / f"{name}.tflite", target, made_exact, convs=4, runs=8)


def test_other_formats_refuse_the_flag(tmp_path):
    done = run_tvmc("compile", *PLAIN_C, "--tflite-exact", MODELS / "cnn.onnx", "-f", "mlf", "-o", tmp_path / "o.tar")
    assert_one_line_error(done, "--tflite-exact applies to TFLite models only (this is a onnx model)")
    assert not (tmp_path / "o.tar").exists()


def test_help_lists_the_flag():
    done = run_tvmc("compile", "--help")
    assert done.returncode == 0 and "--tflite-exact" in done.stdout
