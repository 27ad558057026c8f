"""``--tflite-exact`` on the Relax engine: int8 TFLite operators, which the Relax frontend imports as
``dequantize -> float operator -> quantize``, rewritten to TFLite's integer arithmetic, so that the
network computes what TFLite's reference kernels (``BUILTIN_REF``) compute, bit for bit.  The
arithmetic is the Relay engine's (``tvm_extension.tflite_exact``: one set of builders over Relay or
Relax); this module only recognises the Relax form.  It runs after the backend's offload, whose
patterns read the float form, and before constants are folded (weights must stay int8).

| TFLite op | Relax import (each ``q(...)`` a quantize, ``dq`` a dequantize) | computed as |
| --- | --- | --- |
| CONV_2D, DEPTHWISE_CONV_2D left on the CPU, FULLY_CONNECTED | q(conv2d / matmul(dq x, dq w) + dq bias) | int32 accumulation, TFLite's two roundings |
| ADD (and its fused RELU) | q([relu](dq a + dq b)) | inputs shifted left 20 bits, requantized, added, requantized |
| MUL (and its fused RELU) | q([relu](dq a * dq b)) | (a - zp) * (b - zp), requantized with the float32 scale product |
| MEAN | q(mean(dq x)) | the integer sum, requantized once with 1/n folded into the multiplier |
| AVERAGE_POOL_2D | astype(avg_pool2d(astype(x, int32)), int8) | window sum rounded half away from zero / valid count |
| SOFTMAX | q(softmax(dq x)), scale 1/256, zero point -128 | gemmlowp's fixed point |
| LOGISTIC, TANH | q(sigmoid / tanh(dq x)) | TFLite's table of the 256 inputs |
| QUANTIZE of a float input | q(input) | round half away from zero of x / scale |

Any other ``q(float operator)`` stays as TVM computes it and is reported.

Without ``--tflite-exact`` an int8 TFLite model computes what the Relay engine computes
(``make_as_relay``): Relay's TFLite frontend imports CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED and
ADD as QNN operators, which TVM lowers to integer arithmetic with its own rounding (qnn.requantize
UPWARD), so those are rewritten here to that arithmetic; the rest Relay imports as Relax does
(average pool in int32, softmax between dequantize and quantize) and stays.
"""
import collections
from typing import List, Optional

import numpy as np
import tvm
from tvm import relax

from tvm_extension.tflite_exact.elementwise import exact_add, exact_mul, exact_quantize, tvm_add
from tvm_extension.tflite_exact.fixed_point import quantize_multiplier, requantize, tvm_requantize
from tvm_extension.tflite_exact.graph import relay as ops
from tvm_extension.tflite_exact.mean import exact_mean
from tvm_extension.tflite_exact.pooling import exact_average_pool
from tvm_extension.tflite_exact.softmax import exact_softmax
from tvm_extension.tflite_exact.tables import logistic_table, lookup, tanh_table

from .tvm_internals import constant_array

FLAG = "--tflite-exact"


def _op(expr) -> Optional[str]:
    return expr.op.name[len("relax."):] if isinstance(expr, relax.Call) and isinstance(expr.op, tvm.ir.Op) else None


def _constant(expr) -> Optional[np.ndarray]:
    return constant_array(expr)


def _scalar(expr):
    value = _constant(expr)
    return value.reshape(-1)[0].item() if value is not None and value.size == 1 else None


def _shape(expr) -> List[int]:
    return [int(d) for d in expr.ty.shape]


def _requantize_accumulator(acc, multipliers, shifts, zero_point, dtype):
    return requantize(ops.cast(acc, "int64"), multipliers, shifts, zero_point, dtype)


