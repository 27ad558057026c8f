"""Finding and importing extensions, and remembering where each came from.

Places searched, first found wins for a given subpackage name:

1. folders given explicitly (``--experimental-tvm-extension PATH``, or MLonMCU's spelling
   ``--experimental-tvmc-extension PATH``), in order;
2. folders in the ``TVM_EXTENSION_PATH`` environment variable (``os.pathsep``-separated),
   then in ``TVMC_EXTENSION_DIR`` (MLonMCU's spelling) and ``UMA_BACKENDS`` (the spelling
   proposed in the UMA-in-TVMC discussion);
3. ``tvm_extension`` portions already importable (``PYTHONPATH``, installed distributions);
4. entry points of the ``tvm_extension`` group (``importlib.metadata``).

Each such folder holds a ``tvm_extension`` (or ``tvmc_extension``) directory, with or
without ``__init__.py``.  As the TVMC-extension patch (MLonMCU's) does, every module and
package under it is imported, except names starting with a single ``_`` (with everything
below them) and the framework's own module names, and every concrete ``TVMExtension`` subclass
found is an extension (``TVMCExtension`` is the same class); its ``uma_backends()`` must return
a list of ``UMABackend`` instances.  A module that fails to import is a warning; an explicit
folder in which no module defines an extension is an error, worded by its first cause.
An extension is code: importing it runs it with the user's rights.
"""
import dataclasses
import importlib
import importlib.util
import inspect
import os
import pkgutil
import sys
import traceback
from pathlib import Path
from typing import Dict, Iterable, List, Optional

import importlib_metadata

from .extension import ExtensionError, TVMExtension

PACKAGE = "tvm_extension"
PACKAGES = (PACKAGE, "tvmc_extension")  # the second: MLonMCU's spelling
ENV_VAR = "TVM_EXTENSION_PATH"
ENV_VARS = (ENV_VAR, "TVMC_EXTENSION_DIR", "UMA_BACKENDS")  # MLonMCU's, the UMA discussion's
ENTRY_POINT_GROUP = "tvm_extension"
# The framework's own folder: every module and package shipped in it is the framework's, never
# an extension candidate (read from what ships, so a new subpackage is reserved by shipping it).
FRAMEWORK_FOLDER = Path(__file__).resolve().parents[1]
FRAMEWORK_DISTRIBUTION = "tvm-uma-extensions"


def _framework_names() -> frozenset:
    """The framework's modules: those its installed distribution lists (a backend installed into
    the same site-packages shares the folder), else the folder's (a checkout, an editable install)."""
    try:
        dist = importlib_metadata.distribution(FRAMEWORK_DISTRIBUTION)
        files = [f for f in dist.files or [] if len(f.parts) > 1 and f.parts[0] == PACKAGE]
        if any(Path(dist.locate_file(f)).resolve() == Path(__file__).resolve() for f in files):
            return frozenset(f.parts[1].removesuffix(".py") for f in files)
    except importlib_metadata.PackageNotFoundError:
        pass
    return frozenset(info.name for info in pkgutil.iter_modules([str(FRAMEWORK_FOLDER)]))


RESERVED_NAMES = _framework_names()


@dataclasses.dataclass
class LoadedExtension:
    """One extension class, instantiated, with where it came from."""

    name: str  # e.g. "tvm_extension.vanilla:VanillaExtension"
    origin: str  # e.g. "path ./ext", "environment TVM_EXTENSION_PATH", "distribution foo 1.0"
    location: str  # the file it was loaded from
    instance: Optional[TVMExtension] = None
    error: Optional[str] = None
    backend_list: list = dataclasses.field(default_factory=list)  # what uma_backends() returned, checked

    def backends(self):
        return list(self.backend_list)


