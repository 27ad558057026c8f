"""Giving a backend's kernels the layout they compute in, and nothing else.

TFLite graphs are NHWC; a kernel written for NCHW must not see its convolutions run as
inlined loops because the layout did not match.  ``offload_layout_pass`` converts exactly
the convolutions the backend accepts (asked through ``accepts``, on the converted call) to
the kernel's layout, and carries the conversion through what follows them per channel or
per element (bias, ReLU, clip, maximum, (de/re)quantize, PReLU, pad, pooling) and through
the model's own transposes (those of an NHWC network exported as NCHW cancel out) so that:

* consecutive offloaded convolutions meet without any transpose between them, also across
  the float operators of an int8 QDQ graph (dequantize -> PReLU -> quantize);
* the convolutions the CPU runs keep the model's own layout, where TVM's schedules are
  compact (converting a whole NHWC network to NCHW made its CPU code 1.7x larger).

Weights (and the cast/transpose/reshape/qnn.quantize that frontends put on them) are
transformed with numpy here, not by FoldConstant, which would compile and run one TVM
function per weight.

A kernel that reads feature maps in the model's own layout needs no conversion at all, only
its weights in one layout: ``pack_weights_pass`` permutes them once, at compile time.
"""
from typing import Callable

import numpy as np
import tvm
from tvm import relay
from tvm.relay.expr_functor import ExprMutator

from tvm_extension.uma import offloaded_functions

_CONVS = ("nn.conv2d", "qnn.conv2d")
# Per element, whatever the layout: moved past a conversion back to the model's layout.
_ELEMENTWISE = ("nn.relu", "clip", "cast")
_POOLS = {"nn.max_pool2d": relay.nn.max_pool2d, "nn.avg_pool2d": relay.nn.avg_pool2d}


def _permute(value: np.ndarray, src: str, dst: str) -> np.ndarray:
    return np.ascontiguousarray(np.transpose(value, [src.index(axis) for axis in dst]))


def _fold_constant(op: str, value: np.ndarray, attrs, out_type):
    """Weights arrive as cast/transpose/reshape of constants (float16 TFLite weights): fold them."""
    if op == "cast":
        return value.astype(str(attrs.dtype))
    if op == "transpose":
        return np.ascontiguousarray(np.transpose(value, [int(a) for a in attrs.axes] if attrs.axes else None))
    if op in ("reshape", "expand_dims", "squeeze"):
        return value.reshape([int(d) for d in out_type.shape])
    return None


def _quantize(value: np.ndarray, scale: np.ndarray, zero_point: np.ndarray, axis: int, dtype: str) -> np.ndarray:
    """qnn.quantize of a constant (float weights and biases of QDQ graphs, e.g. PyTorch's
    fake-quantized export, after FakeQuantizationToInteger), bit for bit as TVM's C computes it:
    float32 division, round half away from zero (C's roundf), zero point, clamp."""
    shape = [1] * value.ndim
    if value.ndim and (scale.size > 1 or zero_point.size > 1):
        shape[axis % value.ndim] = -1
    scaled = (value.astype(np.float32) / scale.astype(np.float32).reshape(shape)).astype(np.float64)
    rounded = (np.sign(scaled) * np.floor(np.abs(scaled) + 0.5)).astype(np.float32)  # exact in float64
    shifted = rounded + zero_point.astype(np.float32).reshape(shape)
    info = np.iinfo(dtype)
    return np.clip(shifted.astype(np.float64), info.min, info.max).astype(dtype)


def _is_back_transform(expr, layout: str) -> bool:
    """A layout_transform from the kernel's layout back to the model's (made by this pass)."""
    return (
        isinstance(expr, relay.Call) and isinstance(expr.op, tvm.ir.Op) and expr.op.name == "layout_transform"
        and expr.attrs.src_layout == layout and expr.attrs.dst_layout != layout
    )


def _per_channel(bias: np.ndarray, layout: str, channels: int, axis=None):
    """The bias as a vector if it adds one value per channel of a ``layout`` tensor, else None."""
    if bias.size == 1 and axis is None:  # one value for all (ReLU's maximum(x, 0)): broadcast it
        return np.full(channels, bias.reshape(-1)[0], bias.dtype)
    if axis is not None:  # bias_add
        return bias.reshape(-1) if bias.size == channels and axis % len(layout) == layout.index("C") else None
    dims = [1] * (len(layout) - bias.ndim) + list(bias.shape)
    wanted = [channels if a == "C" else 1 for a in layout]
    return bias.reshape(-1) if dims == wanted else None


def _scalars(*constants) -> bool:
    return all(isinstance(c, relay.Constant) and c.data.numpy().size == 1 for c in constants)


