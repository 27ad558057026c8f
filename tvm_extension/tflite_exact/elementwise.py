"""TFLite's int8 MUL (reference_integer_ops::Mul / BroadcastMul4DSlow), exactly, as Relay.

Per output element: ``(in1 - zp1) * (in2 - zp2)`` (int32, at most 2^16 in magnitude), then
MultiplyByQuantizedMultiplier with the multiplier of ``s1 * s2 / s_out``, ``+ zp_out``, clamped
to the fused activation's range.  ``Prepare`` assigns that real multiplier to a double, but the
scales are floats and the expression is evaluated in float32: rounded twice in single precision
(a double product gives another multiplier, which changes some results).  TVM imports a fused
activation as a clip after the qnn.mul; the clamp here is to int8's range.
"""
import numpy as np
from tvm import relay

from .fixed_point import quantize_multiplier, requantize


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
