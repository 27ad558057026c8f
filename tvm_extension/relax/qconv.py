"""Relax patterns of an int8 conv engine, for backends to use: TFLite's int8 conv layer, which TVM's
Relax TFLite frontend imports as float arithmetic between quantize ops,

    dequantize(x) -> conv2d(., dequantize(W) [-> reshape]) -> [add(., dequantize(b))] -> quantize -> [clip]

(the clip: TFLite's fused ReLU or ReLU6; the reshape: a depthwise kernel).  ``chain_patterns``
gives the ``FuseOpsByPattern`` entries; ``chain`` names the parts of a match (in the check and in
the fused function alike); ``quantization`` reads what an integer kernel takes from the chain's
constants (zero points, clamp, bias, TFLite's per-channel multipliers and shifts) or says why it
cannot.  Matched before constants are folded (a backend's ``MATCH_BEFORE_FOLDING``): the weights
and bias as the model stores them, int8 and int32 with their scales.
"""
import contextlib
import contextvars
import dataclasses
from typing import Callable, Optional, Union

import numpy as np
from tvm import relax
from tvm.relax.backend.utils import has_leaking_intermediate_variables
from tvm.relax.dpl import is_const, is_op, wildcard
from tvm.relax.transform import FusionPattern

from tvm_extension.kit.quantization import ROUNDING_TFLITE, ROUNDING_UPWARD, activation_range, quantize_multiplier

from .tvm_internals import constant_array

DEQUANTIZE, QUANTIZE, CONV, ADD, CLIP = "relax.dequantize", "relax.quantize", "relax.nn.conv2d", "relax.add", "relax.clip"

# The requantization of the model's framework (tvm_extension.kit.quantization): TFLite's for a TFLite
# model (what its kernels compute), TVM's for an ONNX QDQ model (what ONNX Runtime computes, and the
# Relay engine); the engine says which while it offloads (``model_rounding``).
_TFLITE_ROUNDING = contextvars.ContextVar("tflite_rounding", default=True)


@contextlib.contextmanager
def model_rounding(tflite: bool):
    token = _TFLITE_ROUNDING.set(tflite)
    try:
        yield
    finally:
        _TFLITE_ROUNDING.reset(token)


def chain_patterns(target: str, problem: Callable) -> list:
    """``<target>.conv2d_int8[_bias][_clip]`` entries, largest first; a match is taken when
    ``problem(chain, value)`` (``value(expr)``: a constant operand's array) is None."""
    def check(ctx) -> bool:
        if has_leaking_intermediate_variables(ctx):  # a float intermediate used outside the chain
            return False
        return problem(chain(ctx.matched_expr, ctx.matched_bindings), constant_array) is None

    entries = []
    for bias in (True, False):
        for clip in (True, False):
            dequantize = lambda data: is_op(DEQUANTIZE)(data, is_const(), is_const())
            weights = dequantize(is_const())
            root = is_op(CONV)(dequantize(wildcard()), weights | is_op("relax.reshape")(weights, wildcard()))
            if bias:
                root = is_op(ADD)(root, dequantize(is_const()))
            root = is_op(QUANTIZE)(root, is_const(), is_const())
            if clip:
                root = is_op(CLIP)(root, wildcard(), wildcard())  # its bounds: PrimValues
            name = f"{target}.conv2d_int8{'_bias' if bias else ''}{'_clip' if clip else ''}"
            entries.append(FusionPattern(name, root, {}, check))
    return entries


def is_chain(pattern_name: str) -> bool:
    """Whether a pattern (``<target>.<name>``) is one of ``chain_patterns``' (matched before folding)."""
    return pattern_name.split(".", 1)[-1].startswith("conv2d_int8")


def _op(expr) -> Optional[str]:
    return expr.op.name if isinstance(expr, relax.Call) and hasattr(expr.op, "name") else None


def chain(root, bindings) -> dict:
    """The calls of a match by role (conv, quantize, clip, bias, input, weights: the dequantizes;
    reshaped: whether the weights go through a reshape), from its root; ``bindings``: the match's
    variables' values (``PatternCheckContext.matched_bindings``, or ``get_var2val`` of a fused function)."""
    value = lambda expr: bindings.get(expr, expr) if isinstance(expr, relax.Var) else expr
    parts = {"clip": None, "bias": None}
    expr = value(root)
    if _op(expr) == CLIP:
        parts["clip"], expr = expr, value(expr.args[0])
    parts["quantize"], expr = expr, value(expr.args[0])
    if _op(expr) == ADD:
        parts["bias"], expr = value(expr.args[1]), value(expr.args[0])  # the bias's dequantize
    parts["conv"] = expr
    parts["input"] = value(expr.args[0])  # dequantize(x)
    weights = value(expr.args[1])
    parts["reshaped"] = _op(weights) == "relax.reshape"
    parts["weights"] = value(weights.args[0]) if parts["reshaped"] else weights  # dequantize(W)
    return parts


def fused_chain(func: relax.Function) -> dict:
    """``chain`` of a function ``FuseOpsByPattern`` made of a match."""
    return chain(func.body.body, relax.analysis.get_var2val(func))


def reader(constants) -> Callable:
    """A constant operand's array in a fused function: the call site's argument for a parameter
    (``constants``: the call's constant arguments by parameter, ``Match.constants``)."""
    return lambda expr: constants[expr] if expr in constants else constant_array(expr)


def channels(conv) -> int:
    return int(conv.ty.shape[3])


def is_depthwise(conv) -> bool:
    return int(conv.attrs.groups) > 1 and int(conv.attrs.groups) == int(conv.args[0].ty.shape[3]) == channels(conv)


