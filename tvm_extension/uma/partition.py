"""UMA's partitioning, accepting what users have and fast on real networks.

``UMABackend.partition`` runs the same phases as upstream's ``UMAPartitioner.partition``
(bind params, PRE_PARTITIONING passes, MergeComposite, annotate/partition,
POST_PARTITIONING_0, Defunctionalization, POST_PARTITIONING_1).  One difference in how:
for a backend that does not merge regions (``merge_compiler_regions=False``), every
matched composite becomes its own offloaded function directly, in one pass.  TVM's
PartitionGraph re-infers the types of the whole module once per region, which on a
79-conv network cost longer than the rest of the partitioning together.  And one addition:
matches holding a ``qnn.requantize`` marked with TFLite's rounding (``tvmc --tflite-exact``)
go back to the CPU unless the backend declares ``computes_tflite_rounding = True``.
"""
import collections
import itertools
import re

import tvm
from tvm import relay
from tvm.relay.build_module import bind_params_by_name
from tvm.relay.backend.contrib.uma.api.utils import PassPhase
from tvm.relay.expr_functor import ExprMutator

from . import lower  # not its names: lower imports UMA, whose import installs this module
from .report import offload_report


def _op_name(expr) -> str:
    return expr.op.name if isinstance(expr, relay.Call) and isinstance(expr.op, tvm.ir.Op) else type(expr).__name__


def _guarded(name, predicate, raised):
    """A predicate that raises does not stop the compile: its match is refused (the operators
    stay on the CPU, or go to a later pattern) and ``raised`` collects why, for the report."""

    def check(expr):
        try:
            return bool(predicate(expr))
        except Exception as exc:  # the backend's own code, on a graph it did not expect
            raised[(_op_name(expr), f"pattern '{name}' raised {type(exc).__name__}: {exc}")] += 1
            return False

    return check


def _pattern_table(partitioner, raised):
    """The backend's patterns, with predicates that cannot stop the compile."""
    return [(entry[0], entry[1], _guarded(entry[0], entry[2], raised)) if len(entry) == 3 else entry
            for entry in partitioner._pattern_table()]


def describe_partition_failure(backend, exc) -> str:
    text = str(exc).strip().splitlines()
    return f"backend '{backend.target_name}' failed while partitioning: {text[-1] if text else type(exc).__name__}"


def _passes(partitioner, phase):
    return [p for ph, p in partitioner._relay_passes if ph == phase]


def _c_identifier(name: str) -> str:
    return re.sub(r"[^0-9a-zA-Z_]", "_", name)


class _OutlineComposites(ExprMutator):
    """Each call of a ``Composite="<target>.*"`` function becomes a call of a new global function."""

    def __init__(self, mod, target_name, mod_name):
        super().__init__()
        self.mod, self.target_name = mod, target_name
        self.prefix = f"tvmgen_{_c_identifier(mod_name)}_{target_name}_main_"
        self.counter = itertools.count()

    def visit_call(self, call):
        new_call = super().visit_call(call)
        func = new_call.op
        if not (isinstance(func, relay.Function) and func.attrs and "Composite" in func.attrs):
            return new_call
        if not str(func.attrs["Composite"]).startswith(self.target_name + "."):
            return new_call
        index = next(self.counter)
        params = [relay.var(f"{self.target_name}_{index}_i{i}", type_annotation=a.checked_type)
                  for i, a in enumerate(call.args)]
        body = relay.bind(func.body, dict(zip(func.params, params)))  # the composite, inlined
        outlined = relay.Function(params, body, call.checked_type)
        name = f"{self.prefix}{index}"
        attrs = (("Primitive", 1), ("Inline", 1), ("Compiler", self.target_name), ("global_symbol", name),
                 ("Pattern", str(func.attrs["Composite"])))  # TIR passes read it from relay_attrs
        for key, value in attrs:
            outlined = outlined.with_attr(key, value)
        gvar = relay.GlobalVar(name)
        self.mod[gvar] = outlined
        return relay.Call(gvar, new_call.args, span=call.span)


