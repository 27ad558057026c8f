"""What went where: operators offloaded to a backend, and those left on the CPU with the reason.

A backend may explain why an operator its patterns could take stayed on the CPU by
defining ``rejection_reason(call) -> str | None``; otherwise the reason is "pattern did
not match".
"""
import collections
from typing import Set

import tvm
from tvm import relay
from tvm.relay.dataflow_pattern import AltPattern, CallPattern, ExprPattern

from tvm_extension.api.offload_report import OffloadReport


def pattern_ops(backend) -> Set[str]:
    """Names of the operators the backend's patterns are rooted at or contain."""
    names = set()

    def visit(pattern):
        if isinstance(pattern, AltPattern):
            visit(pattern.left)
            visit(pattern.right)
        elif isinstance(pattern, CallPattern):
            if isinstance(pattern.op, ExprPattern) and isinstance(pattern.op.expr, tvm.ir.Op):
                names.add(pattern.op.expr.name)
            for arg in pattern.args:
                visit(arg)

    for entry in backend._relay_to_relay._patterns:
        visit(entry[1])
    return names


def _op_calls(expr):
    calls = []
    relay.analysis.post_order_visit(
        expr, lambda e: calls.append(e) if isinstance(e, relay.Call) and isinstance(e.op, tvm.ir.Op) else None
    )
    return calls


def _explain(explain, call) -> str:
    if explain is None:
        return "pattern did not match"
    try:
        return explain(call)
    except Exception as exc:  # the backend's own code: the report must not stop the compile
        return f"rejection_reason raised {type(exc).__name__}: {exc}"


def offload_report(backend, mod: tvm.IRModule, raised=None, refused=None) -> OffloadReport:
    """Count, in a partitioned module, what runs on ``backend`` and what stays on the CPU.

    ``partition`` leaves the report of the module as partitioned (before the backend's
    post-partitioning passes rewrite the offloaded functions) in ``backend.offload_report``;
    ``raised`` and ``refused`` are its (op, reason) counts of matches it did not take.
    """
    name = backend.target_name
    report = OffloadReport(name, raised=collections.Counter(raised or {}),
                           not_offloaded=collections.Counter(refused or {}))
    candidates = pattern_ops(backend)
    explain = getattr(backend, "rejection_reason", None)
    mod = relay.transform.InferType()(mod)
    for gvar, func in mod.functions.items():
        if not isinstance(func, relay.Function):
            continue
        compiler = func.attrs["Compiler"] if func.attrs and "Compiler" in func.attrs else None
        if compiler == name:
            report.functions += 1
            report.offloaded.update(call.op.name for call in _op_calls(func.body))
        elif compiler is None:
            for call in _op_calls(func.body):
                report.on_cpu[call.op.name] += 1
                if call.op.name in candidates:
                    why = _explain(explain, call)
                    if why:
                        report.not_offloaded[(call.op.name, why)] += 1
    return report
