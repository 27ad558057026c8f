"""Partition by the backend's patterns, then lower each match to one call of its C API.

``FuseOpsByPattern`` groups each match into a function marked ``Composite="<target>.<pattern>"``;
each call of such a function becomes a ``call_tir`` of a PrimFunc whose body is the backend's
``kernel_call`` (a ``call_extern`` of its C function, linked in by ``build``), its status checked:
a non-zero status fails the inference instead of returning wrong numbers; or a whole program of
calls the backend builds (Strawberry's DMA transfers and engine calls), checked by
``tvm_internals.checked_program``.  A backend whose kernel reads a constant in another form (weights in
its own layout, say) says so in ``pack_constants``: the constant is repacked here, once, at
compile time.  A fused function serves every call of its
form: the call's own constants (scales, zero points) come with it, to ``pack_constants`` and in
``Match.constants``.
"""
import collections
import dataclasses
import inspect
from typing import Dict, List, Optional

import numpy as np

import tvm
from tvm import relax, te

from tvm_extension.api.offload_report import OffloadReport

from . import tvm_internals as tir

CONV = "relax.nn.conv2d"


@dataclasses.dataclass
class Match:
    """One matched function, as ``kernel_call`` sees it."""

    pattern: str  # e.g. "vanilla_accelerator.conv2d_bias_relu"
    ops: Dict[str, relax.Call]  # {operator name: its call in the function}
    buffers: Dict[relax.Var, tir.Buffer]  # the function's parameters' buffers
    result: tir.Buffer
    func: relax.Function  # the matched function (``patterns.split`` names its parts)
    constants: Dict[relax.Var, np.ndarray] = dataclasses.field(default_factory=dict)  # the call's, as given

    def buffer(self, expr) -> tir.Buffer:
        """The buffer of a parameter of the function (an operand of one of ``ops``)."""
        return self.buffers[expr]

    def pointer(self, expr) -> tir.Expr:
        """The data pointer of a parameter's buffer; a null pointer for None (a left-out operand)."""
        return tir.pointer(None if expr is None else self.buffers[expr])


def _operators(func: relax.Function) -> Dict[str, relax.Call]:
    ops = {}
    relax.analysis.post_order_visit(
        func.body, lambda e: ops.setdefault(e.op.name, e) if isinstance(e, relax.Call) and isinstance(e.op, tvm.ir.Op) else None)
    return ops


@relax.expr_functor.mutator
class _Lower(relax.PyExprMutator):
    def __init__(self, mod, backend, attrs):
        super().__init__(mod)
        self.mod_, self.backend, self.attrs = mod, backend, attrs
        self.offloaded: List[str] = []  # the pattern of each call lowered
        self.matched: List[relax.Function] = []  # its function

    def _composite(self, call):
        if not isinstance(call.op, relax.GlobalVar):
            return None
        func = self.mod_[call.op]
        name = func.attrs.get("Composite") if isinstance(func, relax.Function) and func.attrs else None
        return func if name and str(name).startswith(f"{self.backend.TARGET}.") else None

    def visit_call_(self, call):
        call = super().visit_call_(call)
        func = self._composite(call)
        if func is None:
            return call
        pattern, ops = str(func.attrs["Composite"]), _operators(func)
        self.offloaded.append(pattern)
        self.matched.append(func)
        # {parameter: numpy function} of the constants the kernel reads repacked.
        constants = {p: tir.constant_array(a) for p, a in zip(func.params, call.args) if isinstance(a, tir.Constant)}
        packs = _packs(self.backend, func, constants, self.attrs)
        args = [relax.const(packs[param](constants[param])) if param in packs and param in constants
                else arg for param, arg in zip(func.params, call.args)]

        def body(ins, outs):
            match = Match(pattern, ops, dict(zip(func.params, ins)), outs[0], func, constants)
            call = self.backend.kernel_call(match, self.attrs)
            if tir.is_program(call):  # a whole program (DMA transfers, engine calls), checked by the backend
                return call
            # A call that needs scratch memory comes with the buffers to allocate for it: (status, buffers).
            status, scratch = call if isinstance(call, tuple) else (call, [])
            check = tir.checked(status, f"{self.backend.TARGET}: the kernel refused {pattern} (a non-zero status)")
            return tir.with_temporaries(scratch, check) if scratch else check

        def compute(*tensors):
            shape = [int(d) for d in func.ret_ty.shape]
            # The result's name, a variable in the C: "_result" keeps it from naming the backend's own
            # C function (pattern "my_npu.conv2d", function my_npu_conv2d).
            return te.extern(shape, list(tensors), body, dtype=str(func.ret_ty.dtype),
                             name=pattern.replace(".", "_") + "_result")

        return self.builder_.call_te(compute, *args, primfunc_name_hint=pattern.split(".")[-1])

    def transform(self):
        for gv, func in self.mod_.functions_items():
            if isinstance(func, relax.Function) and not (func.attrs and "Composite" in func.attrs):
                self.builder_.update_func(gv, self.visit_expr(func))
        return self.builder_.get()


