"""TIR for calling a backend's C API, without Relay (a TIR pass may run under another engine)."""
from tvm import tir


def status_checked(call: tir.PrimExpr, name: str = "status") -> tir.Stmt:
    """A function body running ``call`` and returning its status when non-zero: the executor then
    stops the inference instead of returning wrong numbers."""
    code = tir.Var(name, "int32")
    return tir.LetStmt(code, call, tir.IfThenElse(code != 0, tir.Evaluate(tir.ret(code)), None))


def named_scratch(func: tir.PrimFunc, name: str = "scratch"):
    """(``func`` with its last parameter renamed ``name``, that parameter's buffer).

    The last output of an offloaded function given a scratch output (``kit.workspace``) is named
    after the stand-in operator TVM lowered (``T_cast``); the C a hardware team reads should say
    what it is.  The body is the caller's to replace."""
    old = func.params[-1]
    buffer = func.buffer_map[old]
    param = tir.Var(name, old.type_annotation)
    renamed = tir.decl_buffer(buffer.shape, buffer.dtype, name, data=tir.Var(name, buffer.data.type_annotation))
    buffers = {p: func.buffer_map[p] for p in func.params[:-1]}
    buffers[param] = renamed
    return tir.PrimFunc([*func.params[:-1], param], func.body, func.ret_type, buffers, func.attrs), renamed
