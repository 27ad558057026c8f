"""ONNX's int8 conv layers (QDQ, NCHW) in the form int8 backends match on the Relax engine.

TVM's Relax ONNX frontend imports a QDQ conv as

    dequantize(x) -> conv2d NCHW/OIHW (., dequantize(W)) -> [add(., reshape(dequantize(b)))] -> [relu | clip] -> quantize

where its TFLite frontend gives the NHWC chain ``tvm_extension.relax.qconv`` matches.  ``to_nhwc``
rewrites each such chain into that form: the int8 input transposed to NHWC, the weights as HWIO (a
depthwise kernel as TFLite stores it, [1][kh][kw][C] reshaped to HWOI), the bias added per channel,
a ReLU or clip after the conv made the clamp after ``quantize`` (the same int8 values: clamping the
float at 0 or quantizing first then clamping at the zero point rounds alike), and the int8 output
transposed back to NCHW.  Between two chains the transposes back and forth cancel, so a network
of such layers stays NHWC from its first layer to its last.  Chains this cannot keep exact
(per-channel activations, grouped convs) are left as they are.
"""
import numpy as np
from tvm import relax
from tvm.relax.dpl import is_const, is_op, wildcard

from .tvm_internals import constant_array

TO_NHWC, TO_NCHW = [0, 2, 3, 1], [0, 3, 1, 2]


def _dequantize(data):
    return is_op("relax.dequantize")(data, is_const(), is_const())


_X, _W, _B = wildcard(), is_const(), is_const()
_INPUT, _WEIGHTS, _BIAS = _dequantize(_X), _dequantize(_W), _dequantize(_B)
_CONV = is_op("relax.nn.conv2d")(_INPUT, _WEIGHTS)
_BIASED = is_op("relax.add")(_CONV, is_op("relax.reshape")(_BIAS, wildcard()))
_RELU = is_op("relax.nn.relu")(_BIASED | _CONV)
_CLIP = is_op("relax.clip")(_BIASED | _CONV, wildcard(), wildcard())
_CHAIN = is_op("relax.quantize")(_RELU | _CLIP | _BIASED | _CONV, is_const(), is_const())


def _scalar(expr) -> bool:
    return int(np.prod([int(d) for d in expr.ty.shape])) == 1


def _clamp(found, quantize) -> tuple:
    """The int8 clamp after quantize that computes the ReLU or clip before it (None: no clamp)."""
    scale, zero = (float(constant_array(e).reshape(-1)[0]) for e in quantize.args[1:])
    if _RELU in found:
        low, high = 0.0, None
    elif _CLIP in found:
        low, high = (float(getattr(b.value, "value", b.value)) for b in found[_CLIP].args[1:])
    else:
        return None
    to_int = lambda v: int(np.clip(np.round(np.float32(v) / np.float32(scale)) + zero, -128, 127))
    return to_int(low), (127 if high is None else to_int(high))


def _rewrite(expr, found):
    conv, quantize = found[_CONV], expr
    a = conv.attrs
    weights = constant_array(found[_W])
    out_channels, in_per_group = weights.shape[:2]
    channels = int(conv.args[0].ty.shape[1])
    depthwise = int(a.groups) == channels == out_channels and in_per_group == 1
    if ((a.data_layout, a.kernel_layout, a.out_layout) != ("NCHW", "OIHW", "NCHW") or weights.dtype != np.int8
            or (int(a.groups) != 1 and not depthwise) or not all(_scalar(e) for e in (*found[_INPUT].args[1:],
                                                                                       *quantize.args[1:]))):
        return expr
    op = relax.op
    (s_x, z_x), (s_w, z_w) = found[_INPUT].args[1:], found[_WEIGHTS].args[1:]
    data = op.dequantize(op.permute_dims(found[_X], TO_NHWC), s_x, z_x, axis=3)
    if depthwise:  # TFLite's depthwise weights [1][kh][kw][C], reshaped to HWOI (O = 1)
        kh, kw = weights.shape[2:]
        kernel = op.dequantize(relax.const(weights.transpose(1, 2, 3, 0)), s_w, z_w, axis=3)
        kernel, layout = op.reshape(kernel, (kh, kw, channels, 1)), "HWOI"
    else:
        kernel, layout = op.dequantize(relax.const(weights.transpose(2, 3, 1, 0)), s_w, z_w, axis=3), "HWIO"
    out = op.nn.conv2d(data, kernel, a.strides, a.padding, a.dilation, a.groups, data_layout="NHWC",
                       kernel_layout=layout, out_layout="NHWC", out_dtype=a.out_dtype)
    if _BIASED in found:
        bias = found[_BIAS]
        out = op.add(out, op.dequantize(bias.args[0], *bias.args[1:], axis=0))
    out = op.quantize(out, *quantize.args[1:], axis=3, out_dtype=quantize.attrs.out_dtype)
    clamp = _clamp(found, quantize)
    if clamp is not None:
        out = op.clip(out, *clamp)
    return op.permute_dims(out, TO_NCHW)


def _back_and_forth(expr, found):
    inner = found[_INNER]
    axes = [int(i) for i in inner.attrs.axes] if inner.attrs.axes is not None else None
    outer = [int(i) for i in expr.attrs.axes] if expr.attrs.axes is not None else None
    if axes is not None and outer is not None and [axes[i] for i in outer] == list(range(len(axes))):
        return inner.args[0]
    return expr


_INNER = is_op("relax.permute_dims")(wildcard())
_TWICE = is_op("relax.permute_dims")(_INNER)


def to_nhwc(mod):
    """``mod`` with its ONNX QDQ conv chains in the NHWC form of ``qconv`` (the rest unchanged)."""
    for gv, func in list(mod.functions_items()):
        if isinstance(func, relax.Function):
            func = relax.dpl.rewrite_call(_CHAIN, _rewrite, func)
            mod[gv] = relax.dpl.rewrite_call(_TWICE, _back_and_forth, func)
    return relax.transform.DeadCodeElimination()(mod)
