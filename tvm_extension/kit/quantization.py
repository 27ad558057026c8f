"""The requantization of a quantized conv chain, as the integers an int8 kernel takes.

The requantization of an int32 accumulator ``acc`` to the output scale is

    out = clamp(output_zp + round(acc * M * 2^(shift - 31)), act_min, act_max)

with one (M, shift) per output channel, computed at compile time; ReLU and ReLU6 arrive as a
clip on the int8 output (``activation_range``), ONNX QDQ's ReLU as ``maximum(acc, c)`` before
requantizing (``qconv_patterns.lower_clamps``).  The input zero point's contribution is folded
into the bias (``fold_bias``), as TFLite Micro and CMSIS-NN do.

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
import math
from typing import Optional, Tuple

import numpy as np

from tvm_extension.tflite_exact.fixed_point import (
    multiply_by_quantized_multiplier_int, quantize_multiplier, tflite_multipliers,
)

ROUNDING_UPWARD, ROUNDING_TFLITE = 0, 1  # the codes kernels take


def rounding_code(requant) -> int:
    from tvm_extension.tflite_exact.rewrite import TFLITE  # pylint: disable=import-outside-toplevel  (Relay)

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


def requantize(acc: int, multiplier: int, shift: int) -> int:
    """TVM's fixed-point multiply of one int32 value (ties towards +infinity), in Python integers."""
    return requantize_int(acc, multiplier, shift, ROUNDING_UPWARD)


def fixed_point_multiplier(ratio: float) -> Tuple[int, int]:
    """(multiplier, shift) with ratio == multiplier * 2^(shift - 31), multiplier < 2^31: frexp, then
    the significand rounded half away from zero to 31 bits (one rounding up to 2^31 is halved and
    the shift raised by one), as TVM's qnn.requantize computes it."""
    if ratio == 0.0:
        return 0, 0
    significand, exponent = math.frexp(ratio)
    rounded = math.floor(abs(significand) * (1 << 31) + 0.5) * (1 if significand > 0 else -1)
    if abs(rounded) == 1 << 31:
        rounded //= 2
        exponent += 1
    return int(rounded), int(exponent)


def channel_params(bias, requant_input_scale, output_scale, channels: int) -> np.ndarray:
    """int32 rows [bias, multiplier, shift], one entry per output channel, of TVM's rounding
    (the requant input scale is input_scale * weight_scale[o] as the frontend folded it, float32)."""
    bias = np.zeros(channels, np.int64) if bias is None else np.asarray(bias, np.int64).reshape(-1)
    scales = np.broadcast_to(np.asarray(requant_input_scale, np.float32).reshape(-1), (channels,))
    out_scale = float(np.asarray(output_scale, np.float32).reshape(-1)[0])
    pairs = [fixed_point_multiplier(float(s) / out_scale) for s in scales]
    return np.stack([bias, [m for m, _ in pairs], [s for _, s in pairs]]).astype(np.int32)


def chain_channel_params(parts, bias, channels: int) -> np.ndarray:
    """``channel_params`` of a matched chain ({op name: call}, ``qconv_patterns.split_chain``),
    with the multipliers of the rounding its requantize asks for."""
    multipliers, shifts = channel_multipliers(parts["qnn.conv2d"], parts["qnn.requantize"], channels)
    bias = np.zeros(channels, np.int64) if bias is None else np.asarray(bias, np.int64).reshape(-1)
    return np.stack([bias, multipliers, shifts]).astype(np.int32)


def activation_range(clip_min=None, clip_max=None, dtype="int8") -> Tuple[int, int]:
    """The (act_min, act_max) of a clip on the quantized output (the whole type without one)."""
    info = np.iinfo(dtype)
    low = info.min if clip_min is None else max(info.min, int(math.ceil(clip_min)))
    high = info.max if clip_max is None else min(info.max, int(math.floor(clip_max)))
    return low, high


def wrap_int32(values) -> np.ndarray:
    """``values`` modulo 2^32 as int32, as a kernel's 32-bit adders wrap."""
    return ((np.asarray(values, np.int64) + 2**31) % 2**32 - 2**31).astype(np.int32)


def fold_bias(bias: Optional[np.ndarray], weight_sums: np.ndarray, input_zp: int) -> np.ndarray:
    """``bias - input_zp * weight_sums`` as int32, wrapped: the input zero point's contribution
    folded into the bias, so a kernel multiplies the raw input (``weight_sums``: per output
    channel, the sum of its weights minus their zero point)."""
    bias = np.zeros(weight_sums.shape, np.int64) if bias is None else np.asarray(bias, np.int64).reshape(-1)
    return wrap_int32(bias - int(input_zp) * np.asarray(weight_sums, np.int64))
