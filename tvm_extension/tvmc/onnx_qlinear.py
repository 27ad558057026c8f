"""ONNX QLinearConv as TVM 0.16 can import it.

TVM's importer rejects QLinearConv with a bias or per-channel weight scales, and turns the
rest into float maths with wrong results (measured on int8 models against ONNX Runtime).
Its DequantizeLinear -> Conv -> QuantizeLinear (QDQ) import is right, and integer backends
get the integer graph back from FakeQuantizationToInteger.  So before TVMC imports an ONNX
model, every QLinearConv is rewritten into that QDQ form, which computes the same thing:
``y = quantize(conv(dequantize(x), dequantize(w)) + dequantize(b, x_scale * w_scale))``.
"""
import numpy as np
import onnx
from onnx import helper, numpy_helper


def _initializer(model, name):
    return next((numpy_helper.to_array(i) for i in model.graph.initializer if i.name == name), None)


def rewrite_qlinear_conv(model: onnx.ModelProto) -> onnx.ModelProto:
    """Replace each QLinearConv node by DequantizeLinear/Conv/QuantizeLinear nodes (in place)."""
    nodes, added = [], []
    for index, node in enumerate(model.graph.node):
        if node.op_type != "QLinearConv":
            nodes.append(node)
            continue
        x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp = node.input[:8]
        bias = node.input[8] if len(node.input) > 8 and node.input[8] else None
        prefix = f"{node.name or 'qlinearconv'}_{index}"
        per_channel = dict(axis=0) if np.asarray(_initializer(model, w_scale)).size > 1 else {}
        conv_inputs = [f"{prefix}_x", f"{prefix}_w"]
        nodes += [
            helper.make_node("DequantizeLinear", [x, x_scale, x_zp], [f"{prefix}_x"]),
            helper.make_node("DequantizeLinear", [w, w_scale, w_zp], [f"{prefix}_w"], **per_channel),
        ]
        if bias is not None:
            scale = (np.asarray(_initializer(model, x_scale), np.float32) *
                     np.asarray(_initializer(model, w_scale), np.float32)).astype(np.float32)
            added += [numpy_helper.from_array(scale, f"{prefix}_b_scale"),
                      numpy_helper.from_array(np.zeros(scale.shape, np.int32), f"{prefix}_b_zp")]
            nodes.append(helper.make_node("DequantizeLinear", [bias, f"{prefix}_b_scale", f"{prefix}_b_zp"],
                                          [f"{prefix}_b"], **per_channel))
            conv_inputs.append(f"{prefix}_b")
        conv = helper.make_node("Conv", conv_inputs, [f"{prefix}_y"], name=f"{prefix}_conv")
        conv.attribute.extend(node.attribute)
        nodes += [conv, helper.make_node("QuantizeLinear", [f"{prefix}_y", y_scale, y_zp], list(node.output))]
    if len(nodes) != len(model.graph.node):
        del model.graph.node[:]
        model.graph.node.extend(nodes)
        model.graph.initializer.extend(added)
    return model


def install(frontends):
    """Make TVMC's ONNX frontend import QLinearConv through the rewrite."""
    from tvm import relay  # pylint: disable=import-outside-toplevel

    def load(self, path, shape_dict=None, **kwargs):  # TVMC's OnnxFrontend.load, plus the rewrite
        model = rewrite_qlinear_conv(onnx.load(path))
        return relay.frontend.from_onnx(model, shape=shape_dict, **kwargs)

    frontends.OnnxFrontend.load = load
