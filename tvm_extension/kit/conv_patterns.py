"""Float32 Conv2D patterns for a conv engine with an output stage, and why a match is refused.

``conv2d -> add|bias_add(bias) -> add(residual) -> relu|clip|prelu`` is one offloaded call; each
part after the conv is optional, a residual needs a bias (two patterns: with and without residual).
ONNX's Conv imports its bias as ``nn.bias_add``, TFLite's as ``nn.bias_add`` or ``add``.
``split_composite`` names the parts of a match, ``why_not_offloaded`` says in one phrase why an
engine computing any window (kernel size, stride, zero padding), a per-channel bias, a residual
of the output's shape and a per-channel activation would refuse it (None: it computes it).
"""
from typing import NamedTuple, Optional

import tvm
from tvm import relay
from tvm.relay.dataflow_pattern import is_constant, is_op, is_var, wildcard

from .limits import conv_geometry, geometry_problem

FLT_MAX = 3.4028234663852886e38


def _conv(bias, biased_only=False):
    conv = is_op("nn.conv2d")(wildcard(), wildcard())
    biased = is_op("add")(conv, bias) | is_op("nn.bias_add")(conv, bias)
    return biased if biased_only else conv | biased


def _activation(x):
    return x.optional(lambda y: is_op("nn.relu")(y) | is_op("clip")(y) | is_op("nn.prelu")(y, is_constant()))


def conv2d_residual_pattern():
    """conv2d -> bias -> add(residual), in either order -> [relu|clip|prelu].

    Registered before ``conv2d_pattern``: MergeComposite tries patterns in order, and a
    rejected residual (broadcast, other dtype) leaves the conv for the next pattern.
    """
    biased = _conv(is_constant(), biased_only=True)
    return _activation(is_op("add")(biased, wildcard()) | is_op("add")(wildcard(), biased))


def conv2d_pattern(activation=True):
    """conv2d -> [bias] -> [relu|clip|prelu]; without the activation as a fallback."""
    conv = _conv(is_constant())
    return _activation(conv) if activation else conv


def conv2d_alone_pattern():
    """The conv by itself, the last resort: when what follows it cannot be fused (an add of a
    constant that is not per channel, say), the conv is still offloaded."""
    return is_op("nn.conv2d")(wildcard(), is_constant())


class Parts(NamedTuple):
    conv: relay.Call
    bias: Optional[relay.Call]  # the add / bias_add of a per-channel constant
    bias_tensor: Optional[relay.Expr]  # its constant (a parameter once offloaded)
    residual: Optional[relay.Expr]  # the tensor added after the bias
    activation: Optional[relay.Call]  # relu / clip / prelu


# Tells the bias from the residual, in the matched graph and in the offloaded function (where
# the constant bias has become a parameter).
_BIASED = _conv(is_constant() | is_var())


def _is_conv(expr) -> bool:
    return isinstance(expr, relay.Call) and isinstance(expr.op, tvm.ir.Op) and expr.op.name == "nn.conv2d"


def split_composite(root) -> Parts:
    """The parts of an expression matched by these patterns (or the body of its offloaded function).

    TVM's pattern matcher takes ``add`` as commutative, so either operand may be the conv's side.
    """
    activation = residual = None
    expr = root
    if expr.op.name in ("nn.relu", "clip", "nn.prelu"):
        activation, expr = expr, expr.args[0]
    if not _BIASED.match(expr):  # add(biased conv, residual) in either order
        chain = 0 if _BIASED.match(expr.args[0]) else 1
        residual, expr = expr.args[1 - chain], expr.args[chain]
    if _is_conv(expr):
        return Parts(expr, None, None, residual, activation)
    side = 0 if _is_conv(expr.args[0]) else 1  # bias_add(conv, b); add(conv, b) or add(b, conv)
    return Parts(expr.args[side], expr, expr.args[1 - side], residual, activation)


# (feature map, weights) layouts the engine reads; NHWC is TFLite's, HWIO what TVM's NHWC conv
# takes (HWOI for a depthwise one).
LAYOUTS = {("NCHW", "OIHW"), ("NHWC", "HWIO")}
DEPTHWISE_LAYOUTS = {("NCHW", "OIHW"), ("NHWC", "HWOI")}


def is_depthwise(conv) -> bool:
    """groups = input channels = output channels (a channel multiplier of 1)."""
    layout, groups = str(conv.attrs.data_layout), int(conv.attrs.groups)
    data, out = conv.args[0].checked_type, conv.checked_type
    return groups > 1 and groups == int(data.shape[layout.index("C")]) == int(out.shape[layout.index("C")])


def _ints(values):
    return [int(v) for v in values]


def _static(shape) -> bool:
    return all(isinstance(d, tvm.tir.IntImm) for d in shape)


def _bias_problem(add, bias_tensor, channels: int, layout: str) -> Optional[str]:
    bias = bias_tensor.checked_type
    axis = layout.index("C")
    if add.op.name == "nn.bias_add":
        per_channel = [[channels]] if int(add.attrs.axis) % 4 == axis else []
    else:  # add broadcasts: [C,1,1] / [1,C,1,1] in NCHW, [C] / [1,1,1,C] in NHWC
        shape = [channels if a == "C" else 1 for a in layout]
        per_channel = [shape, shape[1:]] + ([[channels]] if layout == "NHWC" else [])
    if bias.dtype != "float32" or _ints(bias.shape) not in per_channel:
        return f"bias of shape {_ints(bias.shape)} is not per output channel"
    return None


