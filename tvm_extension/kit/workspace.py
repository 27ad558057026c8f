"""Scratch memory of a kernel call planned into the AOT workspace, from Relay.

A C entry that takes its scratch from the caller (CMSIS-NN style, sized by a ``_get_buffer_size``)
needs a buffer per call.  Allocated in TIR around the call, this TVM asks the runtime for it
(``TVMBackendAllocWorkspace``: the heap, at every inference).  Made a second output of the
offloaded function instead, it is a tensor like any other: the AOT planner places it in the
workspace, shared with the tensors that are dead at that point, and the MLF reports its size.

``scratch_output_pass`` does that after partitioning; the backend's TIR pass then finds the
scratch as the PrimFunc's last buffer (int8, ``max(nbytes, 1)`` elements) and the function's own
output before it.
"""
from typing import Callable

import tvm
from tvm import relay

from tvm_extension.uma import offloaded_functions


def scratch_tensor(source: relay.Expr, nbytes: int) -> relay.Expr:
    """An int8 tensor of ``max(nbytes, 1)`` elements computed from ``source`` (so it is an
    output, not a constant TVM would fold): cheap to lower, replaced by the kernel call anyway."""
    total = relay.sum(relay.cast(source, "int32"))
    return relay.cast(relay.broadcast_to(total, [max(nbytes, 1)]), "int8")


class _FirstOutputs(relay.ExprMutator):
    """Calls of ``gvars`` take their first output."""

    def __init__(self, gvars):
        super().__init__()
        self.gvars = gvars

    def visit_call(self, call):
        new = super().visit_call(call)
        if call.op in self.gvars:  # a new call: the old one carries the old type
            return relay.TupleGetItem(relay.Call(new.op, list(new.args), span=new.span), 0)
        return new


def take_first_outputs(mod: tvm.IRModule, gvars) -> tvm.IRModule:
    """``main`` with every call of ``gvars`` (now returning (output, scratch)) taking its output."""
    if gvars:
        main = _FirstOutputs(gvars).visit(mod["main"])
        mod["main"] = relay.Function(main.params, main.body, None, main.type_params, main.attrs)
    return relay.transform.InferType()(mod)


def with_output(func: relay.Function, outputs) -> relay.Function:
    """``func`` returning the tuple ``outputs``, typed (a function added to a module needs its type)."""
    new = relay.Function(func.params, relay.Tuple(list(outputs)), None, func.type_params, func.attrs)
    typed = relay.transform.InferType()(tvm.IRModule.from_expr(new))
    return typed[typed.get_global_vars()[0]]


def scratch_output_pass(target: str, attr: str, nbytes_of: Callable[[relay.Function], int],
                        name: str) -> tvm.transform.Pass:
    """After partitioning: each function offloaded to ``target`` that carries the attribute
    ``attr`` (its description, e.g. from ``describe_pass``) returns ``(output, scratch)``, the
    scratch ``nbytes_of(func)`` bytes; its call sites take the output."""

    @tvm.transform.module_pass(opt_level=0, name=name)
    def add_scratch(mod, _ctx):
        mod = relay.transform.InferType()(mod)
        changed = []
        for gvar, func in offloaded_functions(mod, target):
            if attr in func.attrs and not isinstance(func.body, relay.Tuple):  # not twice (partitioned before)
                mod[gvar] = with_output(func, [func.body, scratch_tensor(func.params[0], nbytes_of(func))])
                changed.append(gvar)
        return take_first_outputs(mod, changed)

    return add_scratch
