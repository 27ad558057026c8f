"""Relax patterns of a float32 conv engine with an output stage, for backends to use:
``conv2d -> [add(bias)] -> [add(residual)] -> [relu | clip | prelu]``, what the ONNX and TFLite
frontends emit for a conv layer (a residual needs a bias, as on the Relay engine).

``conv2d_patterns(target, check)`` gives the ``FuseOpsByPattern`` entries, largest first; ``split``
names the parts of a match (in the check and in the fused function alike); ``conv2d_problem`` says
why the engine does not compute a conv (one phrase, shown in the offload report), ``stage_problem``
why it does not compute the rest of a match; ``conv_geometry`` and ``clamp_bounds`` give the numbers
a conv passes to a kernel, ``to_oihw`` and ``per_channel_slope`` the constants it reads
(``oihw_packs``: both, for an engine reading [oc][ic][kh][kw] weights, as the kit's).
"""
from typing import Callable, NamedTuple, Optional

import numpy as np
from tvm import relax
from tvm.relax.dpl import is_const, is_op, wildcard
from tvm.relax.transform import FusionPattern

from .tvm_internals import Constant, constant_array

FLT_MAX = 3.4028234663852886e38
CONV, ADD, RESHAPE, PRELU = "relax.nn.conv2d", "relax.add", "relax.reshape", "relax.nn.prelu"
ACTIVATIONS = {"relax.nn.relu": "relu", "relax.clip": "clip", PRELU: "prelu"}


class Parts(NamedTuple):
    conv: relax.Call
    bias: Optional[relax.Expr]  # the per-channel tensor added to the conv
    residual: Optional[relax.Expr]  # the tensor of the output's shape added after the bias
    activation: Optional[relax.Call]  # relu, clip or prelu
    flattened: bool  # a prelu on the flattened tensor (TFLite's, between two reshapes)


def _activation(root, kind: str):
    if kind == "relu":
        return is_op("relax.nn.relu")(root)
    if kind == "clip":
        return is_op("relax.clip")(root, wildcard(), wildcard())  # its bounds: PrimValues
    if kind == "prelu":
        return is_op(PRELU)(root, is_const())
    if kind == "flat_prelu":  # TFLite's PReLU: reshape to 1-D, prelu along axis 0, reshape back
        return is_op(RESHAPE)(is_op(PRELU)(is_op(RESHAPE)(root, wildcard()), is_const()), wildcard())
    return root


def conv2d_patterns(target: str, check: Callable) -> list:
    """``<target>.conv2d[_bias[_residual]][_relu|_clip|_prelu|_flat_prelu]`` entries, largest
    first; ``check(parts)`` (``split``'s) accepts a match."""
    entries = []
    for stage in ("_bias_residual", "_bias", ""):
        for kind in ("relu", "clip", "prelu", "flat_prelu", ""):
            conv = is_op(CONV)(wildcard(), is_const())
            root = is_op(ADD)(conv, is_const()) if stage else conv
            if "residual" in stage:  # either operand order (a skip connection is often first)
                other = wildcard()
                root = is_op(ADD)(root, other) | is_op(ADD)(other, root)
            root = _activation(root, kind)
            name = f"{target}.conv2d{stage}{'_' if kind else ''}{kind}"
            entries.append(FusionPattern(name, root, {"conv": conv}, lambda ctx: check(
                split(ctx.matched_expr, ctx.matched_bindings))))
    return entries


def _op(expr) -> Optional[str]:
    return expr.op.name if isinstance(expr, relax.Call) and hasattr(expr.op, "name") else None


def split(root, bindings) -> Parts:
    """The parts of a match, from its root: ``bindings`` maps the match's variables to their values
    (``PatternCheckContext.matched_bindings``, or ``relax.analysis.get_var2val`` of the fused
    function, whose parameters have none)."""
    value = lambda expr: bindings.get(expr, expr) if isinstance(expr, relax.Var) else expr
    expr, activation, flattened = value(root), None, False
    if _op(expr) == RESHAPE:
        expr, flattened = value(expr.args[0]), True
    if _op(expr) in ACTIVATIONS:
        activation, expr = expr, value(expr.args[0])
    if flattened:
        expr = value(expr.args[0])
    is_conv = lambda e: _op(value(e)) == CONV
    residual = None
    if _op(expr) == ADD and not any(map(is_conv, expr.args)):  # add(biased conv, residual), either order
        side = next(i for i, a in enumerate(expr.args) if _op(value(a)) == ADD and any(map(is_conv, value(a).args)))
        residual, expr = expr.args[1 - side], value(expr.args[side])
    if _op(expr) == ADD:
        side = 0 if is_conv(expr.args[0]) else 1
        return Parts(value(expr.args[side]), expr.args[1 - side], residual, activation, flattened)
    return Parts(expr, None, residual, activation, flattened)