class _FoldWeights(ExprMutator):
    """Folds cast/transpose/reshape chains and qnn.quantize on constants, so patterns see
    weights as constants."""

    def visit_call(self, call):
        new = super().visit_call(call)
        if not (isinstance(new.op, tvm.ir.Op) and new.args and all(isinstance(a, relay.Constant) for a in new.args)):
            return new
        values = [a.data.numpy() for a in new.args]
        if new.op.name == "qnn.quantize":
            return relay.const(_quantize(*values, int(new.attrs.axis), str(new.attrs.out_dtype)))
        folded = _fold_constant(new.op.name, values[0], new.attrs, call.checked_type) if len(values) == 1 else None
        return new if folded is None else relay.const(folded)


def _convertible(conv, layout: str, kernel_layout: str) -> bool:
    """A conv with constant weights in another arrangement of the same axes."""
    attrs = conv.attrs
    return (attrs.data_layout != layout and isinstance(conv.args[1], relay.Constant)
            and sorted(attrs.data_layout) == sorted(layout) and sorted(attrs.kernel_layout) == sorted(kernel_layout))


def _converted_conv(conv, data, layout: str, kernel_layout: str):
    """``conv`` reading ``data`` in ``layout``, its weights permuted to ``kernel_layout``."""
    attrs = conv.attrs
    weight = relay.const(_permute(conv.args[1].data.numpy(), attrs.kernel_layout, kernel_layout))
    common = dict(
        strides=attrs.strides, padding=attrs.padding, dilation=attrs.dilation, groups=attrs.groups,
        channels=attrs.channels, kernel_size=attrs.kernel_size, data_layout=layout, kernel_layout=kernel_layout,
        out_dtype=attrs.out_dtype,
    )
    if conv.op.name == "qnn.conv2d":  # zero points and scales are scalars or per channel
        return relay.qnn.op.conv2d(data, weight, *conv.args[2:], **common)
    return relay.nn.conv2d(data, weight, **common)


def as_kernel_layout(conv, layout: str = "NHWC", kernel_layout: str = "HWIO", data_type=None):
    """``conv`` (its data typed, or of ``data_type``) as ``offload_layout_pass`` would convert it,
    typed on its own: what the backend's ``accepts`` is asked, and what explains a refusal;
    None if it is not converted."""
    if not _convertible(conv, layout, kernel_layout):
        return None
    data_type, model_layout = data_type or conv.args[0].checked_type, conv.attrs.data_layout
    shape = [data_type.shape[model_layout.index(axis)] for axis in layout]
    data = relay.var("data", relay.TensorType(shape, data_type.dtype))
    probe = relay.Function([data], _converted_conv(conv, data, layout, kernel_layout))
    return relay.transform.InferType()(tvm.IRModule.from_expr(probe))["main"].body


def _constant_key(expr):
    return expr.data.numpy().tobytes() if isinstance(expr, relay.Constant) else id(expr)


