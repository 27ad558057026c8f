"""Any conv graph compiles: random ONNX conv graphs through plain tvmc, run on the host.

Float graphs (Vanilla): 1-3 convs of random channels, map sizes (1xN included), kernels 1-9
(even and non-square), strides 1-3, explicit asymmetric pads or auto_pad, dilation, dense,
depthwise or grouped, with or without bias, each followed by Relu, Clip, PRelu, LeakyRelu, an
Add of a constant of any broadcast shape (either operand order, then a Relu or not) or nothing;
compared with ONNX Runtime.  Int8 graphs (QVanilla): the same convs as ONNX QDQ, per-tensor or
per-channel, without dilation, then a LeakyRelu, an Add of a constant (then a Relu or not) or
nothing, each quantized again; compared bit for bit with TVM's own CPU build.  Every conv the
kernel computes must be offloaded; the rest stays on the CPU; the compile never fails.

The default run is short and deterministic (derandomized); for thousands of graphs, other
ones each time a different seed is given:

    TVM_EXTENSION_PROPERTY_EXAMPLES=2000 TVM_EXTENSION_PROPERTY_SEED=7 scripts/test.sh tests/test_property_graphs.py
"""
import os
import re

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, assume, given, seed, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from conftest import VANILLA_EXT, assert_close, onnxruntime_reference, run_tvmc, tvm_cpu_reference
from tvm_extension.mlf import build

EXAMPLES = int(os.environ.get("TVM_EXTENSION_PROPERTY_EXAMPLES", "10"))
SEED = os.environ.get("TVM_EXTENSION_PROPERTY_SEED")
_SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=SEED is None, database=None,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def SETTINGS(test):
    return _SETTINGS(seed(int(SEED))(test) if SEED is not None else test)


AFTER = ["none", "relu", "clip", "prelu", "leaky_relu", "add_const_first", "add_const_last"]
INT8_AFTER = ["none", "leaky_relu", "add_const_first", "add_const_last"]  # QDQ: each quantized again
LEAKY_ALPHA = 0.3
CONSTANT_SHAPES = ["scalar", "one", "channel", "channel_3d", "full"]