def conv_geometry(conv) -> dict:
    """The integers of an NHWC conv (HWIO or HWOI weights): sizes, kernel, strides, top/left pads."""
    ints = lambda shape: [int(d) for d in shape]
    _, ih, iw, ic = ints(conv.args[0].ty.shape)
    _, oh, ow, oc = ints(conv.ty.shape)
    weight = dict(zip(conv.attrs.kernel_layout, ints(conv.args[1].ty.shape)))
    (stride_h, stride_w), (pad_top, pad_left) = ints(conv.attrs.strides), ints(conv.attrs.padding)[:2]
    return dict(oc=oc, ic=ic, ih=ih, iw=iw, oh=oh, ow=ow, kh=weight["H"], kw=weight["W"], stride_h=stride_h,
                stride_w=stride_w, pad_top=pad_top, pad_left=pad_left)


@dataclasses.dataclass
class Quantization:
    """What an integer kernel takes from a chain."""

    weights: np.ndarray  # int8, HWIO; a depthwise kernel as [kh][kw][channels]
    bias: Optional[np.ndarray]  # int32 per output channel
    input_zp: int
    weight_zp: int
    output_zp: int
    act_min: int  # the clamp: int8's range, narrowed by the clip
    act_max: int
    multipliers: np.ndarray  # (M, shift) per output channel (int64) for ``rounding``
    shifts: np.ndarray
    depthwise: bool
    rounding: int  # ROUNDING_TFLITE or ROUNDING_UPWARD (kit.quantization)


def quantization(parts: dict, value: Callable) -> Union[Quantization, str]:
    """The chain's ``Quantization``, or why an int8 kernel with TFLite's requantization cannot
    compute it (dtypes, per-tensor activations, weight scales per output channel, the bias at the
    input times weight scale, zero points and clamp inside int8)."""
    conv, quantize, clip = parts["conv"], parts["quantize"], parts["clip"]
    x, s_in, zp_in = parts["input"].args
    w, s_w, zp_w = parts["weights"].args
    if x.ty.dtype != "int8" or w.ty.dtype != "int8" or quantize.attrs.out_dtype != "int8":
        return f"dtypes {x.ty.dtype}/{w.ty.dtype}/{quantize.attrs.out_dtype} (needs int8 input, weights and output)"
    s_in, zp_in, s_out, zp_out = (value(e).reshape(-1) for e in (s_in, zp_in, *quantize.args[1:]))
    if max(s_in.size, zp_in.size, s_out.size, zp_out.size) > 1:
        return "per-channel activation scales (needs per-tensor)"
    depthwise, count = is_depthwise(conv), channels(conv)
    weights, s_w, zp_w = value(w), value(s_w).reshape(-1), value(zp_w).reshape(-1)
    per_channel_axis = int(parts["weights"].attrs.axis) % weights.ndim == weights.ndim - 1
    if (zp_w != zp_w[0]).any() or s_w.size not in (1, count) or (s_w.size > 1 and not per_channel_axis):
        return "weight scales not per output channel, or zero points that differ"
    if depthwise:
        g = conv_geometry(conv)
        weights = weights.reshape(g["kh"], g["kw"], count)  # [1][kh][kw][c] or HWOI with O = 1: same bytes
    elif parts["reshaped"]:
        return "reshaped dense weights"
    bias = None
    if parts["bias"] is not None:
        b, s_b, zp_b = (value(e) for e in parts["bias"].args)
        product = np.float32(s_in[0]) * np.broadcast_to(s_w.astype(np.float32), (count,))
        if b.dtype != "int32" or b.size != count or (zp_b != 0).any() or not np.allclose(s_b, product, rtol=1e-6):
            return "bias not int32 per output channel at the input times weight scale"
        bias = b.reshape(-1)
    s_w = np.broadcast_to(s_w, (count,))
    if _TFLITE_ROUNDING.get():  # TFLite's PopulateConvolutionQuantizationParams: double(s_in) * double(s_w) / double(s_out)
        rounding, ratios = ROUNDING_TFLITE, [float(s_in[0]) * float(s) / float(s_out[0]) for s in s_w]
    else:  # TVM's qnn.requantize: the float32 product of the scales over the output scale
        rounding = ROUNDING_UPWARD
        ratios = [float(np.float32(s_in[0]) * np.float32(s)) / float(np.float32(s_out[0])) for s in s_w]
    pairs = [quantize_multiplier(ratio) for ratio in ratios]
    multipliers, shifts = (np.array([p[i] for p in pairs], np.int64) for i in (0, 1))
    bounds = [float(getattr(b.value, "value", b.value)) for b in clip.args[1:]] if clip is not None else [None, None]
    act_min, act_max = activation_range(*bounds)
    zero_points = [int(zp_in[0]), int(zp_w[0]), int(zp_out[0])]
    if not all(-128 <= zp <= 127 for zp in zero_points) or not -128 <= act_min <= act_max <= 127:
        return f"zero points {zero_points} or clamp [{act_min}, {act_max}] outside int8"
    return Quantization(weights, bias, *zero_points, act_min, act_max, multipliers, shifts, depthwise, rounding)


def shift_problem(q: Quantization, low: int, high: int) -> Optional[str]:
    """Why a kernel taking shifts in [low, high] cannot requantize this chain, else None."""
    if (q.shifts < low).any() or (q.shifts > high).any():
        return f"requantize shift {q.shifts.min()}..{q.shifts.max()} outside the kernel's {low}..{high}"
    return None