class _OffloadLayout(_FoldWeights):
    def __init__(self, accepts, data_layout, kernel_layout, model_layouts):
        super().__init__()
        self.accepts, self.layout, self.kernel_layout = accepts, data_layout, kernel_layout
        self.model_layouts = model_layouts  # the layouts of the convs to convert
        self.answers = {}  # the backend's answer per conv shape, attributes and quantization

    def _to_kernel_layout(self, expr, model_layout):
        if _is_back_transform(expr, self.layout) and expr.attrs.dst_layout == model_layout:
            return expr.args[0]  # the producer was converted too: no transpose at all
        return relay.layout_transform(expr, model_layout, self.layout)

    def visit_call(self, call):
        new = super().visit_call(call)
        if not isinstance(new, relay.Call) or not isinstance(new.op, tvm.ir.Op):
            return new
        if new.op.name in _CONVS:
            return self._conv(new, call)
        if new.op.name == "transpose" and len(call.checked_type.shape) == len(self.layout):
            return self._transpose(new)
        if (new.op.name in ("add", "maximum") and isinstance(new.args[0], relay.Constant)
                and _is_back_transform(new.args[1], self.layout)):
            # Constant first: commutative, so swapped.  Not with args[::-1]: a TVM Array's slice
            # ignores a negative step and gives no arguments at all.
            new, call = (relay.Call(new.op, [new.args[1], new.args[0]], new.attrs, new.type_args, new.span),
                         relay.Call(call.op, [call.args[1], call.args[0]], call.attrs))
        back = new.args[0] if new.args and _is_back_transform(new.args[0], self.layout) else None
        if back is None:
            return new
        model_layout = str(back.attrs.dst_layout)
        moved = self._carry(new, back.args[0], model_layout, int(call.args[0].checked_type.shape[model_layout.index("C")]))
        return new if moved is None else relay.layout_transform(moved, self.layout, model_layout)

    def _transpose(self, new):
        """A transpose after a conversion back is one conversion (none if they cancel out); a
        transpose into a converted conv's layout is a conversion back, carried like one."""
        data = new.args[0]
        axes = [int(a) for a in new.attrs.axes] if new.attrs.axes else list(range(len(self.layout)))[::-1]
        if _is_back_transform(data, self.layout):
            layout = "".join(str(data.attrs.dst_layout)[a] for a in axes)
            inner = data.args[0]
            return inner if layout == self.layout else relay.layout_transform(inner, self.layout, layout)
        layout = "".join(self.layout[a] for a in axes)
        return relay.layout_transform(data, self.layout, layout) if layout in self.model_layouts else new

    def _carry(self, call, inner, model_layout, channels):
        """``call`` of a tensor in ``model_layout`` computed on ``inner``, the same in the kernel's
        layout; None if it cannot be (it then reads the model's layout)."""
        name, attrs, args = call.op.name, call.attrs, call.args
        c_axis = self.layout.index("C")

        def axis(a, *quantization):  # an axis of the model's layout in the kernel's (any, for scalars)
            return c_axis if _scalars(*quantization) else self.layout.index(model_layout[int(a) % len(model_layout)])

        if name in _ELEMENTWISE:
            return relay.Call(call.op, [inner], attrs, call.type_args, call.span)
        if name in ("add", "nn.bias_add", "maximum") and isinstance(args[1], relay.Constant):
            bias_axis = int(attrs.axis) if name == "nn.bias_add" else None
            values = _per_channel(args[1].data.numpy(), model_layout, channels, bias_axis)
            if values is None:
                return None  # not one value per channel
            constant = relay.const(values.reshape([channels if a == "C" else 1 for a in self.layout]))
            return relay.maximum(inner, constant) if name == "maximum" else relay.add(inner, constant)
        if name == "qnn.requantize":
            return relay.qnn.op.requantize(inner, *args[1:], axis=axis(attrs.axis, *args[1:]), rounding=attrs.rounding,
                                           compute_dtype=attrs.compute_dtype, out_dtype=attrs.out_dtype)
        if name in ("qnn.quantize", "qnn.dequantize"):
            op = relay.qnn.op.quantize if name == "qnn.quantize" else relay.qnn.op.dequantize
            return op(inner, *args[1:], axis=axis(attrs.axis, *args[1:]), out_dtype=attrs.out_dtype)
        if name == "nn.prelu":
            return relay.nn.prelu(inner, args[1], axis=axis(attrs.axis, args[1]))
        if name == "nn.pad":
            widths = [[int(w) for w in attrs.pad_width[model_layout.index(a)]] for a in self.layout]
            return relay.nn.pad(inner, widths, args[1], attrs.pad_mode)
        if name in _POOLS and attrs.layout == model_layout and attrs.out_layout in ("", model_layout):
            extra = dict(count_include_pad=attrs.count_include_pad) if name == "nn.avg_pool2d" else {}
            return _POOLS[name](inner, attrs.pool_size, attrs.strides, attrs.dilation, attrs.padding, self.layout,
                                ceil_mode=attrs.ceil_mode, **extra)
        return None

    def _conv(self, conv, typed):
        if not _convertible(conv, self.layout, self.kernel_layout):
            return conv
        model_layout = conv.attrs.data_layout
        data_type = typed.args[0].checked_type
        # Ask the backend about the converted conv, typed on its own (the predicate reads types);
        # the answer depends on the shapes, attributes and quantization parameters only.
        weight = conv.args[1].data
        key = (str(data_type), tuple(weight.shape), weight.dtype, str(conv.attrs), *map(_constant_key, conv.args[2:]))
        if key not in self.answers:
            self.answers[key] = self.accepts(as_kernel_layout(conv, self.layout, self.kernel_layout, data_type))
        if not self.answers[key]:
            return conv
        out = _converted_conv(conv, self._to_kernel_layout(conv.args[0], model_layout), self.layout, self.kernel_layout)
        return relay.layout_transform(out, self.layout, model_layout)


def _run_on_main_functions(mod, mutator):
    """``mutator`` over every function of ``mod`` that is not already offloaded."""
    mod = relay.transform.InferType()(mod)
    for gvar, func in list(mod.functions.items()):
        if isinstance(func, relay.Function) and not (func.attrs and "Compiler" in func.attrs):
            mod[gvar] = mutator.visit(func)
            mod = relay.transform.InferType()(mod)
    return mod


