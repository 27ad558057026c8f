"""TIR -> C for offloaded functions, plus the backend's C library.

TVM's ``c`` target prints each lowered function with the unpacked calling convention
the AOT executor uses; the backend's ``includes`` text is put in front.

A backend names its C library by including its header by absolute path (the path of the
backend's own checkout or installed package).  That must never reach the output, so the
include is rewritten to the bare file name; ``c_library`` tells the packaging stage which
files go beside the generated code (``mlf`` copies them once into the MLF).
"""
import logging
import re
from pathlib import Path
from typing import Dict, List, Optional, Union

import tvm
from tvm import relay
from tvm.relay.backend import Executor

from tvm_extension.api import stages

from . import lower
from .config import config_of, current

_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)
_HEADER_SUFFIXES = (".h", ".hpp")


def _includes_text(backend) -> str:
    """The text of the backend's own ``includes`` hook (upstream's ``_register_codegen``; kept on
    the backend by ``compat``), else of the global function upstream registers for its target."""
    hook = getattr(getattr(backend, "_tir_to_runtime", None), "includes", None)
    if hook is None:
        hook = tvm.get_global_func(f"relay.ext.uma.codegen_c_includes_{backend.target_name}", allow_missing=True)
    return hook() if hook is not None else ""


def _absolute_includes(text: str) -> List[Path]:
    paths = [Path(m) for m in _INCLUDE.findall(text) if Path(m).is_absolute()]
    for path in paths:
        if not path.is_file():
            raise FileNotFoundError(f"included file {path} does not exist")
    return paths


def backend_includes(backend) -> str:
    """The backend's includes for one offloaded function's C: absolute includes of headers
    rewritten to the bare file name, those of sources (upstream's tutorial includes its
    ``.cc`` kernel) left out: each source is compiled once (``c_library``), and TVM declares
    the functions the generated code calls."""
    text = _includes_text(backend)
    for path in _absolute_includes(text):
        if path.suffix in _HEADER_SUFFIXES:
            text = text.replace(f'"{path}"', f'"{path.name}"')
        else:
            text = re.sub(rf'^\s*#\s*include\s+"{re.escape(str(path))}".*$',
                          f"/* {path.name}: compiled once, in {_sources_unit(backend)} */", text, flags=re.MULTILINE)
    return text


def _sources_unit(backend) -> str:
    return f"{backend.target_name}_sources.c"


def c_library(backend) -> Dict[str, Union[Path, str]]:
    """What an MLF needs beside code offloaded to ``backend``: {"include/NAME" | "src/NAME": file or text}.

    An included header goes to ``include/`` with its folder's other headers, and that folder's
    ``.c`` sources go to ``src/``.  An included source goes to ``include/``, and one generated
    unit in ``src/`` includes it, so it is compiled once however many functions call it.
    A source with extra compiler flags gets ``src/NAME.cflags`` beside it (``_source_flags``).
    """
    files: Dict[str, Union[Path, str]] = {}
    sources = []
    for path in _absolute_includes(_includes_text(backend)):
        files[f"include/{path.name}"] = path
        if path.suffix not in _HEADER_SUFFIXES:
            sources.append(path.name)
            continue
        for file in sorted(path.parent.iterdir()):
            if file.is_file() and file.suffix in _HEADER_SUFFIXES + (".c",):
                files[f"{'src' if file.suffix == '.c' else 'include'}/{file.name}"] = file
    if sources:
        files[f"src/{_sources_unit(backend)}"] = "".join(f'#include "{name}"\n' for name in sources)
    for relative in [r for r in files if r.startswith("src/")]:
        flags = _source_flags(backend, files[relative])
        if flags:
            files[relative[:-len(".c")] + ".cflags"] = flags + "\n"
    return files


def _source_flags(backend, source: Union[Path, str]) -> str:
    """Extra compiler flags of one library source: its library's own (a ``NAME.cflags`` file
    beside ``NAME.c``, e.g. ``-O3``), then the user's (the backend's ``cflags`` target
    attribute, e.g. ``--target-vanilla_accelerator-cflags=-march=native``)."""
    own = source.with_suffix(".cflags") if isinstance(source, Path) else None
    attrs = config_of(backend).as_dict()
    parts = [own.read_text().strip() if own is not None and own.is_file() else "", str(attrs.get("cflags", "")).strip()]
    return " ".join(p for p in parts if p)


class BackendFailure(Exception):
    """A backend's own code raised while TVM was building; ``str`` is one line naming it."""


def backend_failure(exc: BaseException) -> Optional[str]:
    """The one-line message of a BackendFailure inside ``exc`` (TVM wraps exceptions raised in
    codegen callbacks, keeping the original as the cause or only its text), else None."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, BackendFailure):
            return str(exc)
        match = re.search(rf"{BackendFailure.__name__}: (.+)", str(exc))
        if match:
            return match.group(1).strip()
        exc = exc.__cause__ or exc.__context__
    return None


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
        raise failure from exc


def _compile_function(backend, func) -> tvm.runtime.Module:
    symbol = str(func.attrs["global_symbol"])
    config = config_of(backend)
    # Offloaded functions of the same shape and attributes print the same C but for their name
    # (everything but the name counts: attributes may carry parameters, e.g. quantization).
    running = current()
    cache = running.sources if running is not None else {}
    key = (config, tvm.ir.structural_hash(func.with_attr("global_symbol", "")))
    if key not in cache:
        with stages.stage(f"generating code for {symbol}", logging.DEBUG):
            cache[key] = (symbol, _print_c(backend, func))
    cached_symbol, source = cache[key]
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
        if stages.logger.isEnabledFor(logging.DEBUG):  # tvmc -vv: the loops around the kernel calls
            (gvar,) = ir_mod.get_global_vars()
            stages.logger.debug("TIR of %s after %s's passes:\n%s", gvar.name_hint, backend.target_name,
                                tvm.lower(ir_mod)[gvar].script())
        built = tvm.build(ir_mod, target="c")
    return f"// offloaded to {backend.target_name}\n{backend_includes(backend)}\n{built.get_source()}"
