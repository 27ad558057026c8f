"""TFLite's int8 LOGISTIC and TANH, exactly: a 256-entry table of the input value.

TFLite's reference kernels (``activations.cc``, kernel type kReference) do not use gemmlowp's
fixed point for int8 (only the kFixedPointOptimized kernels do): ``Prepare`` fills a lookup
table (``LUTPopulate``) in float32 arithmetic, and ``Eval`` looks every element up.  Per input
value ``v``::

    x = float(s_in) * float(v - zp_in)
    y = 1.0f / (1.0f + expf(-x))          (LOGISTIC)   or   tanhf(x)   (TANH)
    q = clamp(roundf(y * (1.0f / s_out)) + zp_out)     (roundf: half away from zero)

The tables are computed here in numpy float32 (IEEE single, as the C code), ``expf``/``tanhf``
as the correctly rounded float32 of the double result.  The C library's may differ by an ulp
from that; no such difference changed a table entry over 3000 random scales and zero points.
"""
import math

import numpy as np

from .graph import relay

_F = np.float32


def _to_float32(value: float) -> np.float32:
    with np.errstate(over="ignore"):  # beyond float32's range: inf, as expf gives
        return _F(value)


def _sigmoid(x: np.float32) -> np.float32:
    e = _to_float32(math.exp(-float(x))) if -x < 100 else _F(np.inf)
    return _F(1) / (_F(1) + e)


def _tanh(x: np.float32) -> np.float32:
    return _to_float32(math.tanh(float(x)))


def _round(y: np.float32) -> int:
    """roundf: half away from zero."""
    return int(math.floor(abs(float(y)) + 0.5)) * (1 if y >= 0 else -1)


def table(function, input_scale: float, input_zero_point: int, output_scale: float, output_zero_point: int):
    """TFLite's LUTPopulate for int8: entry ``v + 128`` is the output of input value ``v``."""
    scale, inverse = _F(input_scale), _F(1) / _F(output_scale)
    entries = []
    for v in range(-128, 128):
        y = function(scale * _F(v - input_zero_point))
        entries.append(min(127, max(-128, _round(y * inverse) + output_zero_point)))
    return np.array(entries, np.int8)


def logistic_table(input_scale, input_zero_point, output_scale, output_zero_point):
    return table(_sigmoid, input_scale, input_zero_point, output_scale, output_zero_point)


def tanh_table(input_scale, input_zero_point, output_scale, output_zero_point):
    return table(_tanh, input_scale, input_zero_point, output_scale, output_zero_point)


def lookup(x_int8, entries: np.ndarray):
    """Relay: each int8 element of ``x_int8`` replaced by ``entries[x + 128]``."""
    index = relay.add(relay.cast(x_int8, "int32"), relay.const(128, "int32"))
    return relay.take(relay.const(entries, "int8"), index)