def _not_backends(value) -> Optional[str]:
    """Why ``value`` (what ``uma_backends()`` returned) is not a list of UMA backends, or None."""
    from tvm.relay.backend.contrib.uma.backend import UMABackend  # pylint: disable=import-outside-toplevel

    def what(v):
        shown = repr(v)
        return f"{type(v).__name__} {shown}" if len(shown) <= 40 and not shown.startswith("<") else type(v).__name__

    if not isinstance(value, (list, tuple)):
        return f"uma_backends() returned {what(value)}, not a list of UMABackend instances"
    wrong = [v for v in value if not isinstance(v, UMABackend)]
    if wrong:
        return f"uma_backends() returned a list holding {what(wrong[0])}, not a UMABackend instance"
    return None


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
            and not inspect.isabstract(value)
            and not value.__module__.startswith(f"{PACKAGE}.api")
            and not value.__module__.startswith("tvm.driver.tvmc")
            and value not in found
        ):
            found.append(value)
    return found


def _is_private(name: str) -> bool:
    """The TVMC-extension patch's rule: ``_name`` is skipped, ``__name`` is not."""
    return name.startswith("_") and not name.startswith("__")


def _entries(directory: Path, prefix: str):
    """(module name, file, is package) of each module and regular package in ``directory``,
    as ``pkgutil.iter_modules`` lists them (a folder without ``__init__.py`` is not a package)."""
    for info in pkgutil.iter_modules([str(directory)]):
        if _is_private(info.name):
            continue
        path = directory / info.name
        yield f"{prefix}.{info.name}", (path / "__init__.py" if info.ispkg else path.with_suffix(".py")), info.ispkg


def _import_file(name: str, file: Path, is_package: bool, folder: Path):
    """Import ``name`` from ``file``; ``folder`` is on sys.path while it runs (siblings import).

    Returns None when the name is already taken by a module from another file (shadowed).
    What the module itself adds to sys.path stays (MLonMCU's extensions append their folder).
    """
    existing = sys.modules.get(name)
    if existing is not None:
        return existing if Path(getattr(existing, "__file__", "") or "").resolve() == file.resolve() else None
    spec = importlib.util.spec_from_file_location(
        name, file, submodule_search_locations=[str(file.parent)] if is_package else None
    )
    module = importlib.util.module_from_spec(spec)
    entry = str(folder)
    sys.path.insert(0, entry)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    finally:
        if entry in sys.path:
            sys.path.remove(entry)
    return module


class _Search:
    def __init__(self):
        self.loaded: List[LoadedExtension] = []
        self.seen_files = set()
        self.shadowed: List[str] = []  # why modules were skipped: their name was already taken

    def add_folder(self, folder: Path, origin: str, strict: bool):
        if not folder.is_dir():
            raise ExtensionError(f"extension path '{folder}' does not exist or is not a folder")
        portions = [folder / p for p in PACKAGES if (folder / p).is_dir()]
        if not portions:
            raise ExtensionError(
                f"extension path '{folder}' holds no '{PACKAGE}' package "
                f"(expected {folder / PACKAGE}/<name>/__init__.py or {folder / PACKAGE}/<name>.py)"
            )
        before, shadowed_before = len(self.loaded), len(self.shadowed)
        found_any = False
        for portion in portions:
            found_any = self.add_portion(portion, folder, origin) or found_any
        if found_any:
            return
        # The first cause leads the line; failures already recorded are not recorded twice.
        failed = [e.error for e in self.loaded[before:] if e.error]
        causes = failed + self.shadowed[shadowed_before:]
        message = causes[0] if causes else f"extension path '{folder}' defines no TVMExtension subclass in {portions[0]}"
        if strict or not failed:
            raise ExtensionError(message)

    def add_portion(self, portion: Path, folder: Path, origin: str, owners: Optional[Dict[Path, str]] = None) -> bool:
        """Import every module and package under ``portion`` (as the TVMC-extension patch's
        ``pkgutil.walk_packages`` does) and take every extension class they define.

        A module that fails to import is recorded (a warning); True when a class was found.
        """
        found_any = False
        pending = [e for e in _entries(portion, portion.name) if e[0].split(".")[1] not in RESERVED_NAMES]
        while pending:
            name, file, is_package = pending.pop(0)
            key = file.resolve()
            if key in self.seen_files:
                found_any = True
                continue
            self.seen_files.add(key)
            where = (owners or {}).get(key, origin)
            try:
                module = _import_file(name, file, is_package, folder)
            except Exception as exc:  # an extension may fail in any way; report it in one line
                message = f"extension {name} failed to import: {_describe_import_error(exc, folder.resolve())}"
                self.loaded.append(LoadedExtension(name, where, str(file), error=message))
                continue
            if module is None:  # shadowed by an earlier module of the same name
                taken = getattr(sys.modules.get(name), "__file__", None) or "elsewhere"
                self.shadowed.append(f"extension module {name} of '{folder}' is already imported from {taken}: "
                                     "extension module names must be unique (rename one)")
                continue
            for cls in _extension_classes(module):
                found_any = self.add_class(cls, where, str(file)) or found_any
            if is_package:
                pending[:0] = list(_entries(file.parent, name))
        return found_any

    def add_class(self, cls, origin: str, location: str) -> bool:
        name = f"{cls.__module__}:{cls.__qualname__}"
        if any(e.name == name for e in self.loaded):
            return True
        try:
            instance = cls()
            backends = instance.uma_backends()
            problem = _not_backends(backends)
        except Exception as exc:
            problem = f"{type(exc).__name__}: {exc}".splitlines()[0]
        if problem:
            message = f"extension {name} ({location}): {problem}"
            self.loaded.append(LoadedExtension(name, origin, location, error=message))
            return False
        self.loaded.append(LoadedExtension(name, origin, location, instance, backend_list=list(backends)))
        return True


