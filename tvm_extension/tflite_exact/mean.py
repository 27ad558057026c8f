"""TFLite's int8 MEAN (reference_ops::QuantizedMeanOrSum), exactly, as Relay.

The reference kernel takes one integer path for every axis set and every pair of scales: the
int32 sum over the reduced axes, minus ``zp_in * n`` (n the count of reduced elements), then one
MultiplyByQuantizedMultiplier whose multiplier folds 1/n into that of ``double(s_in) /
double(s_out)``: ``M' = (M << k) / n`` (integer division), ``shift' = shift - k`` with
``k = min(floor(log2 n), 32, 31 + shift)``; ``+ zp_out``, clamped.  (TVM divides the sum by n,
truncating, and requantizes that: two roundings.)
"""
import numpy as np

from .graph import relay
from .fixed_point import quantize_multiplier, requantize


def mean_multiplier(input_scale: float, output_scale: float, count: int):
    """TFLite's (M', shift') of a mean over ``count`` elements."""
    multiplier, shift = quantize_multiplier(float(np.float32(input_scale)) / float(np.float32(output_scale)))
    k = min(count.bit_length() - 1, 32, 31 + shift)
    return (multiplier << k) // count, shift - k


def exact_mean(x, axis, keepdims: bool, count: int, input_zero_point: int, scales, output_zero_point: int,
               dtype: str):
    """An integer expression -> TFLite's quantized mean over ``axis`` (``count`` elements),
    ``scales`` (input, output)."""
    multiplier, shift = mean_multiplier(*scales, count)
    total = relay.sum(relay.cast(x, "int64"), axis=axis, keepdims=keepdims)
    shifted = relay.subtract(total, relay.const(int(input_zero_point) * count, "int64"))
    return requantize(shifted, np.int64(multiplier), np.int64(shift), output_zero_point, dtype)
