"""TFLite's integer arithmetic (tensorflow/lite/kernels/internal/common.h, gemmlowp), as Relay
(or Relax: ``graph``).

TFLite requantizes an int32 accumulator in two roundings:

    MultiplyByQuantizedMultiplier(x, M, shift)
      = RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(x * 2^max(shift, 0), M), max(-shift, 0))

with ``M * 2^(shift - 31)`` the real multiplier, its significand rounded half away from zero
(``QuantizeMultiplier``, from a double).  TVM's qnn.requantize rounds once; these builders
compute TFLite's result exactly, in int64 Relay arithmetic (Relay's integer ``divide``
truncates toward zero and ``right_shift`` is arithmetic, as in C).
"""
from __future__ import annotations  # relay.Constant below: the Relax stand-in has none

import math
from typing import Tuple

import numpy as np

from .graph import relay  # Relay, or on apache-tvm the same functions over Relax

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


def quantize_multiplier(real: float) -> Tuple[int, int]:
    """TFLite's QuantizeMultiplier: (M, shift) with real == M * 2^(shift - 31), M in [2^30, 2^31)."""
    if real == 0.0:
        return 0, 0
    significand, shift = math.frexp(real)
    q = int(math.floor(abs(significand) * (1 << 31) + 0.5)) * (1 if significand > 0 else -1)  # std::round
    if abs(q) == 1 << 31:
        q //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    return q, shift


# -- on Python integers (int32 raw values): compile-time tables, and the references of tests -----
def wrap(x: int) -> int:
    return (x + (1 << 31)) % (1 << 32) - (1 << 31)


def srdhm(a: int, b: int) -> int:
    """gemmlowp's SaturatingRoundingDoublingHighMul."""
    if a == b == INT32_MIN:
        return INT32_MAX
    ab = a * b
    nudge = (1 << 30) if ab >= 0 else 1 - (1 << 30)
    return _truncating_divide(ab + nudge, 1 << 31)


