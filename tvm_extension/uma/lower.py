"""Relay -> TIR for offloaded functions, as native UMA's lowering would do it.

Two steps, both in Python because this TVM build lacks UMA's C++ half:

* after partitioning, constants (weights bound by TVMC's frontends) are lifted out of
  every offloaded function into parameters, so the function's TE graph has only
  placeholders and the weights travel through the AOT constant pool;
* each offloaded function is lowered through TE to TIR and the backend's TIR passes run
  at the phases it registered them for.
"""
import logging

import tvm
from tvm import relay, te, tir
from tvm.relay.backend.contrib.uma.api.utils import PassPhase
from tvm.relay.expr_functor import ExprMutator

from .config import config_of

_TIR_PHASE = {
    PassPhase.TIR_PHASE_0: 0,
    PassPhase.TIR_PHASE_1: 1,
    PassPhase.TIR_PHASE_2: 2,
    PassPhase.TIR_PHASE_3: 3,
}


class _ConstantsToParams(ExprMutator):
    def __init__(self):
        super().__init__()
        self.constants, self.params = [], []

    def visit_constant(self, const):
        param = relay.var(f"weight{len(self.params)}", type_annotation=const.checked_type)
        self.constants.append(const)
        self.params.append(param)
        return param


def _offloaded(func, target_name: str) -> bool:
    return (
        isinstance(func, relay.Function) and func.attrs is not None
        and "Compiler" in func.attrs and func.attrs["Compiler"] == target_name
    )


def offloaded_functions(mod: tvm.IRModule, target_name: str):
    """(global var, function) of every function of ``mod`` offloaded to ``target_name``."""
    return [(gvar, func) for gvar, func in mod.functions.items() if _offloaded(func, target_name)]


def _computes_nothing(func: relay.Function) -> bool:
    calls = []
    relay.analysis.post_order_visit(func.body, lambda e: calls.append(e) if isinstance(e, relay.Call) else None)
    return not calls


def _inline_empty_functions(mod: tvm.IRModule, target_name: str) -> tvm.IRModule:
    """Regions holding no operator (tuple plumbing left by MergeCompilerRegions) go back inline."""
    empty = {g: f for g, f in offloaded_functions(mod, target_name) if _computes_nothing(f)}
    if not empty:
        return mod

    class _Inline(ExprMutator):
        def visit_call(self, call):
            new_call = super().visit_call(call)
            if isinstance(new_call.op, relay.GlobalVar) and new_call.op in empty:
                func = empty[new_call.op]
                return relay.bind(func.body, dict(zip(func.params, new_call.args)))
            return new_call

    functions = {g: (_Inline().visit(f) if isinstance(f, relay.Function) else f)
                 for g, f in mod.functions.items() if g not in empty}
    return relay.transform.InferType()(tvm.IRModule(functions, type_definitions=mod.type_definitions))


def lift_constants_pass(target_name: str) -> tvm.transform.Pass:
    """After partitioning: drop empty regions, make every constant of an offloaded function a parameter."""

    @tvm.transform.module_pass(opt_level=0, name=f"{target_name}.LiftConstants")
    def lift(mod, _ctx):
        mod = _inline_empty_functions(relay.transform.InferType()(mod), target_name)
        lifted = {}
        for gvar, func in offloaded_functions(mod, target_name):
            mutator = _ConstantsToParams()
            body = mutator.visit(func.body)
            if mutator.params:
                new_func = relay.Function(
                    list(func.params) + mutator.params, body, func.ret_type, func.type_params, func.attrs
                )
                lifted[gvar] = (new_func, mutator.constants)
        if not lifted:
            return mod

        class _PassWeightsAtCallSites(ExprMutator):
            def visit_call(self, call):
                new_call = super().visit_call(call)
                if isinstance(new_call.op, relay.GlobalVar) and new_call.op in lifted:
                    args = list(new_call.args) + lifted[new_call.op][1]
                    return relay.Call(new_call.op, args, new_call.attrs, new_call.type_args, new_call.span)
                return new_call

        for gvar, (new_func, _) in lifted.items():
            mod[gvar] = new_func
        for gvar, func in list(mod.functions.items()):
            if gvar not in lifted and isinstance(func, relay.Function):
                mod[gvar] = _PassWeightsAtCallSites().visit(func)
        return relay.transform.InferType()(mod)

    return lift


def lower_to_tir(backend, func: relay.Function) -> tvm.IRModule:
    """Lower one offloaded Relay function to a TIR module with the backend's TIR passes applied."""
    symbol = str(func.attrs["global_symbol"])
    # Strategies a backend registers dispatch on its name as a target key.  TOPI's
    # "not optimized for this platform" warning is noise here: the backend's TIR pass
    # replaces the generic schedule.
    strategy_log = logging.getLogger("strategy")
    level = strategy_log.level
    strategy_log.setLevel(logging.ERROR)
    try:
        with tvm.target.Target(f"c -keys={backend.target_name},cpu"):
            cached = tvm._ffi.get_global_func("relay.backend.LowerToTE")(func)
    finally:
        strategy_log.setLevel(level)
    prim_func = te.create_prim_func(list(cached.inputs) + list(cached.outputs))
    prim_func = prim_func.with_attr("global_symbol", symbol)
    prim_func = prim_func.with_attr("relay_attrs", func.attrs)
    attrs = config_of(backend).as_dict()  # in the IR: a TIR pass reads them from its PrimFunc
    prim_func = prim_func.with_attr("target_attrs", {k: str(v) for k, v in attrs.items()})
    return tvm.IRModule({symbol: prim_func})


def tir_lower_passes(backend):
    """The ``tir.add_lower_pass`` list for the backend's registered TIR passes."""
    return [(_TIR_PHASE[phase], tir_pass) for phase, tir_pass in backend._relay_to_tir._tir_passes]
