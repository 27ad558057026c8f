"""ONNX's quantized Add, Sub and Mul (QDQ) as the Relay engine computes them, on the Relax engine.

An int8 backend's Relay side (QVanilla, Chocolate) runs TVM's ``FakeQuantizationToInteger`` over
the whole model, which makes ``QuantizeLinear(Add(DequantizeLinear(a), DequantizeLinear(b)))`` a
``qnn.add`` (Sub: ``qnn.subtract``, Mul: ``qnn.mul``; ``register_binary_qnn`` in
``tvm/relay/transform/fake_quantization_to_integer.py``), which TVM's canonicalization
(``src/relay/qnn/op/add.cc``, ``subtract.cc``, ``mul.cc``) computes in integers:

* add, subtract: each input requantized to the output's scale and zero point (int32, rounding
  UPWARD; only widened when it has them already), the two added (subtracted), the output zero
  point taken off (put back) once, clamped: two roundings;
* mul: ``(a - zp_a) * (b - zp_b)`` requantized (UPWARD) from the float32 product of the input
  scales to the output's: one rounding, ties upward.

A ReLU between the operator and the quantize stays in that integer region as ``maximum(., output
zero point)``.  TVM's Relax ONNX frontend imports the same nodes as float arithmetic,
``quantize(add(dequantize(a), dequantize(b)))``: one rounding of the float result, half to even,
which is ONNX's definition (``onnx.reference``, ONNX Runtime).  The two differ by one step on a few
percent of an add's or subtract's elements (not only ties; a mul's at ties).  ``as_relay``
rewrites these chains into the Relay engine's integer arithmetic, so that an ONNX QDQ model
compiled for an int8 backend gives the Relay engine's outputs bit for bit (the add as
``tvm_extension.tflite_exact.elementwise.tvm_add``, which a TFLite ADD gets on this engine too).

Rewritten: int8 inputs and output, per-tensor scales and zero points, optionally a ReLU before the
quantize; an input may be a dequantized int8 constant (an initializer: the int8 constant is
``qnn.add``'s operand on Relay), not both.  Anything else stays as the frontend imported it (a
float constant, which FakeQuantizationToInteger quantizes with the other input's parameters, among
them).
"""
import numpy as np
import tvm
from tvm import relax
from tvm.relax.dpl import is_const, is_op, wildcard

from tvm_extension.tflite_exact.elementwise import tvm_add
from tvm_extension.tflite_exact.fixed_point import quantize_multiplier, tvm_fixed_point_multiply, tvm_requantize
from tvm_extension.tflite_exact.graph import relay as ops

from .tvm_internals import Constant, constant_array

_A, _B = wildcard(), wildcard()
_DQ_A = is_op("relax.dequantize")(_A, is_const(), is_const())
_DQ_B = is_op("relax.dequantize")(_B, is_const(), is_const())
_BINARY = (is_op("relax.add")(_DQ_A, _DQ_B) | is_op("relax.subtract")(_DQ_A, _DQ_B)
           | is_op("relax.multiply")(_DQ_A, _DQ_B))
_RELU = is_op("relax.nn.relu")(_BINARY)
_CHAIN = is_op("relax.quantize")(_RELU | _BINARY, is_const(), is_const())


def _scalar(expr):
    """The one value of a constant scale or zero point, else None (per channel)."""
    value = constant_array(expr)
    return value.reshape(-1)[0].item() if value.size == 1 else None


def _int64(value):
    return ops.const(int(value), "int64")


def tvm_subtract(lhs, rhs, scales, zero_points, dtype: str):
    """TVM's qnn.subtract as its canonicalization lowers it: each input requantized to the output's
    scale and zero point as ``tvm_add`` does, ``lhs' - rhs' + zp_out``, clamped."""
    so, zo = np.float32(scales[2]), int(zero_points[2])

    def requantized(x, scale, zero_point):  # RequantizeOrUpcast (as in tvm_add)
        value = ops.cast(x, "int64")
        if np.float32(scale) == so and int(zero_point) == zo:
            return value
        value = ops.subtract(value, _int64(zero_point))
        if np.float32(scale) != so:
            multiplier, shift = quantize_multiplier(float(np.float32(scale)) / float(so))
            value = tvm_fixed_point_multiply(value, np.int64(multiplier), np.int64(shift))
        return ops.add(value, _int64(zo))

    difference = ops.subtract(requantized(lhs, scales[0], zero_points[0]), requantized(rhs, scales[1], zero_points[1]))
    info = np.iinfo(dtype)
    return ops.cast(ops.clip(ops.add(difference, _int64(zo)), int(info.min), int(info.max)), dtype)


def tvm_mul(lhs, rhs, scales, zero_points, dtype: str):
    """TVM's qnn.mul as its canonicalization lowers it: ``(lhs - zp) * (rhs - zp)`` (int32), then
    qnn.requantize (UPWARD) from the float32 product of the input scales to the output scale."""
    offset = lambda x, zero_point: ops.subtract(ops.cast(x, "int64"), _int64(zero_point))
    product = ops.multiply(offset(lhs, zero_points[0]), offset(rhs, zero_points[1]))
    real = float(np.float32(np.float32(scales[0]) * np.float32(scales[1]))) / float(np.float32(scales[2]))
    multiplier, shift = quantize_multiplier(real)
    return tvm_requantize(product, np.int64(multiplier), np.int64(shift), int(zero_points[2]), dtype)


_ARITHMETIC = {"relax.add": tvm_add, "relax.subtract": tvm_subtract, "relax.multiply": tvm_mul}


def _rewrite(expr, found):
    quantize, parts = expr, (found[_DQ_A], found[_DQ_B])
    dtype = str(quantize.attrs.out_dtype)
    if dtype != "int8" or any(str(found[x].ty.dtype) != "int8" for x in (_A, _B)) or all(
            isinstance(found[x], Constant) for x in (_A, _B)):
        return expr
    params = [(_scalar(call.args[1]), _scalar(call.args[2])) for call in (*parts, quantize)]
    if any(value is None for pair in params for value in pair):
        return expr
    scales = tuple(float(np.float32(scale)) for scale, _ in params)
    zero_points = tuple(int(zero_point) for _, zero_point in params)
    out = _ARITHMETIC[found[_BINARY].op.name](found[_A], found[_B], scales, zero_points, dtype)
    if _RELU in found:  # FakeQuantizationToInteger's relu: maximum at the output's zero point
        out = ops.clip(out, zero_points[2], int(np.iinfo(dtype).max))
    return out


def as_relay_module(mod: tvm.IRModule) -> tvm.IRModule:
    """``as_relay`` on every Relax function of ``mod``."""
    for gv, func in list(mod.functions_items()):
        if isinstance(func, relax.Function):
            mod[gv] = as_relay(func)
    return relax.transform.DeadCodeElimination()(mod)


def as_relay(func: relax.Function) -> relax.Function:
    """``func`` with its QDQ Add, Sub and Mul in the Relay engine's integer arithmetic (the rest unchanged)."""
    return relax.dpl.rewrite_call(_CHAIN, _rewrite, func)