def _slope_problem(prelu, channels: int, layout: str) -> Optional[str]:
    slope = prelu.args[1].checked_type
    if int(prelu.attrs.axis) % 4 != layout.index("C") or slope.dtype != "float32" or _ints(slope.shape) != [channels]:
        return f"PReLU slope of shape {_ints(slope.shape)} is not per output channel"
    return None


def why_not_offloaded(root, max_kernel_size: int, max_taps: Optional[int] = None) -> Optional[str]:
    """None when the engine computes this conv2d (with its bias and activation), else why not.

    The engine: NCHW/OIHW or NHWC/HWIO float32, batch 1, no dilation, dense or depthwise, kernel of at
    most ``max_kernel_size`` squared taps (9x1 fits 7x7's buffer), a depthwise one of at most
    ``max_taps``; any stride and zero padding.
    """
    conv, add, bias_tensor, residual, activation = split_composite(root)
    attrs = conv.attrs
    data, weight = conv.args[0].checked_type, conv.args[1].checked_type
    depthwise = is_depthwise(conv)
    if int(attrs.groups) != 1 and not depthwise:
        return "grouped (not depthwise)"
    layout, layouts = str(attrs.data_layout), DEPTHWISE_LAYOUTS if depthwise else LAYOUTS
    if (layout, attrs.kernel_layout) not in layouts or attrs.out_layout not in ("", layout):
        wanted = " or ".join("/".join(pair) for pair in sorted(layouts))
        return f"layout {attrs.data_layout}/{attrs.kernel_layout} (needs {wanted})"
    if data.dtype != "float32" or weight.dtype != "float32" or attrs.out_dtype not in ("", "float32"):
        return f"dtype {data.dtype} (needs float32)"
    if len(data.shape) != 4 or not (_static(data.shape) and _static(weight.shape)):
        return "dynamic shape"
    if _ints(attrs.dilation) != [1, 1]:
        return "dilation"
    if int(data.shape[0]) != 1:
        return f"batch {int(data.shape[0])} (needs 1)"
    kh, kw = (_ints(weight.shape)[attrs.kernel_layout.index(axis)] for axis in "HW")
    if kh * kw > max_kernel_size ** 2:  # the window buffer holds max_kernel_size^2 taps, in any shape
        return f"kernel {kh}x{kw} larger than the window buffer (max_kernel_size {max_kernel_size})"
    problem = engine_problem(conv_geometry(conv), depthwise, *clamp_bounds(activation), max_taps)
    if problem:
        return problem
    channels = int(weight.shape[attrs.kernel_layout.index("O")])
    if residual is not None and not tvm.ir.structural_equal(residual.checked_type, root.checked_type):
        return f"residual of type {residual.checked_type} is not the conv's output type"
    if activation is not None and activation.op.name == "nn.prelu":
        problem = _slope_problem(activation, channels, layout)
        if problem:
            return problem
    return _bias_problem(add, bias_tensor, channels, layout) if add is not None else None


def clamp_bounds(activation):
    """The output stage's (lo, hi) for the activation of a match (None, relu, clip or prelu)."""
    kind = activation.op.name if activation is not None else None
    if kind == "nn.relu":
        return 0.0, FLT_MAX
    if kind == "clip":
        return max(float(activation.attrs.a_min), -FLT_MAX), min(float(activation.attrs.a_max), FLT_MAX)
    return -FLT_MAX, FLT_MAX


def engine_problem(g: dict, depthwise: bool, lo: float, hi: float, max_taps: Optional[int] = None) -> Optional[str]:
    """Why a float kernel's argument check would refuse this layer, in the order it checks, else None:
    empty tensors, strides, negative pads, an empty clamp, a depthwise window above ``max_taps``,
    sizes beyond its int arithmetic (Vanilla's check() in vanilla_accelerator.c).

    ``g`` is ``conv_geometry``'s; (lo, hi) the output stage's clamp.
    """
    kh, kw = g["kh"], g["kw"]
    own = None
    if not lo <= hi:
        own = f"clamp [{lo}, {hi}] is empty"
    elif depthwise and max_taps is not None and kh * kw > max_taps:
        own = f"depthwise kernel {kh}x{kw}: {kh * kw} taps above the depthwise window buffer's {max_taps}"
    return geometry_problem(g, depthwise=depthwise, element_bytes=4, weight_bytes=4, own_problem=own)  # float32


def hard_activation_reason(clip, stage: str = "the output stage") -> Optional[str]:
    """Why a hard-sigmoid / hard-swish clip stays on the CPU (for the offload report), else None.

    Frontends import them as ``clip(x + 3, 0, 6) / 6`` (times x) or ``clip(x * a + b, 0, 1)``; the
    output stage (``stage``, named in the reason) clamps a value, it does not compute this curve.
    """
    operand = clip.args[0]
    bounds = (float(clip.attrs.a_min), float(clip.attrs.a_max))
    shifted = isinstance(operand, relay.Call) and isinstance(operand.op, tvm.ir.Op) and operand.op.name == "add" and any(
        isinstance(a, relay.Constant) for a in operand.args)
    if shifted and bounds in ((0.0, 6.0), (0.0, 1.0)):
        return f"hard-sigmoid/hard-swish (clip of x + c): not in {stage}"
    return None
