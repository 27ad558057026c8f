"""Finding and importing extensions, and remembering where each came from.

Places searched, first found wins for a given subpackage name:

1. folders given explicitly (``--experimental-tvm-extension PATH``, or MLonMCU's spelling
   ``--experimental-tvmc-extension PATH``), in order;
2. folders in the ``TVM_EXTENSION_PATH`` environment variable (``os.pathsep``-separated),
   then in ``TVMC_EXTENSION_DIR`` (MLonMCU's spelling);
3. ``tvm_extension`` portions already importable (``PYTHONPATH``, installed distributions);
4. entry points of the ``tvm_extension`` group (``importlib.metadata``).

Each such folder holds a ``tvm_extension`` (or ``tvmc_extension``) directory whose
subpackages (other than the reserved framework names) each define one or more
``TVMExtension`` subclasses (``TVMCExtension`` is the same class).
An extension is code: importing it runs it with the user's rights.
"""
import dataclasses
import importlib
import importlib.util
import os
import sys
import traceback
from pathlib import Path
from typing import Iterable, List, Optional

import importlib_metadata

from .extension import ExtensionError, TVMExtension

PACKAGE = "tvm_extension"
PACKAGES = (PACKAGE, "tvmc_extension")  # the second: MLonMCU's spelling
ENV_VAR = "TVM_EXTENSION_PATH"
ENV_VARS = (ENV_VAR, "TVMC_EXTENSION_DIR")
ENTRY_POINT_GROUP = "tvm_extension"
# Subpackages of the namespace that belong to the framework, never scanned as extensions.
RESERVED_NAMES = frozenset({"api", "tvmc", "uma", "mlf", "scaffold", "__main__"})


@dataclasses.dataclass
class LoadedExtension:
    """One extension class, instantiated, with where it came from."""

    name: str  # e.g. "tvm_extension.vanilla:VanillaExtension"
    origin: str  # e.g. "path ./ext", "environment TVM_EXTENSION_PATH", "distribution foo 1.0"
    location: str  # the file it was loaded from
    instance: Optional[TVMExtension] = None
    error: Optional[str] = None

    def backends(self):
        return list(self.instance.uma_backends()) if self.instance else []


def _describe_import_error(exc: BaseException, root: Path) -> str:
    """One line: the file and line inside the extension that failed, and why."""
    where = None
    if isinstance(exc, SyntaxError) and exc.filename:
        where = f"{exc.filename}:{exc.lineno}"
    else:
        frames = traceback.extract_tb(exc.__traceback__)
        inside = [f for f in frames if Path(f.filename).resolve().is_relative_to(root)]
        frame = (inside or frames or [None])[-1]
        if frame is not None:
            where = f"{frame.filename}:{frame.lineno}"
    reason = f"{type(exc).__name__}: {exc}".strip().splitlines()[0]
    return f"{where}: {reason}" if where else reason


def _extension_classes(module) -> List[type]:
    found = []
    for value in vars(module).values():
        if (
            isinstance(value, type)
            and issubclass(value, TVMExtension)
            and value is not TVMExtension
            and not value.__module__.startswith(f"{PACKAGE}.api")
            and not value.__module__.startswith("tvm.driver.tvmc")
            and value not in found
        ):
            found.append(value)
    return found


def _import_portion(sub_dir: Path, folder: Path):
    """Import ``tvm_extension.<name>`` from ``sub_dir`` without leaving sys.path changed."""
    name = f"{sub_dir.parent.name}.{sub_dir.name}"
    init = sub_dir / "__init__.py"
    existing = sys.modules.get(name)
    if existing is not None:
        if Path(getattr(existing, "__file__", "")).resolve() == init.resolve():
            return existing
        return None  # the name is taken by a portion found earlier
    spec = importlib.util.spec_from_file_location(
        name, init, submodule_search_locations=[str(sub_dir)]
    )
    module = importlib.util.module_from_spec(spec)
    saved_path = list(sys.path)
    sys.path.insert(0, str(folder))  # sibling modules of the extension import while it loads
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    finally:
        sys.path[:] = saved_path
    return module


