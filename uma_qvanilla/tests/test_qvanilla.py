"""The int8 backend: bit-exact with TVM's own CPU build, as close to the framework as TVM is.

For every model: the host-built MLF equals TVM's CPU build of the same graph bit for bit, and
its largest deviation from the framework's interpreter (TFLite's, ONNX Runtime) is no larger
than TVM's own.
"""
import re
import subprocess
import sys
import textwrap

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

pytest.importorskip("tvm.relay", reason="the Relay engine's end-to-end tests (hhb-tvm: TVM 0.16's tvmc, its options, report and MLF layout); on apache-tvm test_qvanilla_either_engine.py runs this example end to end")

from tvm_extension.kit import quantization
from tvm_extension.mlf import build
from tvm_extension.testing import (assert_relay_free, fetch, kernel_calls, mlf_sources, onnxruntime_reference,
                                   qdq_model, run_tvmc, tflite_reference, tvm_cpu_reference)


def compile_and_compare(tmp_path, model, framework_reference, offloads, seed=0, integer_graph=False):
    """Compile for QVanilla; ``offloads`` convs must be offloaded, and the outputs bit-exact with TVM's CPU build."""
    out = tmp_path / "model.tar"
    done = run_tvmc("compile", "--target", "qvanilla", model,
                    "-f", "mlf", "-o", out)
    assert done.returncode == 0, done.stderr[-3000:]
    report = re.search(r"\[qvanilla\] offloaded: (.*) in (\d+) functions", done.stdout)
    assert report, done.stdout
    offloaded = int(report.group(2))
    assert offloaded == offloads, done.stdout
    assert kernel_calls(out, r"qvanilla_(?:depthwise_)?conv2d_nhwc_packed_s8") == offloaded
    offloaded_c = [t for t in mlf_sources(out).values() if "// offloaded to qvanilla" in t]
    assert not any("for (" in t for t in offloaded_c)
    # the kernels' scratch is a tensor of the AOT workspace, not a run-time allocation
    assert not any("TVMBackendAllocWorkspace" in t for t in offloaded_c)

    program = build(out, tmp_path / "build")
    rng = np.random.default_rng(seed)
    inputs = {
        t.name: rng.integers(-128, 128, t.shape).astype(t.dtype) if t.dtype == "int8"
        else rng.uniform(-1, 1, t.shape).astype(t.dtype)
        for t in program.inputs
    }
    got = list(program.run(inputs)[0].values())
    tvm_cpu = tvm_cpu_reference(model, inputs, integer_graph)
    framework = framework_reference(model, inputs)
    assert len(got) == len(tvm_cpu) == len(framework) >= 1
    for g, t, f in zip(got, tvm_cpu, framework):
        assert g.dtype == t.dtype and np.array_equal(g, t), "not bit-exact with TVM's CPU build"
        ours, theirs = (float(np.max(np.abs(x.astype(np.float64) - f.astype(np.float64)))) for x in (g, t))
        assert ours <= theirs, f"deviation from the framework {ours} > TVM's {theirs}"
    return offloaded


@pytest.mark.real_model
# every conv offloaded; the larger network also runs in the framework's tflite-exact tests
@pytest.mark.parametrize("name, offloads", [("kws_dscnn_int8", 9),
                                            pytest.param("kws_on_off_int8", 79, marks=pytest.mark.exhaustive)])
def test_real_int8_networks(tmp_path, name, offloads):
    compile_and_compare(tmp_path, fetch(name), tflite_reference, offloads)


@pytest.mark.parametrize("per_channel,relu", [(False, False), (True, True)], ids=["per-tensor", "per-channel-relu"])
def test_onnx_qdq(tmp_path, per_channel, relu):
    model = qdq_model(tmp_path / "qdq.onnx", per_channel, relu)
    # TVM's CPU reference is the integer graph FakeQuantizationToInteger makes of the QDQ model
    # (run as float, a QDQ graph rounds ties as ONNX Runtime does, to even).
    compile_and_compare(tmp_path, model, onnxruntime_reference, 1, integer_graph=True)


@pytest.mark.parametrize("group, offloads", [(16, 1), (2, 0)], ids=["depthwise", "grouped"])
def test_onnx_qdq_depthwise(tmp_path, group, offloads):
    """A depthwise QDQ conv (converted to NHWC, weights HWIO with I = 1) is offloaded, strided
    with asymmetric pads; a grouped one (1 < groups < channels) stays on the CPU."""
    model = qdq_model(tmp_path / "qdq.onnx", True, True, cin=16, cout=16, group=group, stride=2, pads=(0, 1, 2, 1))
    compile_and_compare(tmp_path, model, onnxruntime_reference, offloads, integer_graph=True)


