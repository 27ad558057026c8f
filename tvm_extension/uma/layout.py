"""Giving a backend's kernels the layout they compute in, and nothing else.

TFLite graphs are NHWC; a kernel written for NCHW must not see its convolutions run as
inlined loops because the layout did not match.  ``offload_layout_pass`` converts exactly
the convolutions the backend accepts (asked through ``accepts``, on the converted call) to
the kernel's layout, and carries the conversion through what follows them per channel
(bias, ReLU, clip, maximum, qnn.requantize) so that:

* consecutive offloaded convolutions meet without any transpose between them;
* everything the CPU runs keeps the model's own layout, where TVM's schedules are compact
  (converting a whole NHWC network to NCHW made its CPU code 1.7x larger).

Weights (and the cast/transpose/reshape that frontends put on them) are transformed with
numpy here, not by FoldConstant, which would compile and run one TVM function per weight.

A kernel that reads feature maps in the model's own layout needs no conversion at all, only
its weights in one layout: ``pack_weights_pass`` permutes them once, at compile time.
"""
from typing import Callable

import numpy as np
import tvm
from tvm import relay
from tvm.relay.expr_functor import ExprMutator

from .lower import offloaded_functions

_ELEMENTWISE_AFTER = ("nn.relu", "clip")


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


class _FoldWeights(ExprMutator):
    """Folds cast/transpose/reshape chains on constants, so patterns see weights as constants."""

    def visit_call(self, call):
        new = super().visit_call(call)
        if isinstance(new.op, tvm.ir.Op) and len(new.args) == 1 and isinstance(new.args[0], relay.Constant):
            folded = _fold_constant(new.op.name, new.args[0].data.numpy(), new.attrs, call.checked_type)
            if folded is not None:
                return relay.const(folded)
        return new


class _OffloadLayout(_FoldWeights):
    def __init__(self, accepts, data_layout, kernel_layout):
        super().__init__()
        self.accepts, self.layout, self.kernel_layout = accepts, data_layout, kernel_layout
        self.answers = {}  # the backend's answer per conv shape and attributes
        self.channels = {}  # converted expression -> its channel count

    def _to_kernel_layout(self, expr, model_layout):
        if _is_back_transform(expr, self.layout) and expr.attrs.dst_layout == model_layout:
            return expr.args[0]  # the producer was converted too: no transpose at all
        return relay.layout_transform(expr, model_layout, self.layout)

    def visit_call(self, call):
        new = super().visit_call(call)
        if not isinstance(new, relay.Call) or not isinstance(new.op, tvm.ir.Op):
            return new
        name = new.op.name
        if name in ("nn.conv2d", "qnn.conv2d"):
            return self._conv(new, call.args[0].checked_type)
        back = new.args[0] if new.args and _is_back_transform(new.args[0], self.layout) else None
        if back is not None and name in ("add", "nn.bias_add", "maximum") and isinstance(new.args[1], relay.Constant):
            return self._per_channel_constant(new)
        if back is not None and name == "qnn.requantize" and int(new.attrs.axis) in (-1, back.attrs.dst_layout.index("C")):
            inner, model_layout = back.args[0], back.attrs.dst_layout
            a = new.attrs
            moved = relay.qnn.op.requantize(inner, *new.args[1:], axis=self.layout.index("C"), rounding=a.rounding,
                                            compute_dtype=a.compute_dtype, out_dtype=a.out_dtype)
            return self._back_to(moved, model_layout, self.channels[inner])
        if back is not None and name in _ELEMENTWISE_AFTER:
            inner, model_layout = new.args[0].args[0], new.args[0].attrs.dst_layout
            moved = relay.Call(new.op, [inner], new.attrs, new.type_args, new.span)
            return self._back_to(moved, model_layout, self.channels[inner])
        return new

    def _conv(self, conv, data_type):
        attrs = conv.attrs
        model_layout, model_kernel = attrs.data_layout, attrs.kernel_layout
        weight = conv.args[1]
        if model_layout == self.layout or not isinstance(weight, relay.Constant):
            return conv
        if sorted(model_layout) != sorted(self.layout) or sorted(model_kernel) != sorted(self.kernel_layout):
            return conv
        weight = relay.const(_permute(weight.data.numpy(), model_kernel, self.kernel_layout))

        def converted(data):
            common = dict(
                strides=attrs.strides, padding=attrs.padding, dilation=attrs.dilation,
                groups=attrs.groups, channels=attrs.channels, kernel_size=attrs.kernel_size,
                data_layout=self.layout, kernel_layout=self.kernel_layout, out_dtype=attrs.out_dtype,
            )
            if conv.op.name == "qnn.conv2d":  # zero points and scales are scalars or per channel
                return relay.qnn.op.conv2d(data, weight, *conv.args[2:], **common)
            return relay.nn.conv2d(data, weight, **common)

        # Ask the backend about the converted conv, typed on its own (the predicate reads types).
        shape = [data_type.shape[model_layout.index(axis)] for axis in self.layout]
        key = (str(relay.TensorType(shape, data_type.dtype)), weight.data.shape, str(attrs))
        if key not in self.answers:
            data = relay.var("data", relay.TensorType(shape, data_type.dtype))
            probe = relay.transform.InferType()(tvm.IRModule.from_expr(relay.Function([data], converted(data))))
            self.answers[key] = self.accepts(probe["main"].body)
        if not self.answers[key]:
            return conv
        out = converted(self._to_kernel_layout(conv.args[0], model_layout))
        return self._back_to(out, model_layout, int(weight.data.shape[self.kernel_layout.index("O")]))

    def _back_to(self, expr, model_layout, channels):
        self.channels[expr] = channels
        return relay.layout_transform(expr, self.layout, model_layout)

    def _per_channel_constant(self, call):
        """add / bias_add / maximum with one value per channel (bias, ReLU in the int32 domain)."""
        inner, model_layout = call.args[0].args[0], call.args[0].attrs.dst_layout
        channels = self.channels[inner]
        axis = int(call.attrs.axis) if call.op.name == "nn.bias_add" else None
        values = _per_channel(call.args[1].data.numpy(), model_layout, channels, axis)
        if values is None:
            return call  # not one value per channel: leave it in the model's layout
        constant = relay.const(values.reshape([channels if a == "C" else 1 for a in self.layout]))
        moved = relay.maximum(inner, constant) if call.op.name == "maximum" else relay.add(inner, constant)
        return self._back_to(moved, model_layout, channels)


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
        return _run_on_main_functions(mod, _OffloadLayout(accepts, data_layout, kernel_layout))

    return convert


_CONVS = ("nn.conv2d", "qnn.conv2d")


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
