"""TFLite's int8 softmax (reference_ops::Softmax, gemmlowp fixed point), exactly, as Relay.

Per element, everything up to the exponential depends only on ``diff = x - max(row)`` in
[-255, 0]: those parts are tables computed here in Python integers.  Per row, the sum of
exponentials, its reciprocal (``GetReciprocal``: Newton-Raphson in Q2.29) and the final
scaling are Relay int64 arithmetic.
"""
import math

import numpy as np

from .graph import relay
from .fixed_point import INT32_MAX, INT32_MIN, i64 as _c, materialized, quantize_multiplier
from .fixed_point import rdbpot, srdhm, wrap as _wrap  # Python integers; rdbpot, srdhm re-exported
from .fixed_point import rounding_divide_by_pot as _rdbpot
from .fixed_point import saturating_rounding_doubling_high_mul as _srdhm
from .fixed_point import wrap_int32 as _wrap32

SCALED_DIFF_INTEGER_BITS = 5
ACCUMULATION_INTEGER_BITS = 12


# -- gemmlowp on Python integers (int32 raw values) ------------------------------------------
def saturating_shift_left(x: int, exponent: int) -> int:
    return max(INT32_MIN, min(INT32_MAX, x << exponent))


def _exp_quarter(a: int) -> int:
    """exp_on_interval_between_negative_one_quarter_and_0_excl, Q0.31."""
    constant_term, one_third = 1895147668, 715827883
    x = _wrap(a + (1 << 28))
    x2 = srdhm(x, x)
    x3 = srdhm(x2, x)
    x4 = srdhm(x2, x2)
    x4_over_4 = rdbpot(x4, 2)
    poly = rdbpot(_wrap(srdhm(_wrap(x4_over_4 + x3), one_third) + x2), 1)
    return _wrap(constant_term + srdhm(constant_term, _wrap(x + poly)))


def exp_on_negative_values(a: int, integer_bits: int = SCALED_DIFF_INTEGER_BITS) -> int:
    """gemmlowp's exp_on_negative_values of a Q(integer_bits).(31 - integer_bits) raw value, Q0.31."""
    fractional = 31 - integer_bits
    quarter = 1 << (fractional - 2)
    a_mod = _wrap((a & (quarter - 1)) - quarter)
    result = _exp_quarter(saturating_shift_left(a_mod, integer_bits))
    remainder = _wrap(a_mod - a)
    for exponent, multiplier in ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308),
                                 (2, 39332535), (3, 720401), (4, 242)):
        if integer_bits > exponent and remainder & (1 << (fractional + exponent)):
            result = srdhm(result, multiplier)
    return INT32_MAX if a == 0 else result


def softmax_parameters(input_scale: float, beta: float = 1.0):
    """TFLite's Prepare: (input multiplier, left shift, diff_min) of an int8 softmax."""
    real = min(beta * input_scale * (1 << (31 - SCALED_DIFF_INTEGER_BITS)), (1 << 31) - 1.0)
    multiplier, shift = quantize_multiplier(real)
    radius = ((1 << SCALED_DIFF_INTEGER_BITS) - 1) * (1 << (31 - SCALED_DIFF_INTEGER_BITS)) / (1 << shift)
    return multiplier, shift, -int(math.floor(radius))


def tables(input_scale: float, beta: float = 1.0):
    """Per diff in 0, -1, ..., -255: (exp in Q0.31, its Q12 term of the sum), 0 where TFLite skips it."""
    multiplier, shift, diff_min = softmax_parameters(input_scale, beta)
    exps, terms = [], []
    for d in range(0, -256, -1):
        if d < diff_min:
            exps.append(0)
            terms.append(0)
            continue
        e = exp_on_negative_values(srdhm(_wrap(d * (1 << shift)), multiplier))
        exps.append(e)
        terms.append(rdbpot(e, ACCUMULATION_INTEGER_BITS))
    return np.array(exps, np.int64), np.array(terms, np.int64), diff_min


# -- Relay -------------------------------------------------------------------------------------
def _saturating_shift_left(x, exponent: int):
    # a product, not a left shift: x may be negative, and C leaves shifting those undefined
    return relay.clip(relay.multiply(x, _c(1 << exponent)), INT32_MIN, INT32_MAX)


def _one_over_one_plus_x(a):
    """gemmlowp's one_over_one_plus_x_for_x_in_0_1 (a in Q0.31), Q0.31."""
    total = relay.add(a, _c(INT32_MAX))
    half_denominator = materialized(relay.divide(
        relay.add(total, relay.where(relay.greater_equal(total, _c(0)), _c(1), _c(-1))), _c(2)))
    x = _wrap32(relay.add(_c(1515870810), _srdhm(half_denominator, _c(-1010580540))))  # Q2.29
    for _ in range(3):
        one_minus = _wrap32(relay.subtract(_c(1 << 29), _srdhm(half_denominator, x)))
        x = materialized(_wrap32(relay.add(x, _saturating_shift_left(_srdhm(x, one_minus), 2))))
    return _saturating_shift_left(x, 1)


def exact_softmax(x_int8, input_scale: float, beta: float = 1.0):
    """An int8 [..., depth] expression -> TFLite's int8 softmax (output scale 1/256, zero point -128)."""
    exps, terms, _ = tables(input_scale, beta)
    x = relay.cast(x_int8, "int64")
    index = relay.subtract(relay.max(x, axis=-1, keepdims=True), x)  # -diff, 0..255
    exp_in_0 = relay.take(relay.const(exps, "int64"), index)
    total = relay.sum(relay.take(relay.const(terms, "int64"), index), axis=-1, keepdims=True)
    # GetReciprocal: headroom = count of leading zeros of the positive int32 total (in integers:
    # the C code generator has no log2).
    top_bit = _c(-1)
    for bit in range(31):
        top_bit = relay.add(top_bit, relay.cast(relay.greater_equal(total, _c(1 << bit)), "int64"))
    headroom = relay.subtract(_c(31), materialized(top_bit))
    bits_over_unit = relay.subtract(_c(ACCUMULATION_INTEGER_BITS), headroom)
    shifted_minus_one = relay.subtract(relay.left_shift(total, headroom), _c(1 << 31))
    scale = _one_over_one_plus_x(shifted_minus_one)
    out = _rdbpot(_srdhm(scale, exp_in_0), relay.add(bits_over_unit, _c(31 - 8)))
    out = relay.where(relay.equal(exp_in_0, _c(0)), _c(-128), relay.add(out, _c(-128)))
    return relay.cast(relay.clip(out, -128, 127), "int8")
