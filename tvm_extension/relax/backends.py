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
UMA_BACKENDS, then the backends that registered themselves at ``import tvm`` (``register``, from
their ``[project.entry-points."tvm.backends"]``), then ``sys.path`` (PYTHONPATH, installed
packages).  Each such folder holds backend packages (``uma_vanilla/`` is such a folder: it holds
the package ``uma_vanilla``).
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


# {target: relax_patterns module} of the backends registered at `import tvm` (apache-tvm calls each
# "tvm.backends" entry point then; TVM_DEVICE_BACKEND_AUTOLOAD=0 turns that off).
_REGISTERED = {}


def register(module) -> None:
    """A backend's ``tvm.backends`` entry point calls this with its ``relax_patterns`` module: the
    engine finds it with no option, and a Relax pipeline of the user's own finds its patterns in
    TVM's registry (``tvm.relax.backend.get_patterns_with_prefix("<target>")``; compiling the
    matches into C calls is this engine's: ``tvmc compile``)."""
    from tvm.relax.backend.pattern_registry import register_patterns  # pylint: disable=import-outside-toplevel

    _REGISTERED[module.TARGET] = module
    # As tuples: TVM removes those (only) at exit, before its static registry would release the
    # Python check functions after the interpreter is gone (a FusionPattern with a check aborts
    # the process at exit, "double free", apache-tvm 0.27).  There, later entries win.
    entries = [(p.name, p.pattern, dict(p.annotation_patterns), p.check) for p in module.patterns(dict(module.TARGET_ATTRS))]
    register_patterns(list(reversed(entries)))


def registered() -> dict:
    """{target: module} registered by entry points at ``import tvm``."""
    return dict(_REGISTERED)


def _explicit(paths: Iterable[str]) -> List[Path]:
    explicit = [Path(p).resolve() for p in paths] + [
        Path(p).resolve() for v in ENV_VARS for p in filter(None, os.environ.get(v, "").split(os.pathsep))]
    for folder in explicit:
        if not folder.is_dir():
            raise UserError(f"extension path '{folder}' does not exist or is not a folder")
    return explicit


def _on_sys_path() -> List[Path]:
    here = Path.cwd().resolve()  # `python -m` puts it on sys.path: nothing is taken from there unnamed
    return [Path(p) for p in sys.path if p and Path(p).is_dir() and Path(p).resolve() != here]


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


def _in_folders(folders: Iterable[Path], seen: list):
    """Each backend's ``relax_patterns`` module in ``folders``, in order."""
    for folder in folders:
        for info in pkgutil.iter_modules([str(folder)]):
            package_dir = folder / info.name
            if not (info.ispkg and (package_dir / f"{MODULE}.py").is_file()):
                continue
            try:
                module = _load(package_dir)
            except Exception as exc:  # a backend's own code may fail in any way
                raise UserError(f"backend {info.name} failed to import its {MODULE}: {type(exc).__name__}: {exc}")
            if module is not None:
                seen.append(module.TARGET)
                yield module


def listed(paths: Iterable[str] = ()) -> List[tuple]:
    """Every backend the engine can find, for ``python -m tvm_extension list``: (target or the package
    name, its ``relax_patterns`` module or None, where it came from, why it failed or None), in the
    order ``find`` looks; a target found again later is shadowed and left out."""
    import tvm  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import  (runs the entry points)

    found, targets = [], set()

    def add(name, module, where, error=None):
        if module is None or module.TARGET not in targets:
            found.append((module.TARGET if module is not None else name, module, where, error))
            targets.add(module.TARGET if module is not None else None)

    def scan(folders, where):
        for folder in folders:
            for info in pkgutil.iter_modules([str(folder)]):
                if info.ispkg and (folder / info.name / f"{MODULE}.py").is_file():
                    try:
                        module = _load(folder / info.name)
                    except Exception as exc:  # a backend's own code may fail in any way
                        add(info.name, None, where(folder), f"its {MODULE} failed to import: {type(exc).__name__}: {exc}")
                        continue
                    if module is not None:
                        add(info.name, module, where(folder))

    scan(_explicit(paths), lambda folder: f"{folder} (named)")
    for target, module in _REGISTERED.items():
        add(target, module, f"{Path(module.__file__).parent} (tvm.backends entry point)")
    scan(_on_sys_path(), lambda folder: f"{folder} (sys.path)")
    return found


def find(target: str, paths: Iterable[str] = ()):
    """The ``relax_patterns`` module of the backend named ``target``; UserError when none is."""
    import tvm  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import  (runs the entry points)

    seen = []
    explicit = _explicit(paths)
    for module in _in_folders(explicit, seen):
        if module.TARGET == target:
            return module
    seen += list(_REGISTERED)
    if target in _REGISTERED:
        return _REGISTERED[target]
    for module in _in_folders(_on_sys_path(), seen):
        if module.TARGET == target:
            return module
    found = ", ".join(sorted(set(seen))) or "none"
    raise UserError(f"unknown target '{target}' for the Relax engine (backends with a {MODULE}.py found: {found})")


def c_headers(backend) -> List[Path]:
    """The headers the calls of the backend's C API need (its ``gen_includes()``)."""
    return [Path(p) for p in _INCLUDE.findall(backend.gen_includes())]


def c_library(backend) -> tuple:
    """(sources, include folders) of the backend's C library: every ``.c`` in the folder of each
    header its ``gen_includes()`` names, as the Relay engine packages them."""
    headers = [Path(p) for p in _INCLUDE.findall(backend.gen_includes()) if Path(p).is_absolute()]
    folders = list(dict.fromkeys(h.parent for h in headers))
    sources = [c for folder in folders for c in sorted(folder.glob("*.c"))]
    return sources, folders