def qlinear_conv_model(path, per_channel, seed=0):
    """One ONNX QLinearConv (int8, bias, non-zero zero points), which TVM imports through our QDQ rewrite."""
    rng = np.random.default_rng(seed)
    cin, cout = 4, 8
    w_scale = (rng.uniform(0.005, 0.02, cout) if per_channel else np.array(0.01)).astype(np.float32)
    inits = [
        numpy_helper.from_array(np.array(0.05, np.float32), "x_scale"), numpy_helper.from_array(np.array(3, np.int8), "x_zp"),
        numpy_helper.from_array(rng.integers(-127, 128, (cout, cin, 3, 3)).astype(np.int8), "w"),
        numpy_helper.from_array(w_scale, "w_scale"), numpy_helper.from_array(np.zeros(w_scale.shape, np.int8), "w_zp"),
        numpy_helper.from_array(np.array(0.2, np.float32), "y_scale"), numpy_helper.from_array(np.array(5, np.int8), "y_zp"),
        numpy_helper.from_array(rng.integers(-500, 500, cout).astype(np.int32), "b"),
    ]
    node = helper.make_node("QLinearConv", ["x", "x_scale", "x_zp", "w", "w_scale", "w_zp", "y_scale", "y_zp", "b"],
                            ["y"], pads=[1, 1, 1, 1], kernel_shape=[3, 3])
    graph = helper.make_graph([node], "qlinear", [helper.make_tensor_value_info("x", TensorProto.INT8, [1, cin, 10, 10])],
                              [helper.make_tensor_value_info("y", TensorProto.INT8, [1, cout, 10, 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


@pytest.mark.parametrize("per_channel", [False, True], ids=["per-tensor", "per-channel"])
def test_onnx_qlinear_conv(tmp_path, per_channel):
    model = qlinear_conv_model(tmp_path / "qlinear.onnx", per_channel)
    compile_and_compare(tmp_path, model, onnxruntime_reference, 1, integer_graph=True)


MAKE_TFLITE = textwrap.dedent("""
    import sys
    import numpy as np
    import tensorflow as tf

    per_channel, path = sys.argv[1] == "per-channel", sys.argv[2]
    tf.keras.utils.set_random_seed(0)
    layers = tf.keras.layers
    model = tf.keras.Sequential([
        tf.keras.Input((12, 12, 3), batch_size=1),
        layers.Conv2D(8, 3, padding="same", activation="relu"),                # ReLU
        layers.Conv2D(8, 3, padding="same", activation=tf.nn.relu6),           # ReLU6
        layers.Conv2D(16, 3, strides=2, padding="valid"),                      # strided, valid, no activation
        layers.DepthwiseConv2D(3, padding="same"),                             # depthwise
        layers.Conv2D(4, 1, activation="relu"),
    ])
    data = np.random.default_rng(0).uniform(-1, 1, (64, 1, 12, 12, 3)).astype(np.float32)
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = lambda: ([x] for x in data)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter._experimental_disable_per_channel = not per_channel
    open(path, "wb").write(converter.convert())
""")


@pytest.mark.parametrize("scales", ["per-channel", "per-tensor"])
def test_tflite_int8_relu_relu6(tmp_path, scales):
    script = tmp_path / "make.py"
    script.write_text(MAKE_TFLITE)
    model = tmp_path / "model.tflite"
    done = subprocess.run([sys.executable, str(script), scales, str(model)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    compile_and_compare(tmp_path, model, tflite_reference, 5)


def test_fixed_point_multiplier():
    for ratio in (1.0, 0.5, 0.25 + 1e-9, 3.7e-4, 1.9999999):
        multiplier, shift = quantization.fixed_point_multiplier(ratio)
        assert (1 << 30) <= multiplier < (1 << 31)
        assert abs(multiplier * 2.0 ** (shift - 31) - ratio) <= ratio * 2 ** -30


def test_relay_free_modules_import_without_relay():
    """The TIR pass, the target and codegen (and the scratch sizes the pass reads) import without
    Relay, so a second engine can reuse them: only patterns.py and backend.py speak Relay."""
    assert_relay_free("uma_qvanilla", "scratch")
