"""TIR for calling a backend's C API, without Relay (a TIR pass may run under another engine)."""
from tvm import tir


def status_checked(call: tir.PrimExpr, name: str = "status") -> tir.Stmt:
    """A function body running ``call`` and returning its status when non-zero: the executor then
    stops the inference instead of returning wrong numbers."""
    code = tir.Var(name, "int32")
    return tir.LetStmt(code, call, tir.IfThenElse(code != 0, tir.Evaluate(tir.ret(code)), None))