def _out_size(size, kernel, stride, dilation, pads):
    if pads in ("SAME_UPPER", "SAME_LOWER"):
        return -(-size // stride)
    begin, end = (0, 0) if pads == "VALID" else pads
    return (size + begin + end - dilation * (kernel - 1) - 1) // stride + 1


@st.composite
def conv_layer(draw, channels, height, width, dilations=(1, 1, 1, 2)):
    """A conv and what follows it (``after``; ``then_relu``: a Relu after an Add of a constant)."""
    kind = draw(st.sampled_from(["dense", "dense", "depthwise", "grouped"] if channels % 2 == 0 else ["dense", "depthwise"]))
    group = {"dense": 1, "depthwise": channels, "grouped": 2}[kind]
    out = channels if kind == "depthwise" else group * draw(st.integers(1, 4))
    kh, kw = draw(st.integers(1, 9)), draw(st.integers(1, 9))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    dilation = draw(st.sampled_from(dilations))
    auto = ["SAME_UPPER", "SAME_LOWER"] if dilation == 1 else []  # ONNX Runtime: no SAME with dilation
    pads = draw(st.sampled_from(auto + ["VALID", "explicit", "explicit"]))
    if pads == "explicit":
        pads = [draw(st.integers(0, k - 1)) for k in (kh, kw, kh, kw)]  # top, left, bottom, right
    oh = _out_size(height, kh, stride[0], dilation, pads if isinstance(pads, str) else (pads[0], pads[2]))
    ow = _out_size(width, kw, stride[1], dilation, pads if isinstance(pads, str) else (pads[1], pads[3]))
    assume(oh >= 1 and ow >= 1)
    after = draw(st.sampled_from(AFTER))
    return dict(group=group, out=out, kernel=(kh, kw), stride=stride, dilation=dilation, pads=pads,
                bias=draw(st.booleans()), after=after, constant=draw(st.sampled_from(CONSTANT_SHAPES)),
                then_relu=after.startswith("add_const") and draw(st.booleans()), shape=(out, oh, ow))


@st.composite
def int8_layer(draw, channels, height, width, layer=conv_layer):
    """``layer`` (a conv_layer strategy) without dilation, with what an int8 one has: quantization,
    a Relu before the conv's quantize, and ``after`` among INT8_AFTER."""
    drawn = draw(layer(channels, height, width, dilations=(1,)))
    after = draw(st.sampled_from(INT8_AFTER))
    drawn.update(per_channel=draw(st.booleans()), relu=draw(st.booleans()), input_zp=draw(st.integers(-20, 20)),
                 output_zp=draw(st.integers(-20, 20)), after=after,
                 then_relu=after.startswith("add_const") and draw(st.booleans()))
    return drawn


@st.composite
def float_graph(draw):
    channels, height, width = draw(st.integers(1, 6)), draw(st.integers(1, 10)), draw(st.integers(1, 10))
    layers, shape = [], (channels, height, width)
    for _ in range(draw(st.integers(1, 3))):
        layer = draw(conv_layer(*shape))
        layers.append(layer)
        shape = layer["shape"]
    return dict(input=(1, channels, height, width), layers=layers, seed=draw(st.integers(0, 2**16)))


def _conv_node(layer, x, y, weights, bias):
    attrs = dict(kernel_shape=list(layer["kernel"]), strides=list(layer["stride"]),
                 dilations=[layer["dilation"]] * 2, group=layer["group"])
    if isinstance(layer["pads"], str):
        attrs["auto_pad"] = layer["pads"]
    else:
        top, left, bottom, right = layer["pads"]
        attrs["pads"] = [top, left, bottom, right]
    return helper.make_node("Conv", [x, weights] + ([bias] if bias else []), [y], **attrs)


def _constant(kind, shape, rng):
    out, oh, ow = shape
    dims = {"scalar": (), "one": (1, 1, 1, 1), "channel": (1, out, 1, 1), "channel_3d": (out, 1, 1),
            "full": (1, out, oh, ow)}[kind]
    return rng.standard_normal(dims).astype(np.float32)


def save_model(nodes, last, inits, dtype, spec, path):
    """A checked opset-13 model from ``input`` to ``output`` (= ``last``), saved at ``path``."""
    nodes = nodes + [helper.make_node("Identity", [last], ["output"])]
    graph = helper.make_graph(nodes, "random_convs",
                              [helper.make_tensor_value_info("input", dtype, list(spec["input"]))],
                              [helper.make_tensor_value_info("output", dtype, [1, *spec["layers"][-1]["shape"]])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


def float_model(spec, path):
    """The ONNX model of a ``float_graph`` spec."""
    rng = np.random.default_rng(spec["seed"])
    nodes, inits, x = [], [], "input"
    channels = spec["input"][1]
    for i, layer in enumerate(spec["layers"]):
        kh, kw = layer["kernel"]
        w = rng.standard_normal((layer["out"], channels // layer["group"], kh, kw)) / np.sqrt(kh * kw * channels)
        inits.append(numpy_helper.from_array(w.astype(np.float32), f"w{i}"))
        if layer["bias"]:
            inits.append(numpy_helper.from_array(rng.standard_normal(layer["out"]).astype(np.float32), f"b{i}"))
        nodes.append(_conv_node(layer, x, f"c{i}", f"w{i}", f"b{i}" if layer["bias"] else None))
        x, after = f"c{i}", layer["after"]
        if after == "relu":
            nodes.append(helper.make_node("Relu", [x], [f"a{i}"]))
        elif after == "clip":
            inits += [numpy_helper.from_array(np.array(-0.5, np.float32), f"lo{i}"),
                      numpy_helper.from_array(np.array(0.75, np.float32), f"hi{i}")]
            nodes.append(helper.make_node("Clip", [x, f"lo{i}", f"hi{i}"], [f"a{i}"]))
        elif after == "prelu":
            slope = _constant("channel_3d" if layer["constant"] in ("channel", "channel_3d", "full") else "one",
                              layer["shape"], rng)
            inits.append(numpy_helper.from_array(slope, f"s{i}"))
            nodes.append(helper.make_node("PRelu", [x, f"s{i}"], [f"a{i}"]))
        elif after == "leaky_relu":
            nodes.append(helper.make_node("LeakyRelu", [x], [f"a{i}"], alpha=LEAKY_ALPHA))
        elif after.startswith("add_const"):
            inits.append(numpy_helper.from_array(_constant(layer["constant"], layer["shape"], rng), f"k{i}"))
            operands = [f"k{i}", x] if after == "add_const_first" else [x, f"k{i}"]
            nodes.append(helper.make_node("Add", operands, [f"a{i}"]))
        if after != "none":
            x = f"a{i}"
        if layer.get("then_relu"):
            nodes.append(helper.make_node("Relu", [x], [f"r{i}"]))
            x = f"r{i}"
        channels = layer["out"]
    return save_model(nodes, x, inits, TensorProto.FLOAT, spec, path)


def vanilla_computes(layer, channels) -> bool:
    """What Vanilla's engine takes: no dilation, dense or depthwise, up to 7x7 taps (9x1 fits)."""
    kh, kw = layer["kernel"]
    dense_or_depthwise = layer["group"] == 1 or layer["group"] == channels == layer["out"]
    return layer["dilation"] == 1 and dense_or_depthwise and kh * kw <= 49


def offloaded_convs(stdout, target, op="nn.conv2d"):
    report = re.search(rf"\[{target}\] offloaded: (.*) in (\d+) functions", stdout)
    assert report, stdout
    count = re.search(rf"{re.escape(op)} x(\d+)", report.group(1))
    return int(count.group(1)) if count else 0


def check_float_graph(spec, tmp_path):
    model = float_model(spec, tmp_path / "model.onnx")
    out = tmp_path / "model.tar"
    done = run_tvmc("compile", "--target", "vanilla_accelerator", "--experimental-tvm-extension", VANILLA_EXT,
                    model, "-f", "mlf", "-o", out)
    assert done.returncode == 0, f"{spec}\n{done.stderr[-2000:]}"
    channels, expected = spec["input"][1], 0
    for layer in spec["layers"]:
        expected += vanilla_computes(layer, channels)
        channels = layer["out"]
    assert offloaded_convs(done.stdout, "vanilla_accelerator") == expected, f"{spec}\n{done.stdout}"
    x = np.random.default_rng(spec["seed"]).standard_normal(spec["input"]).astype(np.float32)
    got = build(out, tmp_path / "build").run({"input": x})[0]["output"]
    (reference,) = onnxruntime_reference(model, {"input": x})
    assert_close(got, reference, what=str(spec))


@SETTINGS
@given(spec=float_graph())
def test_random_float_conv_graphs(spec, tmp_path_factory):
    check_float_graph(spec, tmp_path_factory.mktemp("graph"))


def _layer(**overrides):
    layer = dict(group=1, out=4, kernel=(3, 3), stride=(1, 1), dilation=1, pads=[1, 1, 1, 1], bias=False,
                 after="none", constant="one", then_relu=False, shape=(4, 8, 8))
    layer.update(overrides)
    return layer


# Graphs that made tvmc fail before (kept as regression tests).
REGRESSIONS = {
    # add(c, conv) with c of shape [1,1,1,1] as the first operand: the predicate took the
    # constant for the conv ("Constant has no attribute attrs") and stopped the compile.
    "add-constant-first": dict(input=(1, 3, 8, 8), layers=[_layer(after="add_const_first", constant="one")], seed=1),
    # add(conv, c) with c of the output's full shape: the add cannot be fused, and the conv
    # was not offloaded either (MergeComposite does not retry a smaller pattern).
    "add-full-constant": dict(input=(1, 3, 8, 8), layers=[_layer(after="add_const_last", constant="full")], seed=2),
    "add-scalar-first-with-bias": dict(input=(1, 3, 8, 8), layers=[
        _layer(bias=True, after="add_const_first", constant="scalar")], seed=3),
    "1xN-strided-even-kernel": dict(input=(1, 2, 1, 9), layers=[
        _layer(kernel=(1, 4), stride=(3, 2), pads="SAME_LOWER", after="prelu", constant="channel", shape=(4, 1, 5))],
        seed=4),
}


@pytest.mark.parametrize("name", sorted(REGRESSIONS))
def test_float_regressions(name, tmp_path):
    check_float_graph(REGRESSIONS[name], tmp_path)


# --- int8: ONNX QDQ convs, bit for bit with TVM's CPU build -------------------------------------

@st.composite
def qdq_graph(draw):
    channels, height, width = draw(st.integers(1, 8)), draw(st.integers(1, 10)), draw(st.integers(1, 10))
    layers, shape = [], (channels, height, width)
    for _ in range(draw(st.integers(1, 2))):
        layer = draw(int8_layer(*shape))
        layers.append(layer)
        shape = layer["shape"]
    return dict(input=(1, channels, height, width), layers=layers, seed=draw(st.integers(0, 2**16)))


def qdq_model(spec, path):
    rng = np.random.default_rng(spec["seed"])
    nodes, inits = [], []
    x, channels = "input", spec["input"][1]
    scale = np.float32(0.05)
    const = lambda value, name: inits.append(numpy_helper.from_array(np.asarray(value), name)) or name
    for i, layer in enumerate(spec["layers"]):
        kh, kw = layer["kernel"]
        out = layer["out"]
        sw = (rng.uniform(0.002, 0.02, out) if layer["per_channel"] else np.array(0.01)).astype(np.float32)
        axis = dict(axis=0) if layer["per_channel"] else {}
        zx = const(np.int8(layer["input_zp"]), f"zx{i}")
        nodes.append(helper.make_node("DequantizeLinear", [x, const(scale, f"sx{i}"), zx], [f"xf{i}"]))
        weights = rng.integers(-127, 128, (out, channels // layer["group"], kh, kw)).astype(np.int8)
        nodes.append(helper.make_node("DequantizeLinear", [const(weights, f"w{i}"), const(sw, f"sw{i}"),
                                                           const(np.zeros(sw.shape, np.int8), f"zw{i}")], [f"wf{i}"], **axis))
        inputs = [f"xf{i}", f"wf{i}"]
        if layer["bias"]:
            nodes.append(helper.make_node("DequantizeLinear", [
                const(rng.integers(-500, 500, out).astype(np.int32), f"b{i}"), const((scale * sw).astype(np.float32), f"sb{i}"),
                const(np.zeros(sw.shape, np.int32), f"zb{i}")], [f"bf{i}"], **axis))
            inputs.append(f"bf{i}")
        conv = _conv_node(layer, f"xf{i}", f"yf{i}", inputs[1], inputs[2] if layer["bias"] else None)
        nodes.append(conv)
        y = f"yf{i}"
        if layer["relu"]:
            nodes.append(helper.make_node("Relu", [y], [f"yr{i}"]))
            y = f"yr{i}"
        scale = np.float32(rng.uniform(0.05, 0.3))
        zy = const(np.int8(layer["output_zp"]), f"zy{i}")
        nodes.append(helper.make_node("QuantizeLinear", [y, const(scale, f"sy{i}"), zy], [f"q{i}"]))
        x, channels = f"q{i}", out
        if layer["after"] != "none":  # dequantized, computed, quantized again
            nodes.append(helper.make_node("DequantizeLinear", [x, f"sy{i}", zy], [f"af{i}"]))
            if layer["after"] == "leaky_relu":
                nodes.append(helper.make_node("LeakyRelu", [f"af{i}"], [f"ay{i}"], alpha=LEAKY_ALPHA))
            else:
                k = _constant(layer["constant"], layer["shape"], rng)
                sk = np.float32(max(np.abs(k).max(), 1e-3) / 127)
                kq = np.clip(np.round(k / sk), -127, 127).astype(np.int8)
                nodes.append(helper.make_node("DequantizeLinear", [const(kq, f"k{i}"), const(sk, f"sk{i}"),
                                                                   const(np.int8(0), f"zk{i}")], [f"kf{i}"]))
                operands = [f"kf{i}", f"af{i}"] if layer["after"] == "add_const_first" else [f"af{i}", f"kf{i}"]
                nodes.append(helper.make_node("Add", operands, [f"ay{i}"]))
                if layer["then_relu"]:
                    nodes.append(helper.make_node("Relu", [f"ay{i}"], [f"ar{i}"]))
            last = f"ar{i}" if layer["then_relu"] else f"ay{i}"
            # Its own scale (the zero point stays, the next layer reads it).  TVM 0.16's
            # FakeQuantizationToInteger cannot rewrite LeakyRelu (it calls qnn.leaky_relu with 6
            # arguments, the wrapper takes 4): it runs in float on the CPU, and with the conv's scale
            # its results fall on exact ties, which LLVM (the reference) and gcc round apart.
            scale = np.float32(rng.uniform(0.05, 0.3))
            nodes.append(helper.make_node("QuantizeLinear", [last, const(scale, f"sa{i}"), zy], [f"aq{i}"]))
            x = f"aq{i}"
        if i + 1 < len(spec["layers"]):
            spec["layers"][i + 1]["input_zp"] = layer["output_zp"]  # the next layer reads this tensor
    return save_model(nodes, x, inits, TensorProto.INT8, spec, path)


def check_qdq_graph(spec, tmp_path):
    model = qdq_model(spec, tmp_path / "model.onnx")
    out = tmp_path / "model.tar"
    done = run_tvmc("compile", "--target", "qvanilla", "--experimental-tvm-extension", VANILLA_EXT,
                    model, "-f", "mlf", "-o", out)
    assert done.returncode == 0, f"{spec}\n{done.stderr[-2000:]}"
    channels, expected = spec["input"][1], 0
    for layer in spec["layers"]:  # QVanilla: dense convs, and depthwise ones (channel multiplier 1)
        expected += layer["group"] == 1 or layer["group"] == channels == layer["out"]
        channels = layer["out"]
    assert offloaded_convs(done.stdout, "qvanilla", "qnn.conv2d") == expected, f"{spec}\n{done.stdout}"
    x = np.random.default_rng(spec["seed"]).integers(-128, 128, spec["input"]).astype(np.int8)
    got = build(out, tmp_path / "build").run({"input": x})[0]["output"]
    (reference,) = tvm_cpu_reference(model, {"input": x}, integer_graph=True)
    assert got.dtype == reference.dtype and np.array_equal(got, reference), f"not bit-exact: {spec}"


@SETTINGS
@given(spec=qdq_graph())
def test_random_int8_conv_graphs(spec, tmp_path_factory):
    check_qdq_graph(spec, tmp_path_factory.mktemp("graph"))


INT8_REGRESSIONS = {
    # ReLU without a bias: maximum(conv, 0) has a scalar constant, which the layout conversion
    # did not carry into NHWC, so the conv (with its ReLU and requantize) stayed on the CPU.
    "relu-without-bias": dict(input=(1, 1, 1, 1), layers=[
        _layer(out=2, kernel=(1, 1), pads="SAME_UPPER", shape=(2, 1, 1), per_channel=False, relu=True,
               input_zp=0, output_zp=0)], seed=0),
}


@pytest.mark.parametrize("name", sorted(INT8_REGRESSIONS))
def test_int8_regressions(name, tmp_path):
    check_qdq_graph(INT8_REGRESSIONS[name], tmp_path)
