"""The Relay rewrite: what TVM's TFLite frontend imports, made to compute what TFLite's
reference kernels compute (``BUILTIN_REF``), bit for bit.

| TFLite op | TVM's import | rewritten as |
| --- | --- | --- |
| CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED | qnn.conv2d/dense -> bias -> qnn.requantize (one rounding, float32 scale product) | the same, the requantize marked ``rounding="TFLITE"``: backends that offload the layer compute TFLite's two roundings with its multipliers (double arithmetic); on the CPU ``lower_tflite_rounding`` does, after partitioning |
| ADD | qnn.add (each input requantized to the output scale) | TFLite's: inputs shifted left 20 bits at twice the larger input scale, requantized, added, requantized |
| AVERAGE_POOL_2D | int32 avg_pool2d (truncates) | the window sum rounded half away from zero, divided by the count of valid elements |
| QUANTIZE (float input) | qnn.quantize | round half away from zero of x / scale (float32 division, as TFLite) |
| SOFTMAX (int8) | dequantize -> softmax -> quantize | gemmlowp's fixed point (``softmax.py``) |
| MUL (int8, broadcast, fused activation) | qnn.mul [-> clip] | ``(in1 - zp1) * (in2 - zp2)`` requantized with TFLite's multiplier (float32 scale product, ``elementwise.py``); the clip stays |
| MEAN (int8, any axes) | cast int32 -> mean (truncating) -> qnn.requantize | TFLite's sum, requantized once with 1/n folded into the multiplier (``mean.py``) |
| LOGISTIC, TANH (int8) | dequantize -> sigmoid/tanh -> quantize | TFLite's float32 lookup table of the 256 input values (``tables.py``) |

Everything else that is quantized (MAX_POOL, RESHAPE, DEQUANTIZE, CONCATENATION of equal scales
as int8 models have, the fused activations'
clip) already computes what TFLite does; operators neither listed nor known to be exact (among
them MUL, LOGISTIC and TANH on uint8 or int16, MEAN on uint8 or int16) are reported, one line
per operator type (``make_exact``).
"""
import collections

import numpy as np
import tvm
from tvm import relay
from tvm.relay.expr_functor import ExprMutator

from .elementwise import exact_add, exact_mul, exact_quantize
from .fixed_point import quantize_multiplier, requantize as _requantize_to
from .fixed_point import tflite_multipliers
from .mean import exact_mean
from .pooling import exact_average_pool
from .softmax import exact_softmax
from .tables import logistic_table, lookup, tanh_table

# The rounding attribute of a qnn.requantize that computes TFLite's MultiplyByQuantizedMultiplier
# (two roundings, the multiplier from the conv's scales in double): TVM itself knows only UPWARD and
# TONEAREST, so every one left on the CPU must go through ``lower_tflite_rounding`` before building.
TFLITE = "TFLITE"

# Quantized operators whose results equal TFLite's reference kernels as TVM imports them.
EXACT_AS_IMPORTED = {
    "qnn.conv2d", "qnn.dense", "nn.bias_add", "clip", "reshape", "nn.max_pool2d", "qnn.dequantize", "squeeze",
    "expand_dims", "transpose", "nn.pad", "strided_slice", "nn.batch_flatten", "split", "concatenate",
}


def _values(const) -> np.ndarray:
    return np.asarray(const.data.numpy()).reshape(-1)


def _scalar(const):
    return _values(const)[0].item()


def _is(expr, *names) -> bool:
    return isinstance(expr, relay.Call) and isinstance(expr.op, tvm.ir.Op) and expr.op.name in names


def _accumulator_source(expr):
    """The qnn.conv2d / qnn.dense a requantize reads, through its bias add, or None."""
    if _is(expr, "nn.bias_add", "add"):
        expr = expr.args[0] if _is(expr.args[0], "qnn.conv2d", "qnn.dense") else expr.args[1]
    return expr if _is(expr, "qnn.conv2d", "qnn.dense") else None


def _barrier(expr):
    """A fusion barrier after each rewritten operator: without it TVM fuses chains of these int64
    expressions into functions it takes too long to build (a 79-conv network did not finish)."""
    return relay.annotation.stop_fusion(expr)


