"""TFLite's int8 MUL (reference_integer_ops::Mul / BroadcastMul4DSlow), ADD and QUANTIZE, exactly.

Per output element: ``(in1 - zp1) * (in2 - zp2)`` (int32, at most 2^16 in magnitude), then
MultiplyByQuantizedMultiplier with the multiplier of ``s1 * s2 / s_out``, ``+ zp_out``, clamped
to the fused activation's range.  ``Prepare`` assigns that real multiplier to a double, but the
scales are floats and the expression is evaluated in float32: rounded twice in single precision
(a double product gives another multiplier, which changes some results).  TVM imports a fused
activation as a clip after the qnn.mul; the clamp here is to int8's range.
"""
import numpy as np

from .graph import relay
from .fixed_point import (materialized, multiply_by_quantized_multiplier, quantize_multiplier, requantize,
                          tvm_fixed_point_multiply)


def mul_multiplier(scale1: float, scale2: float, output_scale: float):
    """TFLite's (M, shift) of a quantized MUL."""
    f = np.float32
    return quantize_multiplier(float(f(f(scale1) * f(scale2)) / f(output_scale)))


def exact_mul(lhs, rhs, scales, zero_points, dtype: str):
    """``lhs``/``rhs`` integer expressions (broadcasting as in TFLite), ``scales`` and
    ``zero_points`` (lhs, rhs, output) -> TFLite's quantized product in ``dtype``."""
    multiplier, shift = mul_multiplier(*scales)

    def offset(x, zero_point):
        return relay.subtract(relay.cast(x, "int64"), relay.const(int(zero_point), "int64"))

    product = relay.multiply(offset(lhs, zero_points[0]), offset(rhs, zero_points[1]))
    return requantize(product, np.int64(multiplier), np.int64(shift), zero_points[2], dtype)


def exact_add(lhs, rhs, scales, zero_points, dtype: str):
    """TFLite's quantized ADD (reference_integer_ops::Add): each input, less its zero point, shifted
    left 20 bits and requantized to twice the larger input scale; the sum requantized to the output
    (``scales`` and ``zero_points``: lhs, rhs, output)."""
    s1, s2, so = (np.float32(s) for s in scales)
    twice_max = float(2 * max(s1, s2))
    left_shift = 20
    m1, sh1 = quantize_multiplier(float(s1) / twice_max)
    m2, sh2 = quantize_multiplier(float(s2) / twice_max)
    mo, sho = quantize_multiplier(twice_max / float(np.float32((1 << left_shift) * so)))

    def scaled(x, zero_point, multiplier, shift):
        shifted = relay.multiply(relay.subtract(relay.cast(x, "int64"), relay.const(int(zero_point), "int64")),
                                 relay.const(int(1 << left_shift), "int64"))
        return multiply_by_quantized_multiplier(shifted, np.int64(multiplier), np.int64(shift))

    # computed once: the output's requantization reads it six times
    raw_sum = materialized(relay.add(scaled(lhs, zero_points[0], m1, sh1), scaled(rhs, zero_points[1], m2, sh2)))
    return requantize(raw_sum, np.int64(mo), np.int64(sho), int(zero_points[2]), dtype)


def tvm_add(lhs, rhs, scales, zero_points, dtype: str):
    """TVM's qnn.add as its canonicalization lowers it (the Relay engine's int8 ADD): each input
    requantized to the output's scale and zero point (int32, rounding UPWARD; only widened when they
    are already the output's), the two added, the output zero point taken off once, clamped."""
    so, zo = np.float32(scales[2]), int(zero_points[2])

    def requantized(x, scale, zero_point):
        value = relay.cast(x, "int64")
        if np.float32(scale) == so and int(zero_point) == zo:
            return value
        value = relay.subtract(value, relay.const(int(zero_point), "int64"))
        if np.float32(scale) != so:
            multiplier, shift = quantize_multiplier(float(np.float32(scale)) / float(so))
            value = tvm_fixed_point_multiply(value, np.int64(multiplier), np.int64(shift))
        return relay.add(value, relay.const(zo, "int64"))

    total = relay.add(requantized(lhs, scales[0], zero_points[0]), requantized(rhs, scales[1], zero_points[1]))
    info = np.iinfo(dtype)
    return relay.cast(relay.clip(relay.subtract(total, relay.const(zo, "int64")), int(info.min), int(info.max)), dtype)


def exact_quantize(x, scale: float, zero_point: int, dtype: str):
    """TFLite's QUANTIZE of a float32 expression: round half away from zero of x / scale (a float32
    division), + zero point, clamped to ``dtype``."""
    ratio = relay.cast(relay.divide(x, relay.const(np.float32(scale))), "float64")
    half = relay.const(0.5, "float64")  # std::round: half away from zero (C codegen has no fabs)
    rounded = relay.where(relay.greater_equal(ratio, relay.const(0.0, "float64")),
                          relay.floor(relay.add(ratio, half)), relay.ceil(relay.subtract(ratio, half)))
    info = np.iinfo(dtype)
    value = relay.add(relay.cast(rounded, "int64"), relay.const(int(zero_point), "int64"))
    return relay.cast(relay.clip(value, int(info.min), int(info.max)), dtype)
