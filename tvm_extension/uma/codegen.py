"""TIR -> C for offloaded functions, plus the backend's C library.

TVM's ``c`` target prints each lowered function with the unpacked calling convention
the AOT executor uses; the backend's ``includes`` text is put in front.

A backend names its C library by including its header by absolute path (the path of the
backend's own checkout or installed package).  That must never reach the output, so the
include is rewritten to the bare file name and the header's folder is remembered as a
*C library*: its ``.h`` and ``.c`` files are packaged once into the MLF by ``mlf``.
"""
import re
from pathlib import Path
from typing import Dict, List

import tvm
from tvm import relay
from tvm.relay.backend import Executor

from . import lower

_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)

# header file name -> folder of the C library it belongs to (filled while compiling)
C_LIBRARIES: Dict[str, Path] = {}


def c_library_files(folder: Path) -> List[Path]:
    """The sources and headers of a C library folder, in a stable order."""
    return sorted(p for p in folder.iterdir() if p.suffix in (".c", ".h") and p.is_file())


def relocate_includes(includes: str) -> str:
    """Rewrite absolute includes to bare names and remember their libraries."""

    def rewrite(match):
        path = Path(match.group(1))
        if not path.is_absolute():
            return match.group(0)
        if not path.is_file():
            raise FileNotFoundError(f"included file {path} does not exist")
        existing = C_LIBRARIES.get(path.name)
        if existing is not None and existing != path.parent:
            raise ValueError(f"two C libraries provide '{path.name}': {existing} and {path.parent}")
        C_LIBRARIES[path.name] = path.parent
        return match.group(0).replace(match.group(1), path.name)

    return _INCLUDE.sub(rewrite, includes)


def backend_includes(backend) -> str:
    """The text of the backend's ``includes`` hook (upstream's ``_register_codegen``)."""
    hook = tvm.get_global_func(f"relay.ext.uma.codegen_c_includes_{backend.target_name}", allow_missing=True)
    return relocate_includes(hook()) if hook is not None else ""


# (backend, target attributes, function structure) -> (symbol, C source): offloaded functions
# of the same shape and attributes print the same C but for their name.
_SOURCES = {}


class BackendFailure(Exception):
    """A backend's own code raised while TVM was building; ``str`` is one line naming it."""


# The last BackendFailure, for front ends that only see TVM's wrapped error.
LAST_FAILURE = []


def _operators(func) -> str:
    names = []
    relay.analysis.post_order_visit(
        func, lambda e: names.append(e.op.name) if isinstance(e, relay.Call) and isinstance(e.op, tvm.ir.Op) else None
    )
    return ", ".join(dict.fromkeys(names)) or "no operator"


def compile_function(backend, func) -> tvm.runtime.Module:
    """``relay.ext.<target>``: one partitioned Relay function -> one C source module."""
    try:
        return _compile_function(backend, func)
    except Exception as exc:
        failure = BackendFailure(
            f"backend '{backend.target_name}' failed to generate code for {func.attrs['global_symbol']} "
            f"({_operators(func)}): {type(exc).__name__}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}"
        )
        LAST_FAILURE[:] = [failure]
        raise failure from exc


def _compile_function(backend, func) -> tvm.runtime.Module:
    symbol = str(func.attrs["global_symbol"])
    attrs = tuple(sorted((getattr(backend, "target_attrs", None) or backend._target_attrs).items()))
    # Everything but the name: attributes may carry parameters (e.g. quantization).
    key = (id(backend), attrs, tvm.ir.structural_hash(func.with_attr("global_symbol", "")))
    if key not in _SOURCES:
        _SOURCES[key] = (symbol, _print_c(backend, func))
    cached_symbol, source = _SOURCES[key]
    source = re.sub(rf"\b{re.escape(cached_symbol)}\b", symbol, source)
    create = tvm.get_global_func("runtime.CSourceModuleCreate")
    return create(source, "c", [symbol], [])


def _print_c(backend, func) -> str:
    ir_mod = lower.lower_to_tir(backend, func)
    # The AOT executor calls offloaded functions with plain pointers (unpacked API).
    ir_mod = ir_mod.with_attr("executor", Executor("aot", {"unpacked-api": True, "interface-api": "c"}))
    outer = tvm.transform.PassContext.current()
    config = dict(outer.config)
    config["tir.disable_vectorize"] = True  # gcc rejects TVM's vector types in C
    config["tir.add_lower_pass"] = list(config.get("tir.add_lower_pass", [])) + lower.tir_lower_passes(backend)
    # The outer context's instruments are not passed on: entering them a second time
    # crashes TVM (tvmc --print-pass-times).
    with tvm.transform.PassContext(
        opt_level=outer.opt_level,
        config=config,
        required_pass=outer.required_pass,
        disabled_pass=outer.disabled_pass,
    ):
        built = tvm.build(ir_mod, target="c")
    return f"// offloaded to {backend.target_name}\n{backend_includes(backend)}\n{built.get_source()}"
