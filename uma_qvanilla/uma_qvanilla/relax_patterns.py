"""QVanilla for the Relax engine (apache-tvm 0.27: ``tvm-extension compile --target qvanilla``).

TVM's Relax TFLite frontend imports an int8 conv layer as float arithmetic between quantize ops;
``tvm_extension.relax.qconv`` matches that chain and reads its quantization.  Each chain becomes
one call of QVanilla's packed entry in the model's rounding: under --tflite-exact TFLite's
(``QVANILLA_ROUNDING_TFLITE``, multipliers from TFLite's double-precision scale ratio), so an
offloaded conv computes what TFLite's reference kernel does, bit for bit; otherwise, and for an ONNX
QDQ conv (``tvm_extension.relax.qdq_layout``), TVM's, as on the Relay engine.  The engine matches before it folds constants (``MATCH_BEFORE_FOLDING``): the
weights and bias are read as the model stores them, int8 and int32 with their scales, then packed
as for Relay (``packing``): the weights' constant becomes the packed weights and the weight
scales' the table of folded bias, multiplier and shift per output channel.

Offloaded: NHWC convs, dense (HWIO) or depthwise (HWOI, multiplier 1), batch 1, no dilation,
per-tensor input and output scales, per-channel or per-tensor weight scales, what the kernel's
checks accept.  This module imports nothing of Relay (the Relay backend: backend.py, patterns.py).
"""
from typing import Optional

import numpy as np

from tvm_extension.kit import limits
from tvm_extension.relax import qconv, tvm_internals as tir
from tvm_extension.relax.qconv import conv_geometry, is_depthwise

from . import packing, scratch, target
from .codegen import KERNEL_DIR, gen_includes  # noqa: F401  (its C library, as for Relay)
from .target import ATTR_RANGES as TARGET_ATTR_RANGES, ATTRIBUTES as TARGET_ATTRS, NAME as TARGET  # noqa: F401

LIMITS = limits.c_limits(KERNEL_DIR / "qvanilla.h", "QVANILLA_")
MATCH_BEFORE_FOLDING = True  # the int8 weights and their scales, not the float weights folding makes
COMPUTES_TFLITE_ROUNDING = True  # its kernel takes the rounding: --tflite-exact keeps its chains offloaded


def patterns(attrs):
    """``qvanilla.conv2d_int8[_bias][_clip]``, largest first."""
    return qconv.chain_patterns(TARGET, _problem)


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
    """The chain's ``qconv.Quantization``, or why QVanilla does not compute it."""
    problem = why_not_offloaded(chain["conv"], None)
    if problem and not problem.startswith("not an int8"):
        return problem
    q = qconv.quantization(chain, value)
    if isinstance(q, str):
        return q
    return qconv.shift_problem(q, LIMITS["SHIFT_MIN"], LIMITS["SHIFT_MAX"]) or q


def _problem(chain, value) -> Optional[str]:
    q = _quantization(chain, value)
    return q if isinstance(q, str) else None


def _int8_weights(q, attrs) -> bool:
    """Whether the chain calls the packed8 entry: a dense conv, the target asks (``int8_weights``),
    and its weights fit int8."""
    return not q.depthwise and target.int8_weights(attrs) and packing.fits_int8(q.weights, q.weight_zp)


def _packed(q, attrs):
    """The chain's packed weights (int8 for the packed8 entry, else int16) and folded bias."""
    if _int8_weights(q, attrs):
        return packing.pack_conv8(q.weights, q.weight_zp, q.input_zp, q.bias)
    pack = packing.pack_depthwise if q.depthwise else packing.pack_conv
    return pack(q.weights, q.weight_zp, q.input_zp, q.bias)


def pack_constants(func, constants, attrs) -> dict:
    """At each call site (``constants``: its constant arguments by parameter), the weights become
    the packed weights (``_packed``) and the weight scales the int32 table [folded bias, multiplier,
    shift] of each output channel (qvanilla.h)."""
    chain = qconv.fused_chain(func)
    q = _quantization(chain, qconv.reader(constants))
    packed, folded = _packed(q, attrs)
    table = np.stack([folded, q.multipliers, q.shifts]).astype(np.int32)
    w, s_w, _ = chain["weights"].args
    return {w: lambda _: packed, s_w: lambda _: table}


def kernel_call(match, attrs):
    """``qvanilla_conv2d_nhwc_packed_s8`` (``_packed8_s8``) or the depthwise entry (through their
    linked symbols, c/qvanilla_linked.c) on the match's buffers, with the chain's rounding: (its status, the scratch
    buffer to allocate for it, of the size its _get_buffer_size gives, mirrored by scratch.py)."""
    chain = qconv.fused_chain(match.func)
    q = _quantization(chain, qconv.reader(match.constants))
    g = conv_geometry(chain["conv"])
    kind = scratch.packed_kind(q.depthwise, _int8_weights(q, attrs))
    nbytes = scratch.buffer_size(kind, g["kh"], g["kw"], g["ic"], g["oc"], target.scratch_budget(attrs))
    work = tir.scratch(nbytes, "qvanilla_scratch")
    sizes = ("ih", "iw", "oc", "oh", "ow") if q.depthwise else ("ih", "iw", "ic", "oh", "ow", "oc")
    scalars = [g[n] for n in (*sizes, "kh", "kw", "stride_h", "stride_w", "pad_top", "pad_left")]
    scalars += [q.input_zp, q.output_zp, q.act_min, q.act_max, q.rounding]
    x, (w, s_w, _) = chain["input"].args[0], chain["weights"].args
    status = tir.c_call(f"qvanilla_{kind.replace('conv2d_', 'conv2d_nhwc_')}_linked", match.pointer(x),
                        match.pointer(w), match.pointer(s_w), match.result, work, nbytes, *(int(v) for v in scalars))
    return status, [work]


def register():
    """The ``tvm.backends`` entry point (pyproject.toml): apache-tvm calls it at ``import tvm``, so
    an installed QVanilla needs no option (``tvm_extension.relax.backends.register``)."""
    import sys  # pylint: disable=import-outside-toplevel

    from tvm_extension.relax.backends import register as register_backend  # pylint: disable=import-outside-toplevel

    register_backend(sys.modules[__name__])
