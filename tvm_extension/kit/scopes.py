"""Scratchpad memory scopes: one TIR storage scope per partition of an accelerator's memory, with
its size registered as TVM's memory info (``tvm.info.mem.<scope>``), so that StorageRewrite
checks the buffers fit ("Allocation exceed bound of memory tag ...") and
LowerDeviceStorageAccessInfo turns pointers into offsets.

Memory infos are global functions of the process: the scope's name carries its size and each
distinct scope is registered once, so compiles with different sizes, one after the other or at
the same time in two threads, never see each other's.
"""
import threading

import tvm

_lock = threading.Lock()
_registered = set()  # scopes whose memory info TVM knows (process-wide, like TVM's registry)


def scratchpad_scope(name: str, size_bytes: int, unit_bits: int = 32) -> str:
    """``global.<name>_<size_bytes>``, registered with TVM as a memory of that many bytes
    addressed in ``unit_bits`` units."""
    scope = f"global.{name}_{int(size_bytes)}"
    with _lock:
        if scope not in _registered:
            def info(bits=8 * int(size_bytes), unit=unit_bits):
                return tvm.ir.make_node("MemoryInfo", unit_bits=unit, max_num_bits=bits, max_simd_bits=unit,
                                        head_address=None)

            tvm.register_func(f"tvm.info.mem.{scope}", info, override=True)
            _registered.add(scope)
    return scope