@relax.expr_functor.mutator
class _Exact(relax.PyExprMutator):
    def __init__(self, mod, as_relay: bool = False):
        super().__init__(mod)
        self.mod_ = mod
        self.as_relay = as_relay  # TVM's QNN arithmetic (the Relay engine's), not TFLite's
        self.exact = collections.Counter()

    def _bound(self, expr):
        """What a variable is bound to (a call), or the expression itself."""
        while isinstance(expr, relax.Var):
            value = self.lookup_binding(expr)
            if value is None:
                return expr
            expr = value
        return expr

    def _dequantized(self, expr):
        """(int8 expression, scale, zero point) of ``dq(x)`` with one scale and zero point, else None."""
        call = self._bound(expr)
        if _op(call) != "dequantize" or call.args[0].ty.dtype not in ("int8", "uint8"):
            return None
        scale, zero_point = _scalar(call.args[1]), _scalar(call.args[2])
        return None if scale is None or zero_point is None else (call.args[0], scale, int(zero_point))

    def visit_call_(self, call):
        call = super().visit_call_(call)
        rewrite = {"quantize": self._quantize, "astype": self._average_pool}.get(_op(call))
        if self.as_relay:
            rewrite = {"quantize": self._quantize_as_relay}.get(_op(call))
        result = rewrite(call) if rewrite else None
        if result is None:
            return call
        expr, label = result
        self.exact[label] += 1
        return self.builder_.normalize(expr)

    # QUANTIZE of whatever float operator TFLite ran in integers
    def _quantize(self, call):
        scale, zero_point, dtype = _scalar(call.args[1]), _scalar(call.args[2]), str(call.attrs.out_dtype)
        if scale is None or zero_point is None or dtype != "int8":
            return None
        out = (float(scale), int(zero_point), dtype)
        source = self._bound(call.args[0])
        kind = _op(source)
        if kind is None:  # the model's float input
            return exact_quantize(call.args[0], *out), "quantize"
        if kind == "nn.softmax":
            return self._softmax(source, out)
        if kind in ("sigmoid", "tanh"):
            return self._table(source, kind, out)
        if kind == "mean":
            return self._mean(source, out)
        relu = kind == "nn.relu"  # a fused RELU: clamped below at the output's zero point, as TFLite
        if relu:
            source = self._bound(source.args[0])
        if _op(source) in ("add", "multiply"):
            result = self._elementwise(source, out)
            if result is not None:
                return (ops.clip(result, out[1], 127) if relu else result), _op(source)
        if relu:
            return None
        return self._accumulation(source, out)

    def _quantize_as_relay(self, call):
        """The QNN operators of Relay's TFLite frontend: conv, FC and ADD (a fused RELU after an ADD
        a clip, as Relay's frontend puts it)."""
        scale, zero_point, dtype = _scalar(call.args[1]), _scalar(call.args[2]), str(call.attrs.out_dtype)
        if scale is None or zero_point is None or dtype != "int8":
            return None
        out = (float(scale), int(zero_point), dtype)
        source = self._bound(call.args[0])
        relu = _op(source) == "nn.relu"
        if relu:
            source = self._bound(source.args[0])
        if _op(source) == "add":
            lhs, rhs = (self._dequantized(a) for a in source.args)
            if lhs is not None and rhs is not None and _constant(lhs[0]) is None and _constant(rhs[0]) is None:
                result = tvm_add(lhs[0], rhs[0], (lhs[1], rhs[1], out[0]), (lhs[2], rhs[2], out[1]), dtype)
                return (ops.clip(result, out[1], 127) if relu else result), "add"
        return None if relu else self._accumulation(source, out)

    def _elementwise(self, call, out):
        """ADD or MUL of two int8 tensors (not a bias: that is ``_accumulation``'s)."""
        lhs, rhs = (self._dequantized(a) for a in call.args)
        if lhs is None or rhs is None or _constant(lhs[0]) is not None or _constant(rhs[0]) is not None:
            return None
        exact = exact_add if _op(call) == "add" else exact_mul
        return exact(lhs[0], rhs[0], (lhs[1], rhs[1], out[0]), (lhs[2], rhs[2], out[1]), out[2])

    def _mean(self, mean, out):
        data = self._dequantized(mean.args[0])
        if data is None or data[0].ty.dtype != "int8" or mean.attrs.axis is None or len(mean.attrs.axis) == 0:
            return None
        shape = _shape(data[0])
        axes = sorted({int(a) % len(shape) for a in mean.attrs.axis})
        count = int(np.prod([shape[a] for a in axes]))
        return exact_mean(data[0], axes, bool(mean.attrs.keepdims), count, data[2], (data[1], out[0]), out[1],
                          out[2]), "mean"

    def _accumulation(self, source, out):
        """q(conv2d | matmul (dq x, dq w) [+ dq bias]): int32 accumulation, TFLite's requantization
        (the multiplier from double(s_in) * double(s_w) / s_out for a conv, for FULLY_CONNECTED from
        the float32 product s_in * s_w, as TFLite's kernels compute it)."""
        bias = None
        if _op(source) == "add":
            accumulation, bias_call = (self._bound(a) for a in source.args)
            if _op(bias_call) != "dequantize" or _constant(bias_call.args[0]) is None or _scalar(bias_call.args[2]) != 0:
                return None
            source, bias = accumulation, _constant(bias_call.args[0])
        kind = _op(source)
        if kind not in ("nn.conv2d", "matmul"):
            return None
        data, weight, layout = self._dequantized(source.args[0]), self._bound(source.args[1]), []
        while _op(weight) in ("reshape", "permute_dims"):  # a depthwise kernel, a transposed FC weight
            layout.append(weight)
            weight = self._bound(weight.args[0])
        if data is None or _op(weight) != "dequantize" or _scalar(weight.args[2]) != 0:
            return None
        weight_scales = _constant(weight.args[1])
        if weight_scales is None:
            return None
        # sum((x - zp) * w) as sum(x * w) - zp * sum(w): the int8 input read as it is (not widened to
        # an int32 copy), padded with its zero point, and zp * sum(w) folded into the bias
        x, zero_point, w = data[0], int(data[2]), self._folded(weight.args[0], layout)
        if w is None:
            return None
        if kind == "matmul":
            acc = relax.op.matmul(x, relax.const(w), out_dtype="int32")
            sums = w.astype(np.int64).sum(axis=-2)  # over the inputs: one per output
            reals = [float(np.float32(data[1]) * s) / out[0] for s in weight_scales.astype(np.float32).reshape(-1)]
        else:
            attrs = source.attrs
            kernel_layout = str(attrs.kernel_layout)
            if str(attrs.out_layout or attrs.data_layout) != "NHWC" or sorted(kernel_layout) != sorted("HWIO"):
                return None
            padding = [int(p) for p in attrs.padding]  # top, left, bottom, right
            if zero_point != 0 and any(padding):
                x = relax.op.nn.pad(x, [0, 0, padding[0], padding[2], padding[1], padding[3], 0, 0],
                                    pad_value=float(zero_point))
                padding = [0, 0, 0, 0]
            acc = relax.op.nn.conv2d(x, relax.const(w), strides=attrs.strides, padding=padding,
                                     dilation=attrs.dilation, groups=int(attrs.groups), data_layout="NHWC",
                                     kernel_layout=kernel_layout, out_dtype="int32")
            # over the window and the group's inputs: one per output
            sums = w.astype(np.int64).sum(axis=tuple(i for i, axis in enumerate(kernel_layout) if axis != "O"))
            reals = [data[1] * float(s) / out[0] for s in weight_scales.astype(np.float32).reshape(-1)]
        if bias is not None and bias.dtype != np.int32:
            return None
        folded = (np.zeros(sums.shape, np.int64) if bias is None else bias.astype(np.int64)) - zero_point * sums
        if folded.any():
            acc = ops.add(acc, ops.const(folded.astype(np.int32), "int32"))
        if self.as_relay:  # Relay's frontend: the float32 product s_in * s_w, then qnn.requantize's ratio
            reals = [float(np.float32(np.float32(data[1]) * s)) / float(np.float32(out[0]))
                     for s in weight_scales.astype(np.float32).reshape(-1)]
        pairs = [quantize_multiplier(r) for r in reals]  # per output channel, the last axis here
        multipliers, shifts = (np.array([p[i] for p in pairs], np.int64) for i in (0, 1))
        if self.as_relay:
            return tvm_requantize(ops.cast(acc, "int64"), multipliers, shifts, out[1], out[2]), kind.split(".")[-1]
        return _requantize_accumulator(acc, multipliers, shifts, out[1], out[2]), kind.split(".")[-1]

    def _folded(self, expr, layout) -> Optional[np.ndarray]:
        """The int8 weight constant under its reshapes and transposes (before its dequantize, and
        ``layout``: those after it), applied here."""
        steps, expr = list(layout), self._bound(expr)
        while _op(expr) in ("reshape", "permute_dims"):
            steps.append(expr)
            expr = self._bound(expr.args[0])
        w = _constant(expr)
        for step in reversed(steps) if w is not None else []:
            axes = None if _op(step) == "reshape" or step.attrs.axes is None else [int(a) for a in step.attrs.axes]
            w = w.reshape(_shape(step)) if _op(step) == "reshape" else w.transpose(axes)  # no axes: reversed
        return w

    def _softmax(self, softmax, out):
        data = self._dequantized(softmax.args[0])
        axis = int(softmax.attrs.axis)
        if data is None or out[:2] != (1.0 / 256, -128) or axis not in (-1, len(_shape(softmax)) - 1):
            return None
        return exact_softmax(data[0], float(np.float32(data[1]))), "softmax"

    def _table(self, activation, kind, out):
        data = self._dequantized(activation.args[0])
        if data is None or data[0].ty.dtype != "int8":
            return None
        make = logistic_table if kind == "sigmoid" else tanh_table
        return lookup(data[0], make(data[1], data[2], out[0], out[1])), kind

    # AVERAGE_POOL_2D: astype(avg_pool2d(astype(x int8, int32)), int8)
    def _average_pool(self, call):
        pool = self._bound(call.args[0])
        if _op(pool) != "nn.avg_pool2d" or str(call.attrs.dtype) != "int8":
            return None
        widened = self._bound(pool.args[0])
        attrs = pool.attrs
        if (_op(widened) != "astype" or widened.args[0].ty.dtype != "int8" or str(attrs.layout) != "NHWC" or
                [int(d) for d in attrs.dilation] != [1, 1] or attrs.ceil_mode):
            return None
        return exact_average_pool(widened.args[0], _shape(widened), [int(k) for k in attrs.pool_size],
                                  [int(s) for s in attrs.strides], [int(p) for p in attrs.padding], "int8"), "avg_pool2d"

    def transform(self):
        for gv, func in self.mod_.functions_items():
            if isinstance(func, relax.Function):
                self.builder_.update_func(gv, self.visit_expr(func))
        return self.builder_.get()