def _op_names(expr) -> List[str]:
    """The operators an expression calls, named as the Relay engine's report names them (no
    ``relax.`` prefix); the calls of offloaded functions (``call_tir``) are not operators of the model."""
    names = []
    relax.analysis.post_order_visit(expr, lambda e: names.append(e.op.name.split(".", 1)[1]) if isinstance(
        e, relax.Call) and isinstance(e.op, tvm.ir.Op) and e.op.name != "relax.call_tir" else None)
    return names


def model_operators(mod: tvm.IRModule) -> collections.Counter:
    """The operators the model's functions call, named as ``_op_names`` names them, less those that
    compute from constants only (which folding removes): what the CPU runs as the model states it,
    counted before a rewrite (``--tflite-exact``, TVM's QNN arithmetic) spells it in other operators."""
    names = collections.Counter()
    for _, func in mod.functions_items():
        if not isinstance(func, relax.Function) or (func.attrs and "Composite" in func.attrs):
            continue
        constants = set()

        def constant(arg) -> bool:  # a variable bound to a constant's computation, a tuple of them, a literal
            if isinstance(arg, relax.Var):
                return arg in constants
            if isinstance(arg, relax.Tuple):
                return all(map(constant, arg.fields))
            return not isinstance(arg, relax.Call)

        for block in func.body.blocks:
            for binding in block.bindings:
                value = binding.value
                if not (isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op)) or value.op.name == "relax.call_tir":
                    continue
                if all(map(constant, value.args)):
                    constants.add(binding.var)
                else:
                    names[value.op.name.split(".", 1)[1]] += 1
    return names


def _convs(func) -> List[relax.Call]:
    convs = []
    relax.analysis.post_order_visit(
        func.body, lambda e: convs.append(e) if isinstance(e, relax.Call) and e.op == tvm.ir.Op.get(CONV) else None)
    return convs


def _packs(backend, func, constants, attrs) -> dict:
    """The backend's ``pack_constants(func, constants[, attrs])``: the compile's target attributes
    go to one that takes a third parameter (a backend written before they did takes two)."""
    pack = getattr(backend, "pack_constants", None)
    if pack is None:
        return {}
    return pack(func, constants, attrs) if len(inspect.signature(pack).parameters) >= 3 else pack(func, constants)


def _patterns(backend, attrs: dict, which) -> list:
    return [p for p in backend.patterns(attrs) if which is None or which(p.name)]


def matches(mod: tvm.IRModule, backend, attrs: dict, which=None) -> int:
    """How many matches the backend's patterns (``which``, as for ``offload``) find; nothing lowered."""
    fused = relax.transform.FuseOpsByPattern(_patterns(backend, attrs, which), bind_constants=False,
                                             annotate_codegen=False)(mod)
    composite = {gv for gv, f in fused.functions_items()
                 if isinstance(f, relax.Function) and f.attrs is not None and "Composite" in f.attrs}
    calls = []
    for gv, func in fused.functions_items():
        if isinstance(func, relax.Function) and gv not in composite:
            relax.analysis.post_order_visit(func.body, lambda e: calls.append(e) if isinstance(e, relax.Call)
                                            and isinstance(e.op, tvm.ir.GlobalVar) and e.op in composite else None)
    return len(calls)


def offload(mod: tvm.IRModule, backend, attrs: dict, which=None, earlier: Optional[OffloadReport] = None,
            operators: Optional[collections.Counter] = None):
    """(module with the backend's matches lowered to calls of its C API, the offload report,
    ``OffloadReport``).  ``which(name)``: the backend's patterns this pass takes (all by default);
    ``earlier``: the report of an earlier pass over the model, which this one continues (the
    functions of both counted, what stays on the CPU as this pass leaves it); ``operators``: the
    model's operators (``model_operators``) before a rewrite, of which what stays on the CPU is
    what this pass does not offload."""
    mod = relax.transform.FuseOpsByPattern(_patterns(backend, attrs, which), bind_constants=False,
                                           annotate_codegen=False)(mod)
    lowering = _Lower(mod, backend, attrs)
    mod = relax.transform.DeadCodeElimination()(lowering.transform())
    report = earlier or OffloadReport(backend.TARGET)
    report.functions += len(lowering.offloaded)
    report.patterns.update(p.split(".", 1)[1] for p in lowering.offloaded)
    report.on_cpu, report.not_offloaded = collections.Counter(operators or {}), collections.Counter()
    for func in lowering.matched:
        report.offloaded.update(_op_names(func.body))
        if operators is not None:
            report.on_cpu.subtract(_op_names(func.body))
    report.on_cpu = +report.on_cpu
    for _, func in mod.functions_items():
        if isinstance(func, relax.Function):
            if operators is None:
                report.on_cpu.update(_op_names(func.body))
            for conv in _convs(func):
                report.not_offloaded[("nn.conv2d", backend.why_not_offloaded(conv, attrs) or "pattern did not match")] += 1
    return mod, report
