"""int8 ONNX models in QDQ form (NCHW) on QVanilla and Chocolate, whose kernels compute NHWC/HWIO:
every conv the kernel computes is offloaded, the layout converted around the offloaded functions
only, and the outputs are bit-equal to TVM's own C build of the same integer graph.

The reference is ``--target c`` with the executor options the extension targets use, through
tvmc's Python API so that it compiles the graph the backends partition: both run
FakeQuantizationToInteger over the whole model (dequantize -> op -> quantize becomes integer
QNN ops, on the CPU too), which computes otherwise than the float QDQ graph does.
"""
import re

import numpy as np
import onnx
import pytest
pytest.importorskip("tvm.relay", reason="the Relay engine's tests (hhb-tvm, Python 3.10): not installed here")
from onnx import TensorProto, helper, numpy_helper

from conftest import VANILLA_EXT, run_tvmc
from tvm_extension.testing.model_zoo import fetch
from tvm_extension.mlf import build

TARGETS = ["qvanilla", "chocolate"]


def c_reference(model, shapes, out):
    """TVM's own C build (AOT, unpacked API, CRT, no vectorisation) of the integer graph."""
    from tvm import relay
    from tvm.driver import tvmc
    from tvm.driver.tvmc.model import TVMCModel
    from tvm.relay.backend import Executor, Runtime

    loaded = tvmc.load(str(model), shape_dict=shapes)
    mod = relay.transform.FakeQuantizationToInteger()(relay.transform.InferType()(loaded.mod))
    tvmc.compile(TVMCModel(mod, loaded.params), target="c", output_format="mlf", package_path=str(out),
                 executor=Executor("aot", {"interface-api": "c", "unpacked-api": True}), runtime=Runtime("crt"),
                 pass_context_configs=["tir.disable_vectorize=1"])
    return out


def compile_offloaded(model, target, shapes, out):
    option = " ".join(f"{name}:[{','.join(map(str, shape))}]" for name, shape in shapes.items())
    done = run_tvmc("compile", "--target", target, "--experimental-tvm-extension", VANILLA_EXT,
                    "--input-shapes", option, model, "-f", "mlf", "-o", out)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def report(stdout, target):
    """(offloaded qnn.conv2d count, operators on the CPU, reasons convs were not offloaded)."""
    offloaded = re.search(rf"\[{target}\] offloaded: (.*) in \d+ functions", stdout)
    assert offloaded, stdout
    convs = re.search(r"qnn\.conv2d x(\d+)", offloaded.group(1))
    cpu = re.search(rf"\[{target}\] on the CPU: (.*)", stdout)
    refused = re.search(rf"\[{target}\] not offloaded: (.*)", stdout)
    return int(convs.group(1)) if convs else 0, cpu.group(1) if cpu else "", refused.group(1) if refused else ""


def assert_bit_equal(model, target, shapes, tmp_path, inputs):
    """The offloaded build and TVM's C build compute the same bits on ``inputs``."""
    ours = build(tmp_path / f"{target}.tar", tmp_path / f"{target}_build")
    theirs = build(c_reference(model, shapes, tmp_path / "c.tar"), tmp_path / "c_build")
    for feed in inputs:
        got, expected = list(ours.run(feed)[0].values()), list(theirs.run(feed)[0].values())
        assert len(got) == len(expected) >= 1
        for i, (g, e) in enumerate(zip(got, expected)):
            assert g.dtype == e.dtype and np.array_equal(g, e), f"{target} output {i} differs from TVM's C build"


# --- a tiny QDQ graph, as PyTorch exports a fake-quantized model --------------------------------