def _left(mod) -> collections.Counter:
    """Float operators still between a dequantize and a quantize (computed as TVM does)."""
    left = collections.Counter()
    for _, func in mod.functions_items():
        if not isinstance(func, relax.Function):
            continue
        bindings = {b.var: b.value for block in func.body.blocks for b in block.bindings}

        def visit(expr):
            if _op(expr) == "quantize":
                source = bindings.get(expr.args[0], expr.args[0])
                if _op(source) == "add":  # a conv or FC and its bias: name the conv or FC
                    first = bindings.get(source.args[0], source.args[0])
                    source = first if _op(first) in ("nn.conv2d", "matmul") else source
                if _op(source) not in (None, "dequantize"):
                    left[_op(source)] += 1
        relax.analysis.post_order_visit(func.body, visit)
    return left


def make_exact(mod: tvm.IRModule):
    """(module, report lines: what was made exact, what is left as TVM computes it)."""
    rewrite = _Exact(mod)
    mod = relax.transform.DeadCodeElimination()(rewrite.transform())
    counts = ", ".join(f"{name} x{n}" for name, n in sorted(rewrite.exact.items()))
    report = [f"[tflite-exact] made exact: {counts or 'nothing (no quantized operator found)'}"]
    report += [f"[tflite-exact] not exact: {name} x{n} (computed as TVM does)" for name, n in sorted(_left(mod).items())]
    return mod, report


def make_as_relay(mod: tvm.IRModule) -> tvm.IRModule:
    """An int8 TFLite model's QNN operators in TVM's integer arithmetic, as the Relay engine computes them."""
    return relax.transform.DeadCodeElimination()(_Exact(mod, as_relay=True).transform())