class Rewrite(ExprMutator):
    def __init__(self):
        super().__init__()
        self.exact = collections.Counter()

    def visit_call(self, call):
        new = super().visit_call(call)
        if not isinstance(new.op, tvm.ir.Op):
            return new
        name = new.op.name
        handler = {"qnn.requantize": self._requantize, "qnn.add": self._add, "cast": self._average_pool,
                   "qnn.quantize": self._quantize, "qnn.mul": self._mul}.get(name)
        result = handler(new, call) if handler else None  # types from the original call
        if result is None:
            return new
        result, label = result if isinstance(result, tuple) else (result, name)
        self.exact[label] += 1
        return result if label == "qnn.requantize" else _barrier(result)  # the marked ones are lowered later

    # CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED: marked here (offloaded layers read the mark),
    # computed by ``lower_tflite_rounding`` once partitioning has taken what backends offload.
    def _requantize(self, new, call):
        if _is(call.args[0], "mean"):
            return self._mean(new, call)
        if _accumulator_source(call.args[0]) is None:
            return None
        attrs = call.attrs
        return relay.qnn.op.requantize(*new.args, axis=int(attrs.axis), rounding=TFLITE, out_dtype=attrs.out_dtype)

    # ADD
    @staticmethod
    def _add(new, call):
        _, _, lhs_scale, lhs_zp, rhs_scale, rhs_zp, out_scale, out_zp = call.args
        scales = tuple(_scalar(c) for c in (lhs_scale, rhs_scale, out_scale))
        zero_points = tuple(int(_scalar(c)) for c in (lhs_zp, rhs_zp, out_zp))
        return exact_add(new.args[0], new.args[1], scales, zero_points, call.checked_type.dtype)

    # MEAN: requantize(mean(cast(x int8, int32)))
    @staticmethod
    def _mean(new, call):
        mean, cast = call.args[0], call.args[0].args[0]
        if not (_is(cast, "cast") and cast.args[0].checked_type.dtype == "int8" and call.attrs.out_dtype == "int8"
                and not mean.attrs.exclude and all(_values(c).size == 1 for c in call.args[1:])):
            return None
        if mean.attrs.axis is not None and len(mean.attrs.axis) == 0:
            return None  # TFLite copies the input unscaled; TVM's import would need checking first
        shape = [int(d) for d in cast.checked_type.shape]
        axes = range(len(shape)) if mean.attrs.axis is None else [int(a) % len(shape) for a in mean.attrs.axis]
        count = int(np.prod([shape[a] for a in set(axes)]))
        _, in_scale, in_zp, out_scale, out_zp = call.args
        x = new.args[0].args[0].args[0]
        return exact_mean(x, sorted(set(axes)), bool(mean.attrs.keepdims), count, int(_scalar(in_zp)),
                          (_scalar(in_scale), _scalar(out_scale)), int(_scalar(out_zp)), "int8"), "mean"

    # MUL (a fused activation stays the clip TVM imports after it)
    @staticmethod
    def _mul(new, call):
        _, _, lhs_scale, lhs_zp, rhs_scale, rhs_zp, out_scale, out_zp = call.args
        types = [call.args[0].checked_type, call.args[1].checked_type, call.checked_type]
        if any(t.dtype != "int8" for t in types) or any(_values(c).size != 1 for c in call.args[2:]):
            return None
        scales = tuple(_scalar(c) for c in (lhs_scale, rhs_scale, out_scale))
        zero_points = tuple(int(_scalar(c)) for c in (lhs_zp, rhs_zp, out_zp))
        return exact_mul(new.args[0], new.args[1], scales, zero_points, "int8")

    # AVERAGE_POOL_2D: cast(avg_pool2d(cast(x, int32)), int8)
    @staticmethod
    def _average_pool(new, call):
        pool = call.args[0]
        if not (_is(pool, "nn.avg_pool2d") and _is(pool.args[0], "cast") and
                call.attrs.dtype in ("int8", "uint8") and pool.attrs.layout == "NHWC"):
            return None
        attrs = pool.attrs
        if [int(d) for d in attrs.dilation] != [1, 1] or attrs.ceil_mode:
            return None
        shape = [int(d) for d in pool.args[0].checked_type.shape]
        pooled = exact_average_pool(new.args[0].args[0].args[0], shape, [int(k) for k in attrs.pool_size],
                                    [int(s) for s in attrs.strides], [int(p) for p in attrs.padding], call.attrs.dtype)
        return pooled, "nn.avg_pool2d"

    # QUANTIZE from float
    def _quantize(self, new, call):
        _, scale, zero_point = call.args[:3]
        x = call.args[0]
        if call.args[0].checked_type.dtype != "float32" or _values(scale).size != 1:
            return None
        if _is(x, "nn.softmax") and _is(x.args[0], "qnn.dequantize"):
            softmax = self._softmax(new, call)
            if softmax is not None:
                return softmax, "nn.softmax"
        if _is(x, "sigmoid", "tanh") and _is(x.args[0], "qnn.dequantize"):
            activation = self._activation_table(new, call)
            if activation is not None:
                return activation, x.op.name
        return exact_quantize(new.args[0], _scalar(scale), int(_scalar(zero_point)), call.attrs.out_dtype)

    @staticmethod
    def _activation_table(new, call):
        """quantize(sigmoid|tanh(dequantize(x int8))) -> TFLite's int8 LOGISTIC / TANH table."""
        dequantize = call.args[0].args[0]
        if not (dequantize.args[0].checked_type.dtype == "int8" and call.attrs.out_dtype == "int8" and
                all(_values(c).size == 1 for c in dequantize.args[1:3])):
            return None
        make = logistic_table if call.args[0].op.name == "sigmoid" else tanh_table
        entries = make(_scalar(dequantize.args[1]), int(_scalar(dequantize.args[2])), _scalar(call.args[1]),
                       int(_scalar(call.args[2])))
        return lookup(new.args[0].args[0].args[0], entries)

    @staticmethod
    def _softmax(new, call):
        """quantize(softmax(dequantize(x int8)), 1/256, -128) -> TFLite's int8 softmax (beta 1)."""
        dequantize = call.args[0].args[0]
        softmax = call.args[0]
        ok = (dequantize.args[0].checked_type.dtype == "int8" and call.attrs.out_dtype == "int8" and
              _scalar(call.args[1]) == 1.0 / 256 and int(_scalar(call.args[2])) == -128 and
              int(softmax.attrs.axis) in (-1, len(softmax.checked_type.shape) - 1))
        if not ok:
            return None
        return exact_softmax(new.args[0].args[0].args[0], float(np.float32(_scalar(dequantize.args[1]))))


