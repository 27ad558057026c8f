"""QVanilla for the Relax engine (apache-tvm 0.27: ``tvm-extension compile --target qvanilla``).

TVM's Relax TFLite frontend imports an int8 conv layer as float arithmetic between quantize ops,

    dequantize(x) -> conv2d(., dequantize(W)) -> [add(., dequantize(b))] -> quantize -> [clip]

(the clip: TFLite's fused ReLU or ReLU6).  Each such chain becomes one call of QVanilla's packed
entry with TFLite's rounding (``QVANILLA_ROUNDING_TFLITE``, multipliers from TFLite's
double-precision scale ratio), so an offloaded conv computes what TFLite's reference kernel does,
bit for bit.  The engine matches before it folds constants (``MATCH_BEFORE_FOLDING``): the
weights and bias are read as the model stores them, int8 and int32 with their scales, then packed
as for Relay (``packing``): the weights' constant becomes the packed weights and the weight
scales' the table of folded bias, multiplier and shift per output channel.

Offloaded: NHWC convs, dense (HWIO) or depthwise (HWOI, multiplier 1), batch 1, no dilation,
per-tensor input and output scales, per-channel or per-tensor weight scales, what the kernel's
checks accept.  This module imports nothing of Relay (the Relay backend: backend.py, patterns.py).
"""
from typing import Optional

import numpy as np
from tvm import relax, tirx
from tvm.relax.backend.utils import has_leaking_intermediate_variables
from tvm.relax.dpl import is_const, is_op, wildcard
from tvm.relax.transform import FusionPattern

from tvm_extension.kit import limits
from tvm_extension.kit.quantization import ROUNDING_TFLITE, activation_range, quantize_multiplier

from . import packing, scratch
from .codegen import KERNEL_DIR, gen_includes  # noqa: F401  (its C library, as for Relay)
from .target import ATTR_RANGES as TARGET_ATTR_RANGES, ATTRIBUTES as TARGET_ATTRS, NAME as TARGET  # noqa: F401

LIMITS = limits.c_limits(KERNEL_DIR / "qvanilla.h", "QVANILLA_")
MATCH_BEFORE_FOLDING = True  # the int8 weights and their scales, not the float weights folding makes
DEQUANTIZE, QUANTIZE, CONV, ADD, CLIP = "relax.dequantize", "relax.quantize", "relax.nn.conv2d", "relax.add", "relax.clip"


def patterns(attrs):
    """``qvanilla.conv2d_int8[_bias][_clip]``, largest first."""
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
            name = f"{TARGET}.conv2d_int8{'_bias' if bias else ''}{'_clip' if clip else ''}"
            entries.append(FusionPattern(name, root, {}, _check))
    return entries


def _op(expr) -> Optional[str]:
    return expr.op.name if isinstance(expr, relax.Call) and hasattr(expr.op, "name") else None


def _chain(root, bindings) -> dict:
    """The calls and operands of a match by role, from its root (``bindings``: the match's variables'
    values, ``PatternCheckContext.matched_bindings`` or the fused function's ``get_var2val``)."""
    value = lambda expr: bindings.get(expr, expr) if isinstance(expr, relax.Var) else expr
    chain = {"clip": None, "bias": None}
    expr = value(root)
    if _op(expr) == CLIP:
        chain["clip"], expr = expr, value(expr.args[0])
    chain["quantize"], expr = expr, value(expr.args[0])
    if _op(expr) == ADD:
        chain["bias"], expr = value(expr.args[1]), value(expr.args[0])  # the bias's dequantize
    chain["conv"] = expr
    chain["input"] = value(expr.args[0])  # dequantize(x)
    weights = value(expr.args[1])
    chain["reshaped"] = _op(weights) == "relax.reshape"
    chain["weights"] = value(weights.args[0]) if chain["reshaped"] else weights  # dequantize(W)
    return chain


def _channels(conv) -> int:
    return int(conv.ty.shape[3])


def is_depthwise(conv) -> bool:
    return int(conv.attrs.groups) > 1 and int(conv.attrs.groups) == int(conv.args[0].ty.shape[3]) == _channels(conv)