def _python_path_portions() -> Iterable[Path]:
    """Portions on sys.path, except one in the current directory that is there only because
    ``python -m`` put it first: nothing is imported from where the user happens to stand unless
    named.  A folder installed editable (a backend's own, where its team works) is on sys.path
    by its ``.pth`` line too, and stays."""
    spec = importlib.util.find_spec(PACKAGE)
    here = Path.cwd().resolve()
    installed_here = any(Path(p).resolve() == here for p in sys.path[1:] if p)
    for entry in list(spec.submodule_search_locations or []) if spec else []:
        if installed_here or Path(entry).resolve().parent != here:
            yield Path(entry)


def _installed_owners() -> Dict[Path, str]:
    """{file of a tvm_extension portion: 'distribution NAME VERSION'} for installed distributions."""
    owners = {}
    for dist in importlib_metadata.distributions():
        record = dist.read_text("RECORD") or ""
        if f"{PACKAGE}/" not in record:  # reading every distribution's file list costs a second
            continue
        for file in dist.files or []:
            if file.parts[:1] == (PACKAGE,) and file.suffix == ".py":
                owners[Path(dist.locate_file(file)).resolve()] = f"distribution {dist.metadata['Name']} {dist.version}"
    return owners


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
        owners = None
        for portion in _python_path_portions():
            if not any(name.split(".")[1] not in RESERVED_NAMES for name, _, _ in _entries(portion, PACKAGE)):
                continue  # only the framework's own subpackages here
            owners = _installed_owners() if owners is None else owners
            search.add_portion(portion, portion.parent, f"python path {portion.parent}", owners)
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
                search.add_class(cls, origin, ep.value)
    return search.loaded


def searched_places(paths: Iterable[str] = (), environ=None) -> List[str]:
    """Where ``discover`` looks, one line per place (said when nothing was found)."""
    environ = os.environ if environ is None else environ
    variables = "; ".join(f"{v}={environ[v]}" for v in ENV_VARS if environ.get(v))
    portions = ", ".join(str(p) for p in _python_path_portions())
    entry_points = ", ".join(ep.value for ep in importlib_metadata.entry_points(group=ENTRY_POINT_GROUP))
    return [
        f"folders named on the command line: {', '.join(map(str, paths)) or 'none'}",
        f"environment variables: {variables or ', '.join(ENV_VARS) + ' not set'}",
        f"{PACKAGE} folders on PYTHONPATH and in installed distributions: {portions or 'none'} "
        f"(the framework's own modules there are not extensions: {', '.join(sorted(RESERVED_NAMES))})",
        f"entry points of the group '{ENTRY_POINT_GROUP}': {entry_points or 'none'}",
    ]