def _is_copying_concatenate(call) -> bool:
    """A qnn.concatenate whose inputs all have the output's scale and zero point: a copy, as
    TFLite's int8 CONCATENATION (which requires exactly that of int8 models)."""
    if not _is(call, "qnn.concatenate"):
        return False
    _, scales, zero_points, out_scale, out_zp = call.args
    return all(_scalar(s) == _scalar(out_scale) for s in scales.fields) and \
        all(_scalar(z) == _scalar(out_zp) for z in zero_points.fields)


def _left_inexact(body) -> collections.Counter:
    """Quantized operators the rewrite left as TVM computes them (those on int8 data or between
    a dequantize and a quantize that are not known to match TFLite)."""
    left = collections.Counter()

    def visit(node):
        if not (isinstance(node, relay.Call) and isinstance(node.op, tvm.ir.Op)):
            return
        name = node.op.name
        if name == "qnn.requantize" and str(node.attrs.rounding) == TFLITE or _is_copying_concatenate(node):
            return
        if name.startswith("qnn.") and name not in EXACT_AS_IMPORTED:
            left[name] += 1
        elif name in ("nn.avg_pool2d", "nn.softmax", "mean", "sigmoid", "tanh", "nn.log_softmax") and \
                any(_is(a, "cast", "qnn.dequantize") for a in node.args):
            left[name] += 1

    relay.analysis.post_order_visit(body, visit)
    return left


class _LowerRounding(ExprMutator):
    def __init__(self):
        super().__init__()
        self.count, self.without_source = 0, 0

    def visit_call(self, call):
        new = super().visit_call(call)
        if not (_is(call, "qnn.requantize") and str(call.attrs.rounding) == TFLITE):
            return new
        self.count += 1
        output_scale = _scalar(call.args[3])
        source = _accumulator_source(call.args[0])
        if source is not None:
            multipliers, shifts = tflite_multipliers(source, output_scale)
        else:  # its conv went elsewhere: the requantize's own (float32) scale product
            self.without_source += 1
            pairs = [quantize_multiplier(float(s) / float(output_scale)) for s in _values(call.args[1])]
            multipliers, shifts = (np.array([p[i] for p in pairs], np.int64) for i in (0, 1))
        rank = len(call.checked_type.shape)
        if multipliers.size > 1:  # per channel along ``axis``
            shape = [1] * rank
            shape[int(call.attrs.axis) % rank] = multipliers.size
            multipliers, shifts = multipliers.reshape(shape), shifts.reshape(shape)
        x64 = relay.cast(new.args[0], "int64")
        return _barrier(_requantize_to(x64, multipliers, shifts, int(_scalar(call.args[4])), call.attrs.out_dtype))


def lower_tflite_rounding(mod: tvm.IRModule):
    """(module, lowered, of which without their conv's scales): every qnn.requantize of ``main``
    marked ``rounding="TFLITE"`` as int64 Relay arithmetic (offloaded functions are the backends')."""
    mod = relay.transform.InferType()(mod)
    lower = _LowerRounding()
    func = mod["main"]
    mod["main"] = relay.Function(func.params, lower.visit(func.body), func.ret_type, func.type_params, func.attrs)
    return relay.transform.InferType()(mod), lower.count, lower.without_source


def make_exact(mod: tvm.IRModule):
    """(rewritten module, Counter of operators made exact, Counter of quantized operators left
    as TVM computes them)."""
    mod = relay.transform.InferType()(mod)
    rewrite = Rewrite()
    func = mod["main"]
    body = rewrite.visit(func.body)
    mod["main"] = relay.Function(func.params, body, func.ret_type, func.type_params, func.attrs)
    return relay.transform.InferType()(mod), rewrite.exact, _left_inexact(body)