def conv_geometry(conv) -> dict:
    """The integers of an NHWC conv (HWIO or HWOI weights): sizes, kernel, strides, top/left pads."""
    ints = lambda shape: [int(d) for d in shape]
    _, ih, iw, ic = ints(conv.args[0].ty.shape)
    _, oh, ow, oc = ints(conv.ty.shape)
    weight = dict(zip(conv.attrs.kernel_layout, ints(conv.args[1].ty.shape)))
    (stride_h, stride_w), (pad_top, pad_left) = ints(conv.attrs.strides), ints(conv.attrs.padding)[:2]
    return dict(oc=oc, ic=ic, ih=ih, iw=iw, oh=oh, ow=ow, kh=weight["H"], kw=weight["W"], stride_h=stride_h,
                stride_w=stride_w, pad_top=pad_top, pad_left=pad_left)


def why_not_offloaded(conv, attrs) -> Optional[str]:
    """Why QVanilla does not compute this ``relax.nn.conv2d`` (the conv alone: its layout, shape,
    groups), else None; a conv it could compute stays when the chain around it does not fit."""
    a, data = conv.attrs, conv.args[0].ty
    if data.shape is None or any(not hasattr(d, "value") for d in [*data.shape, *conv.args[1].ty.shape]):
        return "dynamic shape"
    depthwise = is_depthwise(conv)
    layout = ("NHWC", "HWOI" if depthwise else "HWIO", "NHWC")
    if (a.data_layout, a.kernel_layout, a.out_layout) != layout:
        return f"layout {a.data_layout}/{a.kernel_layout} (needs {layout[0]}/{layout[1]})"
    if int(a.groups) != 1 and not depthwise:
        return f"groups {int(a.groups)} (needs 1, or depthwise with multiplier 1)"
    if [int(d) for d in a.dilation] != [1, 1]:
        return "dilation {}x{}".format(*[int(d) for d in a.dilation])
    if int(data.shape[0]) != 1:
        return f"batch {int(data.shape[0])} (needs 1)"
    return limits.geometry_problem(conv_geometry(conv), depthwise=depthwise, element_bytes=1, weight_bytes=2,
                                   weight_slack=1 << 20) or "not an int8 dequantize -> conv2d -> quantize chain"


def _quantization(chain, value):
    """(scalars, (weights, weight_zp, input_zp, bias), channel multipliers and shifts) of a chain,
    or a string: why QVanilla does not compute it.  ``value(expr)``: a constant operand's array."""
    conv, quantize, clip = chain["conv"], chain["quantize"], chain["clip"]
    problem = why_not_offloaded(conv, None)
    if problem and not problem.startswith("not an int8"):
        return problem
    x, s_in, zp_in = chain["input"].args
    w, s_w, zp_w = chain["weights"].args
    if x.ty.dtype != "int8" or w.ty.dtype != "int8" or quantize.attrs.out_dtype != "int8":
        return f"dtypes {x.ty.dtype}/{w.ty.dtype}/{quantize.attrs.out_dtype} (needs int8 input, weights and output)"
    s_in, zp_in, s_out, zp_out = (value(e).reshape(-1) for e in (s_in, zp_in, *quantize.args[1:]))
    if max(s_in.size, zp_in.size, s_out.size, zp_out.size) > 1:
        return "per-channel activation scales (needs per-tensor)"
    depthwise, channels = is_depthwise(conv), _channels(conv)
    g = conv_geometry(conv)
    weights, s_w, zp_w = value(w), value(s_w).reshape(-1), value(zp_w).reshape(-1)
    per_channel_axis = int(chain["weights"].attrs.axis) % weights.ndim == weights.ndim - 1
    if (zp_w != zp_w[0]).any() or s_w.size not in (1, channels) or (s_w.size > 1 and not per_channel_axis):
        return "weight scales not per output channel, or zero points that differ"
    if depthwise:
        weights = weights.reshape(g["kh"], g["kw"], channels)  # [1][kh][kw][c] or HWOI with O = 1: same bytes
    elif chain["reshaped"]:
        return "reshaped dense weights"
    bias = None
    if chain["bias"] is not None:
        b, s_b, zp_b = (value(e) for e in chain["bias"].args)
        product = np.float32(s_in[0]) * np.broadcast_to(s_w.astype(np.float32), (channels,))
        if b.dtype != "int32" or b.size != channels or (zp_b != 0).any() or not np.allclose(s_b, product, rtol=1e-6):
            return "bias not int32 per output channel at the input times weight scale"
        bias = b.reshape(-1)
    # TFLite's PopulateConvolutionQuantizationParams: double(s_in) * double(s_w) / double(s_out)
    pairs = [quantize_multiplier(float(s_in[0]) * float(s) / float(s_out[0])) for s in np.broadcast_to(s_w, (channels,))]
    multipliers, shifts = (np.array([p[i] for p in pairs], np.int64) for i in (0, 1))
    if not (LIMITS["SHIFT_MIN"] <= shifts).all() or not (shifts <= LIMITS["SHIFT_MAX"]).all():
        return f"requantize shift {shifts.min()}..{shifts.max()} outside the kernel's {LIMITS['SHIFT_MIN']}..{LIMITS['SHIFT_MAX']}"
    bounds = [float(getattr(b.value, "value", b.value)) for b in clip.args[1:]] if clip is not None else [None, None]
    act_min, act_max = activation_range(*bounds)
    zero_points = [int(zp_in[0]), int(zp_w[0]), int(zp_out[0])]
    if not all(-128 <= zp <= 127 for zp in zero_points) or not -128 <= act_min <= act_max <= 127:
        return f"zero points {zero_points} or clamp [{act_min}, {act_max}] outside int8"
    scalars = dict(g, depthwise=depthwise, input_zp=zero_points[0], output_zp=zero_points[2], act_min=act_min,
                   act_max=act_max)
    return scalars, (weights, zero_points[1], zero_points[0], bias), (multipliers, shifts)


