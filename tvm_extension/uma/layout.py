"""Putting a graph in the layouts a backend's kernels want, before partitioning.

TFLite graphs are NHWC; a kernel written for NCHW must not see its convolutions inlined as
loops because the layout did not match.  ``convert_layout_pass`` runs TVM's ConvertLayout
(which carries the new layout through layout-agnostic neighbours, so transposes remain only
where the graph needs them) and then bakes the weight transforms into the weights.

That last step is done with numpy: FoldConstant would compile and run one TVM function per
weight, which made compiling a 79-conv network twice as slow.
"""
from typing import Dict, List

import numpy as np
import tvm
from tvm import relay
from tvm.relay.expr_functor import ExprMutator


def _permutation(src: str, dst: str):
    if sorted(src) != sorted(dst) or not src.isalpha():
        return None  # split layouts such as NCHW4c: leave them to TVM
    return [src.index(axis) for axis in dst]


def _fold(op: str, value: np.ndarray, attrs, out_type):
    if op == "layout_transform":
        order = _permutation(attrs.src_layout, attrs.dst_layout)
        return None if order is None else np.transpose(value, order)
    if op == "transpose":
        axes = [int(a) for a in attrs.axes] if attrs.axes is not None else None
        return np.transpose(value, axes)
    if op in ("expand_dims", "reshape", "squeeze"):
        return value.reshape([int(d) for d in out_type.shape])
    if op == "cast":
        return value.astype(str(attrs.dtype))
    return None


class _FoldConstantTransforms(ExprMutator):
    def visit_call(self, call):
        new = super().visit_call(call)
        if (
            isinstance(new.op, tvm.ir.Op)
            and len(new.args) == 1
            and isinstance(new.args[0], relay.Constant)
        ):
            folded = _fold(new.op.name, new.args[0].data.numpy(), new.attrs, call.checked_type)
            if folded is not None:
                return relay.const(np.ascontiguousarray(folded))
        return new


def fold_constant_transforms(mod: tvm.IRModule) -> tvm.IRModule:
    """Replace layout_transform/transpose/reshape/expand_dims/squeeze/cast of constants by constants."""
    mod = relay.transform.InferType()(mod)
    for gvar, func in list(mod.functions.items()):
        if isinstance(func, relay.Function):
            mod[gvar] = _FoldConstantTransforms().visit(func)
    return relay.transform.InferType()(mod)


def convert_layout_pass(desired_layouts: Dict[str, List[str]], name: str = "ConvertToKernelLayout"):
    """A pre-partitioning pass converting ops to ``desired_layouts`` (as ConvertLayout takes them)."""

    @tvm.transform.module_pass(opt_level=0, name=name)
    def convert(mod, _ctx):
        mod = relay.transform.InferType()(mod)
        # bias_add(axis=3) does not follow a layout change in this TVM; as a broadcast add it does.
        mod = relay.transform.CanonicalizeOps()(mod)
        mod = relay.transform.ConvertLayout(desired_layouts)(mod)
        return fold_constant_transforms(mod)

    return convert