def fold_weights_pass(name: str = "FoldWeights"):
    """Pre-partitioning pass: weights that frontends compute from constants (cast from float16,
    transpose, reshape) become constants, so ``is_constant()`` in a pattern matches them."""

    @tvm.transform.module_pass(opt_level=0, name=name)
    def fold(mod, _ctx):
        return _run_on_main_functions(mod, _FoldWeights())

    return fold


def offload_layout_pass(
    accepts: Callable[[relay.Call], bool], data_layout: str = "NCHW", kernel_layout: str = "OIHW",
    name: str = "OffloadLayout",
):
    """Pre-partitioning pass: convs ``accepts`` takes in ``data_layout``/``kernel_layout`` get converted."""

    @tvm.transform.module_pass(opt_level=0, name=name)
    def convert(mod, _ctx):
        layouts = set()
        relay.analysis.post_order_visit(mod["main"], lambda e: layouts.add(str(e.attrs.data_layout)) if (
            isinstance(e, relay.Call) and isinstance(e.op, tvm.ir.Op) and e.op.name in _CONVS) else None)
        layouts.discard(data_layout)
        return _run_on_main_functions(mod, _OffloadLayout(accepts, data_layout, kernel_layout, layouts))

    return convert


def _pack_function(func: relay.Function, kernel_layout: str):
    """``func`` with its conv weights read from ``kernel_layout``: (new function, {param index: layout it had})."""
    index = {param: i for i, param in enumerate(func.params)}
    moved = {}  # param index -> the conv's kernel layout

    class _Pack(ExprMutator):
        def visit_call(self, call):
            new = super().visit_call(call)
            if not (isinstance(new.op, tvm.ir.Op) and new.op.name in _CONVS):
                return new
            layout, weight = str(new.attrs.kernel_layout), new.args[1]
            if layout == kernel_layout or sorted(layout) != sorted(kernel_layout):
                return new
            if isinstance(weight, relay.Constant):
                packed = relay.const(_permute(weight.data.numpy(), layout, kernel_layout))
                return relay.Call(new.op, [new.args[0], relay.layout_transform(packed, kernel_layout, layout),
                                           *new.args[2:]], new.attrs, new.type_args, new.span)
            if isinstance(weight, relay.Var) and weight in index:
                moved[index[weight]] = layout
            return new

    body = _Pack().visit(func.body)
    params = list(func.params)
    binds = {}
    for i, layout in moved.items():
        old = params[i].checked_type
        params[i] = relay.var(params[i].name_hint, relay.TensorType(
            [old.shape[layout.index(axis)] for axis in kernel_layout], old.dtype))
        binds[func.params[i]] = relay.layout_transform(params[i], kernel_layout, layout)
    body = relay.bind(body, binds) if binds else body
    return relay.Function(params, body, func.ret_type, func.type_params, func.attrs), moved


def pack_weights_pass(target_name: str, kernel_layout: str = "OIHW", name: str = "PackWeights"):
    """After partitioning: every conv offloaded to ``target_name`` gets its weights in ``kernel_layout``.

    TVM's lowering needs a conv's weights in the layout its schedule knows (NHWC convs take
    HWIO), so inside the offloaded function the conv reads the packed parameter through a
    ``layout_transform``; the backend's TIR pass replaces both by its kernel call.  At the
    call site the constant is permuted with numpy (a weight that is not a constant gets a
    layout_transform on the CPU instead).
    """

    @tvm.transform.module_pass(opt_level=0, name=name)
    def pack(mod, _ctx):
        mod = relay.transform.InferType()(mod)
        moved = {}
        for gvar, func in offloaded_functions(mod, target_name):
            mod[gvar], moved[gvar] = _pack_function(func, kernel_layout)
        moved = {gvar: params for gvar, params in moved.items() if params}

        class _PackedArguments(ExprMutator):
            def visit_call(self, call):
                new = super().visit_call(call)
                if not (isinstance(new.op, relay.GlobalVar) and new.op in moved):
                    return new
                args = list(new.args)
                for i, layout in moved[new.op].items():
                    args[i] = (relay.const(_permute(args[i].data.numpy(), layout, kernel_layout))
                               if isinstance(args[i], relay.Constant)
                               else relay.layout_transform(args[i], layout, kernel_layout))
                return relay.Call(new.op, args, new.attrs, new.type_args, new.span)

        if moved:
            for gvar, func in list(mod.functions.items()):
                if isinstance(func, relay.Function) and not (func.attrs and "Compiler" in func.attrs):
                    mod[gvar] = _PackedArguments().visit(func)
        return relay.transform.InferType()(mod)

    return pack