def _check(ctx) -> bool:
    if has_leaking_intermediate_variables(ctx):  # a float intermediate used outside the chain
        return False
    constant = lambda expr: expr.value.numpy()
    return not isinstance(_quantization(_chain(ctx.matched_expr, ctx.matched_bindings), constant), str)


def _fused_chain(func):
    return _chain(func.body.body, relax.analysis.get_var2val(func))


def _reader(constants):
    """A constant operand's array in a fused function: the call site's argument for a parameter."""
    return lambda expr: constants[expr] if expr in constants else expr.value.numpy()


def pack_constants(func, constants) -> dict:
    """At each call site (``constants``: its constant arguments by parameter), the weights become
    the packed int16 weights and the weight scales the int32 table [folded bias, multiplier, shift]
    of each output channel (qvanilla.h)."""
    chain = _fused_chain(func)
    scalars, (weights, weight_zp, input_zp, bias), (multipliers, shifts) = _quantization(chain, _reader(constants))
    pack = packing.pack_depthwise if scalars["depthwise"] else packing.pack_conv
    packed, folded = pack(weights, weight_zp, input_zp, bias)
    table = np.stack([folded, multipliers, shifts]).astype(np.int32)
    w, s_w, _ = chain["weights"].args
    return {w: lambda _: packed, s_w: lambda _: table}


def kernel_call(match, attrs):
    """``qvanilla_conv2d_nhwc_packed_s8`` or the depthwise entry (through their linked symbols,
    c/qvanilla_linked.c) on the match's buffers, with TFLite's rounding: (its status, the scratch
    buffer to allocate for it, of the size its _get_buffer_size gives, mirrored by scratch.py)."""
    chain = _fused_chain(match.func)
    q = _quantization(chain, _reader(match.constants))[0]
    kind = "depthwise_conv2d_packed_s8" if q["depthwise"] else "conv2d_packed_s8"
    nbytes = scratch.buffer_size(kind, q["kh"], q["kw"], q["ic"], q["oc"])
    work = tirx.decl_buffer((max(nbytes, 1),), "int8", "qvanilla_scratch")
    sizes = ("ih", "iw", "oc", "oh", "ow") if q["depthwise"] else ("ih", "iw", "ic", "oh", "ow", "oc")
    scalars = [q[n] for n in (*sizes, "kh", "kw", "stride_h", "stride_w", "pad_top", "pad_left", "input_zp",
                              "output_zp", "act_min", "act_max")] + [ROUNDING_TFLITE]
    x, (w, s_w, _) = chain["input"].args[0], chain["weights"].args
    status = tirx.call_extern(
        "int32", f"qvanilla_{'depthwise_' if q['depthwise'] else ''}conv2d_nhwc_packed_s8_linked",
        match.buffer(x).data, match.buffer(w).data, match.buffer(s_w).data, match.result.data, work.data,
        tirx.IntImm("int32", nbytes), *(tirx.IntImm("int32", int(v)) for v in scalars))
    return status, [work]


def register():
    """The ``tvm.backends`` entry point (pyproject.toml): apache-tvm calls it at ``import tvm``, so
    an installed QVanilla needs no option (``tvm_extension.relax.backends.register``)."""
    import sys  # pylint: disable=import-outside-toplevel

    from tvm_extension.relax.backends import register as register_backend  # pylint: disable=import-outside-toplevel

    register_backend(sys.modules[__name__])