def _ints(values) -> list:
    return [int(v) for v in values]


def is_depthwise(conv) -> bool:
    """groups = input channels = output channels (a channel multiplier of 1)."""
    layout, groups = conv.attrs.data_layout, int(conv.attrs.groups)
    channels = lambda ty: int(ty.shape[layout.index("C")])
    return groups > 1 and groups == channels(conv.args[0].ty) == channels(conv.ty)


def conv2d_problem(conv, max_kernel_size: int, nhwc: bool = False, max_taps: Optional[int] = None) -> Optional[str]:
    """Why the engine does not compute this ``relax.nn.conv2d``, else None: it takes NCHW/OIHW
    float32 (and NHWC with HWIO weights, HWOI when depthwise, TFLite's, if ``nhwc``), batch 1, no
    dilation, no groups (depthwise of at most ``max_taps`` taps if given), a window of at most
    ``max_kernel_size`` squared taps."""
    attrs, data, weight = conv.attrs, conv.args[0].ty, conv.args[1].ty
    if data.shape is None or any(not hasattr(d, "value") for d in [*data.shape, *weight.shape]):
        return "dynamic shape"
    depthwise = max_taps is not None and is_depthwise(conv)
    layouts = [("NCHW", "OIHW")] + ([("NHWC", "HWOI" if depthwise else "HWIO")] if nhwc else [])
    if (attrs.data_layout, attrs.kernel_layout) not in layouts or attrs.out_layout != attrs.data_layout:
        return f"layout {attrs.data_layout}/{attrs.kernel_layout} (needs {' or '.join('/'.join(p) for p in layouts)})"
    if data.dtype != "float32" or weight.dtype != "float32" or conv.ty.dtype != "float32":
        return f"dtype {data.dtype} (needs float32)"
    if int(attrs.groups) != 1 and not depthwise:
        return f"groups {int(attrs.groups)} (needs 1{' or depthwise' if max_taps is not None else ''})"
    if _ints(attrs.dilation) != [1, 1]:
        return "dilation {}x{}".format(*_ints(attrs.dilation))
    if int(data.shape[0]) != 1:
        return f"batch {int(data.shape[0])} (needs 1)"
    kh, kw = (int(weight.shape[attrs.kernel_layout.index(axis)]) for axis in "HW")
    if kh * kw > max_kernel_size ** 2:
        return f"kernel {kh}x{kw} larger than the window buffer (max_kernel_size {max_kernel_size})"
    if depthwise and kh * kw > max_taps:
        return f"depthwise kernel {kh}x{kw}: {kh * kw} taps above the depthwise window buffer's {max_taps}"
    return None


def _channels(conv) -> int:
    return int(conv.ty.shape[conv.attrs.data_layout.index("C")])


def bias_problem(bias, conv) -> Optional[str]:
    """Why a constant added after the conv is not a per-channel bias, else None."""
    layout, channels = conv.attrs.data_layout, _channels(conv)
    per_channel = [channels if axis == "C" else 1 for axis in layout]
    allowed = [per_channel, per_channel[1:]] + ([[channels]] if layout.endswith("C") else [])
    shape = _ints(bias.ty.shape)
    if bias.ty.dtype != "float32" or shape not in allowed:
        return f"added tensor of shape {shape} is not a bias of {channels} channels"
    return None


def _constant(expr) -> np.ndarray:
    return constant_array(expr)


def per_channel_slope(alpha: np.ndarray, conv, flattened: bool) -> Optional[np.ndarray]:
    """The PReLU slope of each output channel, else None: TFLite's flattened PReLU has one slope
    per element, which must repeat the same per-channel slopes at every pixel."""
    if not flattened:
        return alpha if alpha.shape == (_channels(conv),) else None
    shape, axis = _ints(conv.ty.shape), conv.attrs.data_layout.index("C")
    if alpha.size != np.prod(shape):
        return None
    pixels = np.moveaxis(alpha.reshape(shape), axis, -1).reshape(-1, shape[axis])
    return pixels[0] if (pixels == pixels[0]).all() else None


