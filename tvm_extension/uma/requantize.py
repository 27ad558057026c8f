"""The requantization of a quantized conv chain, as the integers an int8 kernel takes.

A chain ``qnn.conv2d -> bias -> qnn.requantize`` asks for one of two roundings of
``acc * M * 2^(shift - 31)`` per output channel:

* TVM's (``rounding`` "UPWARD", or unset): one rounding, ties towards +infinity, with the
  ratio ``float32(requant input scale) / output scale`` (what TVM's own CPU build computes);
* TFLite's (``rounding="TFLITE"``, set by ``tvmc --tflite-exact``): MultiplyByQuantizedMultiplier,
  SaturatingRoundingDoublingHighMul then RoundingDivideByPOT (ties away from zero), with the
  ratio ``double(s_in) * double(s_w) / double(s_out)`` of the conv's own scales (the requantize
  holds only their float32 product).

Both give (M, shift) from ``quantize_multiplier``; only the ratio and the run-time rounding
differ.  A backend whose kernel computes both sets ``computes_tflite_rounding = True`` and passes
``rounding_code`` to it; any other backend never sees a TFLite-rounded chain.
"""
import numpy as np

from tvm_extension.tflite_exact.fixed_point import (
    multiply_by_quantized_multiplier_int, quantize_multiplier, tflite_multipliers,
)
from tvm_extension.tflite_exact.rewrite import TFLITE

ROUNDING_UPWARD, ROUNDING_TFLITE = 0, 1  # the codes kernels take


def rounding_code(requant) -> int:
    return ROUNDING_TFLITE if str(requant.attrs.rounding) == TFLITE else ROUNDING_UPWARD


def channel_multipliers(conv, requant, channels: int):
    """(M, shift): int64 arrays of ``channels`` entries for the chain's rounding."""
    output_scale = float(np.asarray(requant.args[3].data.numpy(), np.float32).reshape(-1)[0])
    if rounding_code(requant) == ROUNDING_TFLITE:
        pairs = tflite_multipliers(conv, output_scale)
    else:
        scales = np.asarray(requant.args[1].data.numpy(), np.float32).reshape(-1)
        found = [quantize_multiplier(float(s) / output_scale) for s in scales]
        pairs = tuple(np.array([p[i] for p in found], np.int64) for i in (0, 1))
    return tuple(np.broadcast_to(a, (channels,)).astype(np.int64) for a in pairs)


def requantize_int(acc: int, multiplier: int, shift: int, rounding: int) -> int:
    """A kernel's fixed-point multiply of one int32 value in Python integers (a test reference)."""
    if rounding == ROUNDING_TFLITE:
        return multiply_by_quantized_multiplier_int(acc, multiplier, shift)
    left, right = max(shift, 0), 31 - min(shift, 0)
    value = ((acc << left) * multiplier + (1 << (right - 1))) >> right
    return max(-(1 << 31), min((1 << 31) - 1, value))
