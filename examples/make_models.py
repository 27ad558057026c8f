"""Writes the example ONNX models (deterministic weights): ``python examples/make_models.py``.

* ``models/conv2d.onnx``: one 3x3 same-padded Conv2D, the tutorial's offload in isolation;
* ``models/cnn.onnx``: a small CNN mixing offloadable convs with layers that stay on the CPU
  (a dilated conv, max pooling, a dense layer);
* ``models/vgg.onnx``: a conv-heavy VGG-style network (48x48 input, 17 M MACs in 3x3 convs),
  for the benchmark.
"""
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = Path(__file__).resolve().parent / "models"


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


if __name__ == "__main__":
    HERE.mkdir(exist_ok=True)
    onnx.save(conv2d_model(), HERE / "conv2d.onnx")
    onnx.save(cnn_model(), HERE / "cnn.onnx")
    onnx.save(vgg_model(), HERE / "vgg.onnx")
    print(f"wrote conv2d.onnx, cnn.onnx and vgg.onnx in {HERE}")