def stage_problem(parts: Parts) -> Optional[str]:
    """Why the engine's output stage does not compute the rest of a match (bias, residual,
    activation), else None."""
    conv = parts.conv
    if parts.bias is not None and bias_problem(parts.bias, conv):
        return bias_problem(parts.bias, conv)
    if parts.residual is not None:
        ty = parts.residual.ty
        if ty.dtype != conv.ty.dtype or ty.shape is None or _ints(ty.shape) != _ints(conv.ty.shape):
            return "residual of another shape or dtype than the conv's output"
    if _op(parts.activation) == PRELU:
        alpha = parts.activation.args[1]
        channel_axis = conv.attrs.data_layout.index("C")
        if not parts.flattened and int(parts.activation.attrs.axis) % 4 != channel_axis:
            return "PReLU not along the channels"
        if not isinstance(alpha, Constant) or per_channel_slope(_constant(alpha), conv, parts.flattened) is None:
            return "PReLU slope not per output channel"
    lo, hi = clamp_bounds(parts.activation)
    if not lo <= hi:
        return f"clamp [{lo}, {hi}] is empty"
    return None


def clamp_bounds(activation):
    """The output stage's (lo, hi) for the activation of a match (None, relu, clip or prelu)."""
    if _op(activation) == "relax.nn.relu":
        return 0.0, FLT_MAX
    if _op(activation) == "relax.clip":
        # PrimValues: their value an IntImm/FloatImm, or a plain number for an int bound
        lo, hi = (float(getattr(bound.value, "value", bound.value)) for bound in activation.args[1:])
        return max(lo, -FLT_MAX), min(hi, FLT_MAX)
    return -FLT_MAX, FLT_MAX


def to_oihw(weights: np.ndarray, kernel_layout: str) -> np.ndarray:
    """The weights as [oc][ic][kh][kw] (depthwise: [channels][1][kh][kw]), from the conv's layout."""
    return np.ascontiguousarray(np.transpose(weights, [kernel_layout.index(axis) for axis in "OIHW"]))


def conv_geometry(conv) -> dict:
    """The integers of a conv in any layout: channels, sizes, kernel, strides, top/left pads."""
    attrs = conv.attrs
    size = dict(zip(attrs.data_layout, _ints(conv.args[0].ty.shape)))
    out = dict(zip(attrs.data_layout, _ints(conv.ty.shape)))
    weight = dict(zip(attrs.kernel_layout, _ints(conv.args[1].ty.shape)))
    pad_top, pad_left = _ints(attrs.padding)[:2]  # [top, left, bottom, right]: bottom/right follow from the output
    stride_h, stride_w = _ints(attrs.strides)
    return dict(oc=out["C"], ic=size["C"], ih=size["H"], iw=size["W"], kh=weight["H"], kw=weight["W"], oh=out["H"],
                ow=out["W"], stride_h=stride_h, stride_w=stride_w, pad_top=pad_top, pad_left=pad_left)


def split_fused(func: relax.Function) -> Parts:
    """``split`` of a function ``FuseOpsByPattern`` made of a match."""
    return split(func.body.body, relax.analysis.get_var2val(func))


def prelu_slope(parts: Parts) -> Optional[relax.Expr]:
    """The match's PReLU slope operand, if its activation is a PReLU."""
    activation = parts.activation
    return activation.args[1] if activation is not None and activation.op.name == PRELU else None


def oihw_packs(func: relax.Function) -> dict:
    """For an engine that reads weights as [oc][ic][kh][kw] whatever the feature maps' layout, and
    one PReLU slope per channel (the kit's conv engine): {parameter of the match: how its constant
    is repacked}, a backend's ``pack_constants``."""
    parts = split_fused(func)
    conv = parts.conv
    packs = {conv.args[1]: lambda weights: to_oihw(weights, conv.attrs.kernel_layout)}
    if prelu_slope(parts) is not None:
        packs[prelu_slope(parts)] = lambda alpha: per_channel_slope(alpha, conv, parts.flattened)
    return packs
