"""Finding a backend for the Relax engine, and its C library.

A backend package (``uma_vanilla``) takes part by holding a module ``relax_patterns`` that
defines ``TARGET`` (the target name, as in ``--target``), ``TARGET_ATTRS`` ({name: default}),
``patterns(attrs)`` (``FuseOpsByPattern`` entries, largest first), ``why_not_offloaded(conv,
attrs)`` (why a conv stays on the CPU, for the report) and ``kernel_call(match, attrs)`` (the
call of its C API computing one match), and ``gen_includes`` (its C headers, as for Relay).

The package's ``__init__`` imports its Relay backend (``tvm.relay``, absent from apache-tvm):
it is not run; only ``relax_patterns`` and what that imports from the package are.

Where backends are looked for, first found wins: folders named with
``--experimental-tvm-extension``, then those in TVM_EXTENSION_PATH / TVMC_EXTENSION_DIR /
UMA_BACKENDS, then ``sys.path`` (PYTHONPATH, installed packages).  Each such folder holds
backend packages (``uma_vanilla/`` is such a folder: it holds the package ``uma_vanilla``).
"""
import importlib
import importlib.machinery
import importlib.util
import os
import pkgutil
import re
import sys
from pathlib import Path
from typing import Iterable, List

MODULE = "relax_patterns"
ENV_VARS = ("TVM_EXTENSION_PATH", "TVMC_EXTENSION_DIR", "UMA_BACKENDS")  # as the Relay engine's discovery
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)


class UserError(Exception):
    """A mistake the user can fix: printed as one line, exit status 1."""


def _folders(paths: Iterable[str]) -> List[Path]:
    explicit = [Path(p).resolve() for p in paths] + [
        Path(p).resolve() for v in ENV_VARS for p in filter(None, os.environ.get(v, "").split(os.pathsep))]
    for folder in explicit:
        if not folder.is_dir():
            raise UserError(f"extension path '{folder}' does not exist or is not a folder")
    here = Path.cwd().resolve()  # `python -m` puts it on sys.path: nothing is taken from there unnamed
    return explicit + [Path(p) for p in sys.path if p and Path(p).is_dir() and Path(p).resolve() != here]


def _load(package_dir: Path):
    """``<package>.relax_patterns``, without running the package's ``__init__``."""
    name = package_dir.name
    package = sys.modules.get(name)
    if package is None:
        spec = importlib.machinery.ModuleSpec(name, None, origin=str(package_dir / "__init__.py"), is_package=True)
        spec.submodule_search_locations = [str(package_dir)]
        sys.modules[name] = package = importlib.util.module_from_spec(spec)
    elif str(package_dir) not in list(getattr(package, "__path__", [])):
        return None  # another package of that name came first
    return importlib.import_module(f"{name}.{MODULE}")


def find(target: str, paths: Iterable[str] = ()):
    """The ``relax_patterns`` module of the backend named ``target``; UserError when none is."""
    seen = []
    for folder in _folders(paths):
        for info in pkgutil.iter_modules([str(folder)]):
            package_dir = folder / info.name
            if not (info.ispkg and (package_dir / f"{MODULE}.py").is_file()):
                continue
            try:
                module = _load(package_dir)
            except Exception as exc:  # a backend's own code may fail in any way
                raise UserError(f"backend {info.name} failed to import its {MODULE}: {type(exc).__name__}: {exc}")
            if module is None:
                continue
            seen.append(module.TARGET)
            if module.TARGET == target:
                return module
    found = ", ".join(dict.fromkeys(seen)) or "none"
    raise UserError(f"unknown target '{target}' for the Relax engine (backends with a {MODULE}.py found: {found})")


def c_library(backend) -> tuple:
    """(sources, include folders) of the backend's C library: every ``.c`` in the folder of each
    header its ``gen_includes()`` names, as the Relay engine packages them."""
    headers = [Path(p) for p in _INCLUDE.findall(backend.gen_includes()) if Path(p).is_absolute()]
    folders = list(dict.fromkeys(h.parent for h in headers))
    sources = [c for folder in folders for c in sorted(folder.glob("*.c"))]
    return sources, folders