class _InlineTFLiteRounded(ExprMutator):
    """Matches of a backend that does not compute TFLite's rounding, put back as plain operators
    when they hold a ``qnn.requantize`` marked ``rounding="TFLITE"`` (``tvmc --tflite-exact``):
    the CPU then computes them exactly, where the backend's kernel would round as TVM does."""

    REASON = "the model asks for TFLite's rounding, which this backend does not compute"

    def __init__(self, target_name):
        super().__init__()
        self.target_name, self.refused = target_name, collections.Counter()

    def visit_call(self, call):
        new_call = super().visit_call(call)
        func = new_call.op
        if not (isinstance(func, relay.Function) and func.attrs and "Composite" in func.attrs and
                str(func.attrs["Composite"]).startswith(self.target_name + ".")):
            return new_call
        ops = []
        relay.analysis.post_order_visit(func.body, lambda e: ops.append(e) if isinstance(e, relay.Call) and
                                        isinstance(e.op, tvm.ir.Op) else None)
        marked = [op for op in ops if op.op.name == "qnn.requantize" and str(op.attrs.rounding) == "TFLITE"]
        if not marked:
            return new_call
        self.refused[("qnn.requantize", self.REASON)] += len(marked)
        return relay.bind(func.body, dict(zip(func.params, new_call.args)))


def _keep_tflite_rounding_on_cpu(backend, mod, refused):
    if getattr(backend, "computes_tflite_rounding", False):
        return mod
    inline = _InlineTFLiteRounded(backend.target_name)
    mod["main"] = inline.visit(mod["main"])
    refused.update(inline.refused)
    return relay.transform.InferType()(mod)


def outline_composites(mod: tvm.IRModule, target_name: str, mod_name: str = "default") -> tvm.IRModule:
    mod = relay.transform.InferType()(mod)
    outliner = _OutlineComposites(mod, target_name, mod_name)
    mod["main"] = outliner.visit(mod["main"])
    return relay.transform.InferType()(mod)


def outlined(backend, mod: tvm.IRModule, params=None, mod_name: str = "default"):
    """The first phases of ``partition``: (the module with each match outlined into a function
    for the backend, its operators as the model had them; the (op, reason) counts of matches the
    backend's checks raised on; those it refused).  What the offload report and its drawing read."""
    partitioner = backend._relay_to_relay
    if params:
        mod["main"] = bind_params_by_name(mod["main"], params)
    raised = collections.Counter()
    first = [relay.transform.InferType()] + _passes(partitioner, PassPhase.PRE_PARTITIONING)
    first.append(relay.transform.MergeComposite(_pattern_table(partitioner, raised)))
    refused = collections.Counter()
    mod = _keep_tflite_rounding_on_cpu(backend, tvm.transform.Sequential(first)(mod), refused)
    if partitioner.merge_compiler_regions:
        mod = tvm.transform.Sequential([
            relay.transform.AnnotateTarget(backend.target_name),
            relay.transform.MergeCompilerRegions(),
            relay.transform.PartitionGraph(mod_name),
        ])(mod)
    else:
        mod = outline_composites(mod, backend.target_name, mod_name)
    return mod, raised, refused


def partition(backend, mod: tvm.IRModule, params=None, mod_name: str = "default") -> tvm.IRModule:
    """The phases of upstream's UMAPartitioner.partition (see the module docstring).

    The framework's own passes run around the backend's: type inference first (pattern
    predicates look at types), and the weights of offloaded functions lifted into parameters
    last.  Offloaded functions are named ``tvmgen_<mod_name>_<target>_main_<n>``.
    """
    partitioner = backend._relay_to_relay
    mod, raised, refused = outlined(backend, mod, params, mod_name)
    backend.offload_report = offload_report(backend, mod, raised, refused)
    mod = tvm.transform.Sequential(_passes(partitioner, PassPhase.POST_PARTITIONING_0))(mod)
    for gvar, func in mod.functions.items():
        mod.update_func(gvar, relay.transform.Defunctionalization(func, mod))
    last = _passes(partitioner, PassPhase.POST_PARTITIONING_1) + [lower.lift_constants_pass(backend.target_name)]
    return tvm.transform.Sequential(last)(mod)
