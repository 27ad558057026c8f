"""Turning a graph's scales and zero points into the kernel's integer parameters.

The requantization of an int32 accumulator ``acc`` to the output scale is

    out = clamp(output_zp + round_up(acc * M * 2^(shift - 31)), act_min, act_max)

with one (M, shift) per output channel, computed at compile time from
``requant_input_scale[o] / output_scale`` (the requant input scale is input_scale *
weight_scale[o] as the frontend folded it, float32) exactly as TVM's qnn.requantize does:
``M * 2^(shift - 31)`` is that ratio with ``M`` the 31-bit rounded significand (frexp, then
round half away from zero; a significand rounding up to 2^31 is halved and shift raised by one).
``round_up`` adds 2^(30 - min(shift, 0)) before the arithmetic right shift, i.e. ties round
towards +infinity, in 64-bit arithmetic.  ReLU and ReLU6 arrive as a clip on the int8 output,
which becomes ``act_min``/``act_max``.  ONNX QDQ models, once TVM's FakeQuantizationToInteger
has made them integer, carry ReLU as ``maximum(acc, c)`` before requantizing; requantizing is
monotonic, so that too is a lower clamp: ``act_min = requant(c) + output_zp``.

A requantize marked ``rounding="TFLITE"`` (``tvmc --tflite-exact``) asks for TFLite's
MultiplyByQuantizedMultiplier instead: two roundings (SaturatingRoundingDoublingHighMul, then
RoundingDivideByPOT, ties away from zero), with (multiplier, shift) from the conv's scales in
double precision; the kernel is told which (``QVANILLA_ROUNDING_TFLITE``).
"""
import math
from typing import Tuple

import numpy as np

from tvm_extension.uma.requantize import ROUNDING_UPWARD, channel_multipliers, requantize_int


def fixed_point_multiplier(ratio: float) -> Tuple[int, int]:
    """(multiplier, shift) with ratio == multiplier * 2^(shift - 31), multiplier < 2^31."""
    if ratio == 0.0:
        return 0, 0
    significand, exponent = math.frexp(ratio)
    rounded = math.floor(abs(significand) * (1 << 31) + 0.5) * (1 if significand > 0 else -1)
    if abs(rounded) == 1 << 31:
        rounded //= 2
        exponent += 1
    return int(rounded), int(exponent)


def requantize(acc: int, multiplier: int, shift: int) -> int:
    """The kernel's (and TVM's) fixed-point multiply of one int32 value, in Python integers."""
    return requantize_int(acc, multiplier, shift, ROUNDING_UPWARD)


def channel_params(bias, requant_input_scale, output_scale, channels: int) -> np.ndarray:
    """The kernel's int32 rows [bias, multiplier, shift], one entry per output channel."""
    bias = np.zeros(channels, np.int64) if bias is None else np.asarray(bias, np.int64).reshape(-1)
    scales = np.broadcast_to(np.asarray(requant_input_scale, np.float32).reshape(-1), (channels,))
    out_scale = float(np.asarray(output_scale, np.float32).reshape(-1)[0])
    pairs = [fixed_point_multiplier(float(s) / out_scale) for s in scales]
    return np.stack([bias, [m for m, _ in pairs], [s for _, s in pairs]]).astype(np.int32)


def chain_channel_params(parts, bias, channels: int) -> np.ndarray:
    """``channel_params`` of a matched chain ({op name: call}, ``patterns.split_chain``), with
    the multipliers of the rounding its requantize asks for (``tvm_extension.uma.requantize``)."""
    multipliers, shifts = channel_multipliers(parts["qnn.conv2d"], parts["qnn.requantize"], channels)
    bias = np.zeros(channels, np.int64) if bias is None else np.asarray(bias, np.int64).reshape(-1)
    return np.stack([bias, multipliers, shifts]).astype(np.int32)


def activation_range(clip_min=None, clip_max=None, dtype="int8") -> Tuple[int, int]:
    info = np.iinfo(dtype)
    low = info.min if clip_min is None else max(info.min, int(math.ceil(clip_min)))
    high = info.max if clip_max is None else min(info.max, int(math.floor(clip_max)))
    return low, high