def fake_quantized_model(path, group=1):
    """input -> Q -> DQ -> [Conv (weights Q -> DQ of float values) -> Relu -> Q -> DQ] x2.

    The weights are float initializers quantized in the graph (PyTorch's export of a
    fake-quantized model does so), per channel; some fall on rounding ties (x.5 steps)."""
    rng = np.random.default_rng(0)
    inits = []

    def const(value, name):
        inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    nodes = [helper.make_node("QuantizeLinear", ["input", const(np.float32(0.05), "sx"), const(np.int8(3), "zx")], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["x0"])]
    channels = 4
    for i in range(2):
        scales = np.array([0.5, 0.25, 0.02, 0.01, 0.04, 0.5, 0.03, 0.015], np.float32)
        groups = group if i == 0 else 1
        weights = (rng.standard_normal((8, channels // groups, 3, 3)) / 4).astype(np.float32)
        weights[0, 0, 0, :] = [1.25, -0.75, 0.25]  # ties at scale 0.5: 2.5, -1.5, 0.5 steps
        nodes += [
            helper.make_node("QuantizeLinear", [const(weights, f"w{i}"), const(scales, f"sw{i}"),
                                                const(np.zeros(8, np.int8), f"zw{i}")], [f"wq{i}"], axis=0),
            helper.make_node("DequantizeLinear", [f"wq{i}", f"sw{i}", f"zw{i}"], [f"wf{i}"], axis=0),
            helper.make_node("Conv", [f"x{i}", f"wf{i}", const(rng.standard_normal(8).astype(np.float32), f"b{i}")],
                             [f"c{i}"], pads=[1, 1, 1, 1], group=groups),
            helper.make_node("Relu", [f"c{i}"], [f"r{i}"]),
            helper.make_node("QuantizeLinear", [f"r{i}", const(np.float32(0.08), f"sy{i}"), const(np.int8(-5), f"zy{i}")],
                             [f"q{i}"]),
            helper.make_node("DequantizeLinear", [f"q{i}", f"sy{i}", f"zy{i}"], [f"x{i + 1}"]),
        ]
        channels = 8
    graph = helper.make_graph(nodes, "fake_quantized", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 4, 6, 6])],
                              [helper.make_tensor_value_info("x2", TensorProto.FLOAT, [1, 8, 6, 6])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


@pytest.mark.quick
@pytest.mark.parametrize("target", TARGETS)
def test_fake_quantized_graph(tmp_path, target):
    """Weights quantized in the graph (qnn.quantize of a constant after FakeQuantizationToInteger)
    are folded like TVM's C computes them, so both NCHW convs are converted and offloaded, and
    meet in NHWC: one conversion in, one out."""
    model = fake_quantized_model(tmp_path / "model.onnx")
    shapes = {"input": (1, 4, 6, 6)}
    convs, cpu, refused = report(compile_offloaded(model, target, shapes, tmp_path / f"{target}.tar"), target)
    assert (convs, refused) == (2, ""), (cpu, refused)
    assert "layout_transform x2" in cpu.split(", ") and "transpose" not in cpu, cpu
    rng = np.random.default_rng(1)
    assert_bit_equal(model, target, shapes, tmp_path,
                     [{"input": rng.standard_normal(shapes["input"]).astype(np.float32)} for _ in range(2)])


@pytest.mark.quick
@pytest.mark.parametrize("target", TARGETS)
def test_refused_nchw_conv_tells_why(tmp_path, target):
    """A conv the kernel cannot compute stays NCHW; the report says why the kernel refused it
    (grouped), not the layout it was left in."""
    model = fake_quantized_model(tmp_path / "model.onnx", group=2)
    convs, cpu, refused = report(compile_offloaded(model, target, {"input": (1, 4, 6, 6)}, tmp_path / "m.tar"), target)
    assert convs == 1 and "qnn.conv2d: grouped (groups=2 of 4 channels) x1" in refused, (cpu, refused)
    assert "layout" not in refused, refused


# --- real networks, quantized by ONNX Runtime ----------------------------------------------------

# name: input shapes (the models' spatial size is free: fixed here)
NETWORKS = {"mtcnn_pnet": {"input_1": (1, 24, 24, 3)}, "mtcnn_onet": {"input_3": (1, 48, 48, 3)}}


class _Calibration:
    """onnxruntime.quantization.CalibrationDataReader: four random inputs of a fixed seed."""

    def __init__(self, shapes):
        rng = np.random.default_rng(7)
        self.feeds = iter([{n: rng.standard_normal(s).astype(np.float32) for n, s in shapes.items()} for _ in range(4)])

    def get_next(self):
        return next(self.feeds, None)


def quantized(name, path):
    """The float network quantized by ONNX Runtime: QDQ, int8 activations and weights."""
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

    model = onnx.load(str(fetch(name)))
    for value in model.graph.input:
        for dim, size in zip(value.type.tensor_type.shape.dim, NETWORKS[name][value.name]):
            dim.dim_value = size
    fixed = path.with_name("float.onnx")
    onnx.save(model, fixed)
    quantize_static(str(fixed), str(path), _Calibration(NETWORKS[name]), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8)
    return path


def dense_convs(model):
    """The Conv nodes of a float ONNX model, all dense (group 1) here: what both kernels take."""
    convs = [n for n in onnx.load(str(model)).graph.node if n.op_type == "Conv"]
    assert all(a.i == 1 for n in convs for a in n.attribute if a.name == "group")
    return len(convs)


@pytest.mark.real_model
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.exhaustive) if n == "mtcnn_onet" else n
                                  for n in NETWORKS])  # O-Net: the same kinds of layer as P-Net, larger
def test_quantized_mtcnn(tmp_path, name, target):
    """MTCNN quantized by ONNX Runtime (NCHW convs between the models' own NHWC transposes, PReLU
    and pooling between them in float): every conv offloaded, and no transpose left on the CPU,
    the conversions carried through (de)quantize, PReLU, pad and pooling and cancelled against
    the models' own transposes."""
    model = quantized(name, tmp_path / "model.onnx")
    shapes = NETWORKS[name]
    convs, cpu, refused = report(compile_offloaded(model, target, shapes, tmp_path / f"{target}.tar"), target)
    assert convs == dense_convs(fetch(name)) and refused == "", (convs, cpu, refused)
    assert "layout_transform" not in cpu and "transpose" not in cpu, cpu
    rng = np.random.default_rng(11)
    feeds = [{n: rng.standard_normal(s).astype(np.float32) for n, s in shapes.items()} for _ in range(3)]
    assert_bit_equal(model, target, shapes, tmp_path, feeds)
