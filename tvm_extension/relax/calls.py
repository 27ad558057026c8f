"""TIR for calling a backend's C API on the Relax engine (``kit.calls`` is the Relay engine's).

Imported by backends' ``relax_patterns`` only: a module the engine imports before ``tvm`` would be
half-initialised when ``import tvm`` loads the backends' entry points, which import this.
"""
from typing import Callable

import tvm
from tvm import tirx


def checked_program(target: str, build: Callable[[Callable], tirx.Stmt]) -> tirx.Stmt:
    """The program ``build(extern)`` makes, where ``extern(name, *args)`` calls one C entry of the
    backend through its linked symbol (``<name>_linked``): after a non-zero status no further call
    is made, and the inference fails at the program's end.  (An assertion after each call would
    stop at once, but LLVM then unrolls every loop around the calls: minutes to compile a network
    of many tiles.)"""
    status = tirx.decl_buffer((1,), "int32", "status", scope="local")
    ok = tirx.BufferLoad(status, [0]) == 0
    extern = lambda name, *args: tirx.IfThenElse(
        ok, tirx.BufferStore(status, tirx.call_extern("int32", name + "_linked", *args), [0]), None)
    message = tvm.ir.StringImm(f"{target}: a call refused its arguments (a non-zero status; the calls after it "
                               "were skipped)")
    return tirx.SeqStmt([tirx.AllocBuffer(status), tirx.BufferStore(status, tirx.const(0, "int32"), [0]), build(extern),
                         tirx.AssertStmt(ok, tvm.ir.StringImm("RuntimeError"), [message])])