class _Search:
    def __init__(self):
        self.loaded: List[LoadedExtension] = []
        self.seen_dirs = set()

    def add_folder(self, folder: Path, origin: str, strict: bool):
        if not folder.is_dir():
            raise ExtensionError(f"extension path '{folder}' does not exist or is not a folder")
        portions = [folder / p for p in PACKAGES if (folder / p).is_dir()]
        if not portions:
            raise ExtensionError(
                f"extension path '{folder}' holds no '{PACKAGE}' package "
                f"(expected {folder / PACKAGE}/<name>/__init__.py)"
            )
        found_any = False
        for portion in portions:
            for sub_dir in sorted(portion.iterdir()):
                if sub_dir.name in RESERVED_NAMES or not (sub_dir / "__init__.py").is_file():
                    continue
                found_any = self.add_portion(sub_dir, folder, origin, strict) or found_any
        if strict and not found_any:
            raise ExtensionError(
                f"extension path '{folder}' defines no TVMExtension subclass in {portions[0]}/*/__init__.py"
            )

    def add_portion(self, sub_dir: Path, folder: Path, origin: str, strict: bool) -> bool:
        key = sub_dir.resolve()
        if key in self.seen_dirs:
            return True
        self.seen_dirs.add(key)
        location = str(sub_dir / "__init__.py")
        try:
            module = _import_portion(sub_dir, folder)
        except Exception as exc:  # an extension may fail in any way; report it in one line
            message = f"extension {location} failed to import: {_describe_import_error(exc, folder.resolve())}"
            if strict:
                raise ExtensionError(message) from None
            self.loaded.append(LoadedExtension(f"{sub_dir.parent.name}.{sub_dir.name}", origin, location, error=message))
            return False
        if module is None:
            return False  # shadowed by an earlier portion of the same name
        classes = _extension_classes(module)
        for cls in classes:
            self.add_class(cls, origin, location, strict)
        if not classes and strict:
            raise ExtensionError(f"extension {location} defines no TVMExtension subclass")
        return bool(classes)

    def add_class(self, cls, origin: str, location: str, strict: bool):
        name = f"{cls.__module__}:{cls.__qualname__}"
        if any(e.name == name for e in self.loaded):
            return
        try:
            instance = cls()
            instance.uma_backends()
        except Exception as exc:
            message = f"extension {name} ({location}) failed: {type(exc).__name__}: {exc}"
            if strict:
                raise ExtensionError(message) from None
            self.loaded.append(LoadedExtension(name, origin, location, error=message))
            return
        self.loaded.append(LoadedExtension(name, origin, location, instance))


def _python_path_portions() -> Iterable[Path]:
    """Portions on sys.path, except one in the current directory (``python -m`` puts it on
    sys.path): nothing is imported from where the user happens to stand unless named."""
    spec = importlib.util.find_spec(PACKAGE)
    here = Path.cwd().resolve()
    for entry in list(spec.submodule_search_locations or []) if spec else []:
        if Path(entry).resolve().parent != here:
            yield Path(entry)


def _distribution_of(portion: Path) -> Optional[str]:
    """'distribution NAME VERSION' when an installed distribution owns this folder."""
    for dist in importlib_metadata.distributions():
        for file in dist.files or []:
            if file.parts[:1] == (PACKAGE,) and file.name == "__init__.py" and len(file.parts) == 3:
                if Path(dist.locate_file(file)).parent.parent.resolve() == portion.resolve():
                    return f"distribution {dist.metadata['Name']} {dist.version}"
    return None


def discover(
    paths: Iterable[str] = (),
    environ=None,
    python_path: bool = True,
    entry_points: bool = True,
    strict: bool = True,
) -> List[LoadedExtension]:
    """Find and import every extension.

    With ``strict``, a problem with an explicit path (argument or environment variable) raises
    ExtensionError; without, it is recorded as a failed entry, like problems elsewhere.
    """
    environ = os.environ if environ is None else environ
    search = _Search()
    explicit = [(Path(p), f"path {p}") for p in paths] + [
        (Path(p), f"environment {v}") for v in ENV_VARS for p in filter(None, environ.get(v, "").split(os.pathsep))
    ]
    for folder, origin in explicit:
        try:
            search.add_folder(folder, origin, strict=strict)
        except ExtensionError as err:
            if strict:
                raise
            search.loaded.append(LoadedExtension(str(folder), origin, str(folder), error=str(err)))
    if python_path:
        for portion in _python_path_portions():
            subs = [
                d for d in sorted(portion.iterdir())
                if d.name not in RESERVED_NAMES and (d / "__init__.py").is_file()
            ] if portion.is_dir() else []
            if not subs:
                continue
            origin = _distribution_of(portion) or f"python path {portion.parent}"
            for sub_dir in subs:
                search.add_portion(sub_dir, portion.parent, origin, strict=False)
    if entry_points:
        for ep in importlib_metadata.entry_points(group=ENTRY_POINT_GROUP):
            origin = f"entry point {ep.name} of {ep.dist.name if ep.dist else '?'}"
            try:
                target = ep.load()
            except Exception as exc:
                search.loaded.append(LoadedExtension(ep.value, origin, ep.value, error=f"{ep.value}: {type(exc).__name__}: {exc}"))
                continue
            classes = [target] if isinstance(target, type) else _extension_classes(target)
            for cls in classes:
                search.add_class(cls, origin, ep.value, strict=False)
    return search.loaded
