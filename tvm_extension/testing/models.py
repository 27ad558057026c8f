"""The example ONNX models (deterministic weights), built here so that a backend's tests need no
checkout (``examples/models/`` holds the same files, written by ``python examples/make_models.py``):

* ``models/conv2d.onnx``: one 3x3 same-padded Conv2D, the tutorial's offload in isolation;
* ``models/cnn.onnx``: a small CNN mixing offloadable convs with layers that stay on the CPU
  (a dilated conv, max pooling, a dense layer);
* ``models/vgg.onnx``: a conv-heavy VGG-style network (48x48 input, 17 M MACs in 3x3 convs),
  for the benchmark.
"""
import os
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def _weights(rng, name, shape):
    scale = 1.0 / np.sqrt(np.prod(shape[1:]))
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def float_model(nodes, inits, inp, out, name):
    """A checked opset-13 model with one float32 input "input" and one output "output"."""
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, inp)],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, out)],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="tvm-uma-extensions")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def conv2d_model():
    rng = np.random.default_rng(1)
    nodes = [helper.make_node("Conv", ["input", "w"], ["output"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])]
    return float_model(nodes, [_weights(rng, "w", (8, 4, 3, 3))], [1, 4, 12, 12], [1, 8, 12, 12], "conv2d")


def cnn_model():
    rng = np.random.default_rng(2)
    conv = lambda i, o, w, k, pads, **kw: helper.make_node("Conv", [i, w], [o], kernel_shape=[k, k], pads=pads, **kw)
    nodes = [
        conv("input", "c1", "w1", 3, [1, 1, 1, 1]),                              # offloaded
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),  # offloaded with its bias
        helper.make_node("Relu", ["c2"], ["r2"]),
        conv("r2", "c3", "w3", 3, [2, 2, 2, 2], strides=[2, 2], dilations=[2, 2]),  # dilated: CPU
        helper.make_node("MaxPool", ["c3"], ["p3"], kernel_shape=[2, 2], strides=[2, 2]),
        conv("p3", "c4", "w4", 5, [2, 2, 2, 2]),                                 # offloaded, 5x5
        helper.make_node("Relu", ["c4"], ["r4"]),
        helper.make_node("Flatten", ["r4"], ["f4"]),
        helper.make_node("Gemm", ["f4", "w5", "b5"], ["output"], transB=1),
    ]
    inits = [
        _weights(rng, "w1", (8, 3, 3, 3)),
        _weights(rng, "w2", (8, 8, 3, 3)),
        numpy_helper.from_array((rng.standard_normal(8) * 0.1).astype(np.float32), "b2"),
        _weights(rng, "w3", (16, 8, 3, 3)),
        _weights(rng, "w4", (16, 16, 5, 5)),
        _weights(rng, "w5", (10, 16 * 4 * 4)),
        numpy_helper.from_array((rng.standard_normal(10) * 0.1).astype(np.float32), "b5"),
    ]
    return float_model(nodes, inits, [1, 3, 16, 16], [1, 10], "cnn")


def vgg_model():
    rng = np.random.default_rng(3)
    nodes, inits, x = [], [], "input"
    channels = [(3, 16), (16, 16), "pool", (16, 32), (32, 32), "pool", (32, 64), "pool"]
    for i, stage in enumerate(channels):
        if stage == "pool":
            nodes.append(helper.make_node("MaxPool", [x], [f"p{i}"], kernel_shape=[2, 2], strides=[2, 2]))
            x = f"p{i}"
            continue
        cin, cout = stage
        inits += [_weights(rng, f"w{i}", (cout, cin, 3, 3)),
                  numpy_helper.from_array((rng.standard_normal(cout) * 0.1).astype(np.float32), f"b{i}")]
        nodes += [helper.make_node("Conv", [x, f"w{i}", f"b{i}"], [f"c{i}"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", [f"c{i}"], [f"r{i}"])]
        x = f"r{i}"
    nodes += [helper.make_node("Flatten", [x], ["flat"]), helper.make_node("Gemm", ["flat", "wd", "bd"], ["output"], transB=1)]
    inits += [_weights(rng, "wd", (10, 64 * 6 * 6)),
              numpy_helper.from_array(np.zeros(10, np.float32), "bd")]
    return float_model(nodes, inits, [1, 3, 48, 48], [1, 10], "vgg")


def qdq_model(path, per_channel, relu, seed=0, cin=4, cout=8, group=1, stride=1, pads=(1, 1, 1, 1)):
    """Conv as ONNX QDQ: DequantizeLinear -> Conv (+bias) [-> Relu] -> QuantizeLinear, int8, NCHW."""
    rng = np.random.default_rng(seed)
    sx, sy = np.float32(0.05), np.float32(0.2)
    sw = (rng.uniform(0.005, 0.02, cout) if per_channel else np.array(0.01)).astype(np.float32)
    inits = [
        numpy_helper.from_array(np.array(sx), "sx"), numpy_helper.from_array(np.array(3, np.int8), "zx"),
        numpy_helper.from_array(rng.integers(-127, 128, (cout, cin // group, 3, 3)).astype(np.int8), "w"),
        numpy_helper.from_array(sw, "sw"), numpy_helper.from_array(np.zeros(sw.shape, np.int8), "zw"),
        numpy_helper.from_array(rng.integers(-500, 500, cout).astype(np.int32), "b"),
        numpy_helper.from_array((sx * sw).astype(np.float32), "sb"), numpy_helper.from_array(np.zeros(sw.shape, np.int32), "zb"),
        numpy_helper.from_array(np.array(sy), "sy"), numpy_helper.from_array(np.array(-5, np.int8), "zy"),
    ]
    axis = dict(axis=0) if per_channel else {}
    nodes = [
        helper.make_node("DequantizeLinear", ["x", "sx", "zx"], ["xf"]),
        helper.make_node("DequantizeLinear", ["w", "sw", "zw"], ["wf"], **axis),
        helper.make_node("DequantizeLinear", ["b", "sb", "zb"], ["bf"], **axis),
        helper.make_node("Conv", ["xf", "wf", "bf"], ["yf"], pads=list(pads), kernel_shape=[3, 3], group=group,
                         strides=[stride, stride]),
    ]
    if relu:
        nodes.append(helper.make_node("Relu", ["yf"], ["yr"]))
    nodes.append(helper.make_node("QuantizeLinear", ["yr" if relu else "yf", "sy", "zy"], ["y"]))
    out = [(10 + pads[i] + pads[i + 2] - 3) // stride + 1 for i in (0, 1)]
    graph = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", TensorProto.INT8, [1, cin, 10, 10])],
                              [helper.make_tensor_value_info("y", TensorProto.INT8, [1, cout, *out])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


BUILDERS = {"conv2d": conv2d_model, "cnn": cnn_model, "vgg": vgg_model}


def example_model(name: str) -> Path:
    """The path of the example model ``name`` (conv2d, cnn, vgg), written once into the model cache."""
    from .model_zoo import cache_dir  # pylint: disable=import-outside-toplevel

    path = cache_dir() / "examples" / f"{name}.onnx"
    data = BUILDERS[name]().SerializeToString()
    if not path.is_file() or path.read_bytes() != data:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, delete=False) as partial:  # readers never see half a file
            partial.write(data)
        os.replace(partial.name, path)
    return path
