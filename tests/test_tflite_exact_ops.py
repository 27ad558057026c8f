"""``--tflite-exact`` on int8 MUL, MEAN, LOGISTIC and TANH: the generated C (built with gcc)
computes what TFLite's reference kernels compute (``BUILTIN_REF``), bit for bit.

Each operator runs after a convolution (realistic scales) on random inputs, and alone on
inputs that cover its whole domain (all 256 values, all 65536 pairs for MUL): there TVM's own
arithmetic is compared too (with the convolution in front, a difference could be the
convolution's).
"""
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest
pytest.importorskip("tvm.relay", reason="the Relay engine's tests (hhb-tvm, Python 3.10): not installed here")

from conftest import run_tvmc
from tvm_extension.mlf import build
from tvm_extension.tflite_exact.elementwise import mul_multiplier
from tvm_extension.tflite_exact.fixed_point import quantize_multiplier
from tvm_extension.tflite_exact.tables import logistic_table, tanh_table
from tvm_extension.testing import tflite_interpreter

# the models fixture: made once (pytest-xdist runs the module in one worker)
pytestmark = pytest.mark.xdist_group("tflite_exact_ops")

PLAIN_C = ["--target", "c", "--executor", "aot", "--executor-aot-interface-api", "c", "--executor-aot-unpacked-api",
           "1", "--runtime", "crt", "--pass-config", "tir.disable_vectorize=1"]