def _truncating_divide(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def rdbpot(x: int, exponent: int) -> int:
    """gemmlowp's RoundingDivideByPOT: x / 2^exponent, ties away from zero."""
    mask = (1 << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> exponent) + (1 if remainder > threshold else 0)


def multiply_by_quantized_multiplier_int(x: int, multiplier: int, shift: int) -> int:
    """TFLite's MultiplyByQuantizedMultiplier of one int32 value (its int32 left shift wraps)."""
    left, right = max(shift, 0), max(-shift, 0)
    return rdbpot(srdhm(wrap(x << left), multiplier), right)


def tflite_multipliers(source, output_scale: float):
    """(M, shift) int64 arrays, one entry per weight scale, of the requantization after TFLite's
    CONV_2D / DEPTHWISE_CONV_2D (``source`` its qnn.conv2d: ``double(s_in) * double(s_w) /
    double(s_out)``) or FULLY_CONNECTED (its qnn.dense: the scale product in float32 first)."""
    input_scale = float(np.asarray(source.args[4].data.numpy()).reshape(-1)[0])
    weight_scales = np.asarray(source.args[5].data.numpy(), np.float32).reshape(-1)
    if source.op.name == "qnn.dense":
        reals = [float(np.float32(input_scale) * s) / float(output_scale) for s in weight_scales]
    else:
        reals = [input_scale * float(s) / float(output_scale) for s in weight_scales]
    pairs = [quantize_multiplier(r) for r in reals]
    return tuple(np.array([p[i] for p in pairs], np.int64) for i in (0, 1))


# -- as int64 Relay ----------------------------------------------------------------------------
def i64(values) -> relay.Constant:
    return relay.const(np.asarray(values, np.int64), "int64")  # relay.const alone narrows int64 to int32


def materialized(expr):
    """A fusion barrier: the value is computed once into a buffer.  These expressions use each
    intermediate value several times; fused, TVM inlines them into a tree that doubles at every
    step (its simplifier then runs for many minutes on a network's worth of them)."""
    return relay.annotation.stop_fusion(expr)


def saturating_rounding_doubling_high_mul(a, b, barriers=True):
    """(a * b + nudge) / 2^31 truncated, nudge = 2^30 or 1 - 2^30 by the product's sign; a, b int64
    expressions of int32 values (TFLite's saturation case, a == b == INT32_MIN, needs M = -2^31,
    which QuantizeMultiplier never gives)."""
    product = relay.multiply(a, b)
    product = materialized(product) if barriers else product
    nudge = relay.where(relay.greater_equal(product, i64(0)), i64(1 << 30), i64(1 - (1 << 30)))
    result = relay.divide(relay.add(product, nudge), i64(1 << 31))
    return materialized(result) if barriers else result


def rounding_divide_by_pot(x, exponent, barriers=True):
    """x / 2^exponent rounded half away from zero (gemmlowp); ``exponent`` (>= 0) an array
    broadcast over x, or an int64 expression (a per-row exponent)."""
    exponent = exponent if isinstance(exponent, relay.Expr) else i64(exponent)
    mask = relay.subtract(relay.left_shift(i64(1), exponent), i64(1))
    remainder = relay.bitwise_and(x, mask)
    threshold = relay.add(relay.right_shift(mask, i64(1)), relay.cast(relay.less(x, i64(0)), "int64"))
    shifted = relay.right_shift(x, exponent)
    result = relay.add(shifted, relay.cast(relay.greater(remainder, threshold), "int64"))
    return materialized(result) if barriers else result


def multiply_by_quantized_multiplier(x, multipliers: np.ndarray, shifts: np.ndarray):
    """TFLite's MultiplyByQuantizedMultiplier on an int64 expression of int32 values, per element
    of the broadcastable ``multipliers``/``shifts`` arrays."""
    left = np.maximum(shifts, 0).astype(np.int64)
    right = np.maximum(-shifts, 0).astype(np.int64)
    if left.any():
        x = relay.multiply(x, i64(np.int64(1) << left))  # TFLite: x * (1 << left_shift), in int32
        x = wrap_int32(x)
    # One barrier, at the high product (read three times by the division): measured on KWS on/off,
    # CPU, against one after every step: compile time the same (60 s), run 2.61 vs 2.82 ms;
    # without it, run 2.27 ms but compile 94 s (its callers put one after each operator).
    high = materialized(saturating_rounding_doubling_high_mul(x, i64(multipliers), barriers=False))
    return rounding_divide_by_pot(high, right, barriers=False)


def wrap_int32(x):
    """An int64 expression taken modulo 2^32 into int32's range, as int32 arithmetic wraps."""
    return relay.cast(relay.cast(x, "int32"), "int64")


def requantize(x, multipliers, shifts, zero_point: int, dtype: str):
    """An int64 expression of int32 values -> MultiplyByQuantizedMultiplier, + zero point,
    clamped to ``dtype``'s range and cast to it (the output stage of TFLite's integer kernels)."""
    info = np.iinfo(dtype)
    out = relay.add(multiply_by_quantized_multiplier(x, multipliers, shifts), relay.const(int(zero_point), "int64"))
    return relay.cast(relay.clip(out, int(info.min), int(info.max)), dtype)


# -- TVM's own QNN arithmetic (qnn.requantize, rounding UPWARD), which the Relay engine computes --
def tvm_fixed_point_multiply(x, multipliers: np.ndarray, shifts: np.ndarray):
    """TVM's fixed-point multiply (``q_multiply_shift``, ``FixedPointMultiplyPerChannel``) of an int64
    expression of int32 values: ``((x << left) * M + 2^(right - 1)) >> right``, ``right = 31 +
    max(-shift, 0)``, one rounding with ties towards +infinity; then cast to int32 as TVM casts."""
    shifts = np.asarray(shifts, np.int64)
    left, right = np.maximum(shifts, 0), 31 + np.maximum(-shifts, 0)
    if left.any():
        x = relay.left_shift(x, i64(left))
    rounded = relay.add(relay.multiply(x, i64(multipliers)), i64(np.int64(1) << (right - 1)))
    return wrap_int32(relay.right_shift(rounded, i64(right)))


def tvm_requantize(x, multipliers, shifts, zero_point: int, dtype: str):
    """TVM's qnn.requantize (rounding UPWARD) of an int64 expression of int32 values whose input
    zero point is already taken off: + the output zero point, clamped to ``dtype`` and cast."""
    info = np.iinfo(dtype)
    out = relay.add(tvm_fixed_point_multiply(x, multipliers, shifts), relay.const(int(zero_point), "int64"))
    return relay.cast(relay.clip(out, int(info.min), int(info.max)), dtype)