MAKE_MODELS = textwrap.dedent("""
    import sys
    import numpy as np
    import tensorflow as tf

    folder = sys.argv[1]
    layers = tf.keras.layers


    def conv(x):
        return layers.Conv2D(8, 3, padding="same")(x)


    def after_conv():
        x, y = (tf.keras.Input((8, 8, 3), batch_size=1, name=n) for n in "ab")
        a = conv(x)
        yield "mul", [x, y], tf.nn.relu(a * conv(y)), (-1, 1)  # MUL with a fused RELU
        yield "mul_broadcast", [x], a * tf.reduce_mean(a, axis=[1, 2], keepdims=True), (-1, 1)  # as in SE blocks
        yield "mean", [x], tf.reduce_mean(a, axis=[1, 2], keepdims=True), (-1, 1)
        yield "mean_channels", [x], tf.reduce_mean(a, axis=-1), (-1, 1)
        yield "logistic", [x], tf.sigmoid(a), (-1, 1)
        yield "tanh", [x], tf.tanh(a), (-1, 1)


    def alone():
        x = tf.keras.Input((256,), batch_size=1, name="a")
        yield "logistic_alone", [x], tf.sigmoid(x), (-7, 5)
        yield "tanh_alone", [x], tf.tanh(x), (-2, 3)
        x, y = (tf.keras.Input((256, 256), batch_size=1, name=n) for n in "ab")
        yield "mul_alone", [x, y], x * y, (-1.3, 2.1)
        x = tf.keras.Input((6, 5, 16), batch_size=1, name="a")
        yield "mean_alone", [x], tf.reduce_mean(x, axis=[1, 2], keepdims=True), (-1.5, 2.5)


    for seed, (name, inputs, output, (low, high)) in enumerate([*after_conv(), *alone()]):
        tf.keras.utils.set_random_seed(seed)
        model = tf.keras.Model(inputs, output)
        rng = np.random.default_rng(seed)
        data = [[rng.uniform(low, high, x.shape).astype(np.float32) for x in inputs] for _ in range(32)]
        converter = tf.lite.TFLiteConverter.from_keras_model(model)
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = lambda: iter(data)
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        converter.inference_input_type = converter.inference_output_type = tf.int8
        open(f"{folder}/{name}.tflite", "wb").write(converter.convert())
""")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tflite_ops")
    script = folder / "make.py"
    script.write_text(MAKE_MODELS)
    done = subprocess.run([sys.executable, str(script), str(folder)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return folder


def interpreter(model):
    tflite = tflite_interpreter()
    Interpreter, OpResolverType = tflite.Interpreter, tflite.OpResolverType

    interpreter = Interpreter(model_path=str(model), experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    interpreter.allocate_tensors()
    return interpreter


def reference_kernels(model, inputs):
    """TFLite's interpreter with its reference kernels."""
    reference = interpreter(model)
    for detail in reference.get_input_details():
        reference.set_tensor(detail["index"], inputs[detail["name"]])
    reference.invoke()
    return [reference.get_tensor(d["index"]) for d in reference.get_output_details()]


def compile_and_build(model, folder, exact):
    folder.mkdir(exist_ok=True)
    archive = folder / "model.tar"
    done = run_tvmc("compile", *PLAIN_C, *(["--tflite-exact"] if exact else []), model, "-f", "mlf", "-o", archive)
    assert done.returncode == 0, done.stderr[-3000:]
    return build(archive, folder / "build"), done.stdout


def agree(program, model, inputs):
    got = list(program.run(inputs)[0].values())
    expected = reference_kernels(model, inputs)
    assert len(got) == len(expected) == 1 and got[0].dtype == expected[0].dtype
    return np.array_equal(got[0].reshape(expected[0].shape), expected[0])


@pytest.mark.parametrize("name, made_exact", [
    ("mul", "qnn.mul x1, qnn.requantize x2"),
    ("mul_broadcast", "mean x1, qnn.mul x1, qnn.requantize x1"),
    ("mean", "mean x1, qnn.requantize x1"),
    ("mean_channels", "mean x1, qnn.requantize x1"),
    ("logistic", "qnn.requantize x1, sigmoid x1"),
    ("tanh", "qnn.requantize x1, tanh x1"),
])
def test_after_a_convolution(models, tmp_path, name, made_exact):
    model = models / f"{name}.tflite"
    program, report = compile_and_build(model, tmp_path, exact=True)
    assert f"[tflite-exact] made exact: {made_exact}\n" in report, report
    assert "not exact" not in report, report
    rng = np.random.default_rng(3)
    for _ in range(5):
        inputs = {t.name: rng.integers(-128, 128, t.shape).astype(np.int8) for t in program.inputs}
        assert agree(program, model, inputs), f"{name}: not TFLite's reference result"


def domain(program):
    """Inputs over an operator's whole domain: every pair of int8 values for two inputs, every
    value for a 256-wide one; a MEAN's (too many) gets random ones."""
    if len(program.inputs) == 2:
        values = np.arange(-128, 128, dtype=np.int8)
        rows, columns = np.meshgrid(values, values, indexing="ij")
        return [{program.inputs[0].name: rows[None], program.inputs[1].name: columns[None]}]
    (tensor,) = program.inputs
    if tensor.shape[-1] == 256:
        return [{tensor.name: np.arange(-128, 128, dtype=np.int8).reshape(tensor.shape)}]
    rng = np.random.default_rng(5)
    return [{tensor.name: rng.integers(-128, 128, tensor.shape).astype(np.int8)} for _ in range(8)]


# TVM's own C for LOGISTIC and TANH evaluates the float32 expression TFLite fills its table with
# (same libm): equal here; the rewrite makes the result independent of the target's math library.
@pytest.mark.parametrize("name, made_exact, tvm_differs", [
    ("mul_alone", "qnn.mul x1", True), ("mean_alone", "mean x1", True),
    ("logistic_alone", "sigmoid x1", False), ("tanh_alone", "tanh x1", False),
])
def test_alone_over_its_domain(models, tmp_path, name, made_exact, tvm_differs):
    model = models / f"{name}.tflite"
    exact, report = compile_and_build(model, tmp_path / "exact", exact=True)
    assert f"[tflite-exact] made exact: {made_exact}\n" in report and "not exact" not in report, report
    plain, _ = compile_and_build(model, tmp_path / "plain", exact=False)
    differs = 0
    for inputs in domain(exact):
        assert agree(exact, model, inputs), f"{name}: not TFLite's reference result"
        differs += not agree(plain, model, inputs)
    verb = "matched" if tvm_differs else "differed from"
    assert bool(differs) == tvm_differs, f"{name}: TVM's own arithmetic {verb} TFLite"


@pytest.mark.parametrize("name, make", [("logistic_alone", logistic_table), ("tanh_alone", tanh_table)])
def test_tables_equal_the_reference_kernels(models, name, make):
    """All 256 entries, without TVM."""
    reference = interpreter(models / f"{name}.tflite")
    (source,), (target,) = reference.get_input_details(), reference.get_output_details()
    reference.set_tensor(source["index"], np.arange(-128, 128, dtype=np.int8)[None])
    reference.invoke()
    expected = reference.get_tensor(target["index"])[0]
    assert np.array_equal(make(*source["quantization"], *target["quantization"]), expected)


def _multiply_by_quantized_multiplier(x, multiplier, shift):
    """TFLite's MultiplyByQuantizedMultiplier on an int64 array of small int32 values."""
    x = x << max(shift, 0)
    product = x * multiplier
    high = product + np.where(product >= 0, 1 << 30, 1 - (1 << 30))
    high = np.where(high >= 0, high >> 31, -(-high >> 31))  # divided by 2^31, truncated
    exponent = max(-shift, 0)
    mask = (1 << exponent) - 1
    return (high >> exponent) + ((high & mask) > (mask >> 1) + (high < 0))


@pytest.mark.quick
def test_mul_multiplier_is_the_float32_scale_product(models, tmp_path):
    """TFLite's MUL computes ``s1 * s2 / s_out`` in float32 (float scales): with an output scale
    (patched into the model) for which the double product's multiplier gives another result
    on some pair, the reference kernel gives the float32 one's, and so does the rewrite."""
    source = (models / "mul_alone.tflite").read_bytes()
    reference = interpreter(models / "mul_alone.tflite")
    (a, b), (out,) = reference.get_input_details(), reference.get_output_details()
    (s1, z1), (s2, z2), (so, zo) = a["quantization"], b["quantization"], out["quantization"]
    values = np.arange(-128, 128, dtype=np.int64)
    products = (values[:, None] - z1) * (values[None, :] - z2)

    def result(real):
        return np.clip(_multiply_by_quantized_multiplier(products, *quantize_multiplier(real)) + zo, -128, 127)

    rng = np.random.default_rng(0)
    for _ in range(2000):
        scale = np.float32(so * rng.uniform(0.9, 1.1))
        single_real = float(np.float32(np.float32(s1) * np.float32(s2)) / scale)
        single = result(single_real)
        if not np.array_equal(single, result(float(np.float32(s1)) * float(np.float32(s2)) / float(scale))):
            break
    else:
        pytest.fail("no output scale found for which the two multipliers differ")
    assert mul_multiplier(s1, s2, scale) == quantize_multiplier(single_real)
    old, new = struct.pack("<f", so), struct.pack("<f", scale)
    assert source.count(old) == 1
    patched = tmp_path / "patched.tflite"
    patched.write_bytes(source.replace(old, new))
    reference = interpreter(patched)
    assert reference.get_output_details()[0]["quantization"][0] == scale
    rows, columns = np.meshgrid(values.astype(np.int8), values.astype(np.int8), indexing="ij")
    reference.set_tensor(a["index"], rows[None])
    reference.set_tensor(b["index"], columns[None])
    reference.invoke()
    assert np.array_equal(reference.get_tensor(out["index"])[0], single)
    program, _ = compile_and_build(patched, tmp_path / "exact", exact=True)
    assert all(agree(program, patched, inputs) for inputs in domain(program))
