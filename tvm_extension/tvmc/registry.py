"""The merged codegen registry: TVMC's built-in composite targets plus extension backends.

TVMC looks codegens up through ``get_codegen_names`` / ``get_codegen_by_target``; both
are replaced by versions that also see every registered UMA backend, whose pipeline is
``backend.partition`` behind the target attributes the user gave.
"""
import os
import sys
from typing import Dict, Iterable

from tvm_extension import api, uma
from tvm_extension.api import stages

_ENTRIES: Dict[str, dict] = {}
_loaded_paths = set()
_implicit_done = False
_NAMED_BY_USER: Dict[str, str] = {}  # target -> the extension a folder the user named defined it in


def _pipeline(backend):
    def partition(mod, params=None, mod_name="default", **options):
        from tvm.driver.tvmc import TVMCException  # pylint: disable=import-outside-toplevel

        try:  # the compile's settings, with this backend's options (the same, inside tvmc's compile)
            running = uma.with_target(uma.current(), uma.configure(backend, options))
        except uma.BackendError as err:
            raise TVMCException(str(err)) from None
        try:
            with uma.compiling(running), stages.stage(f"partitioning for {backend.target_name}"):
                mod = backend.partition(mod, params, mod_name=mod_name or "default")
        except TVMCException:
            raise
        except Exception as exc:  # the backend's own code: name it and the operator it was on
            raise TVMCException(uma.describe_partition_failure(backend, exc)) from None
        print(backend.offload_report, flush=True)
        return mod

    partition.__name__ = f"partition_for_{backend.target_name}"
    return partition


def compile_settings(text, flags=None, tflite_exact: bool = False) -> "uma.CompileSettings":
    """The settings of one compile: each extension target's attributes (from ``--target "NAME
    -ATTR=V"`` and ``--target-NAME-ATTR V``, i.e. tvmc's additional target options ``flags``)
    parsed and checked once, before the model is loaded (BackendError: one line)."""
    from tvm.driver.tvmc import target  # pylint: disable=import-outside-toplevel

    options = {}
    if isinstance(text, str) and text.strip() and not os.path.isfile(text) and not target.is_inline_json(text):
        try:
            parsed = target.parse_target(text)
        except Exception:  # pylint: disable=broad-except  (a malformed string: TVMC reports it itself)
            parsed = []
        for entry in parsed:
            backend = uma.registered_backends().get(entry["name"])
            if backend is not None:
                options[backend] = {**entry["opts"], **(flags or {}).get(entry["name"], {})}
    return uma.settings(options, tflite_exact)


def extension_codegens() -> Dict[str, dict]:
    """TVMC codegen entries of every registered UMA backend (from extensions or ``backend.register()``)."""
    for name, backend in uma.registered_backends().items():
        if name not in _ENTRIES or _ENTRIES[name]["backend"] is not backend:
            _ENTRIES[name] = {"config_key": None, "pass_pipeline": _pipeline(backend), "backend": backend}
    return dict(_ENTRIES)


def add_backend(backend, builtin_names: Iterable[str]):
    if backend.target_name in builtin_names:
        raise api.ExtensionError(
            f"target '{backend.target_name}' clashes with TVMC's built-in codegen of that name: rename the backend"
        )
    uma.register_backend(backend)


def load_extensions(paths: Iterable[str] = (), builtin_names: Iterable[str] = ()):
    """Discover extensions (explicit paths strictly, the rest best effort) and register their backends.

    Raises ExtensionError / BackendError for problems with what the user named.
    """
    global _implicit_done
    builtin_names = set(builtin_names)
    new_paths = [p for p in paths if p not in _loaded_paths]
    if not new_paths and _implicit_done:
        return
    with stages.stage("loading extensions"):
        found = api.discover(new_paths, python_path=not _implicit_done, entry_points=not _implicit_done)
    _loaded_paths.update(new_paths)
    _implicit_done = True
    for extension in found:
        if extension.error:
            sys.stderr.write(f"Warning: {extension.error} (skipped)\n")
            continue
        backends = extension.backends()
        stages.logger.info("extension %s from %s: %s", extension.name, extension.origin,
                           ", ".join(f"target {b.target_name}" for b in backends) or "no backends")
        named = extension.origin.startswith(("path ", "environment "))  # a folder the user named
        for backend in backends:
            if not named and backend.target_name in _NAMED_BY_USER:
                # what the user named wins over what is installed (as PATH's first entry does)
                stages.logger.info("target %s of %s from %s is shadowed by %s", backend.target_name,
                                   extension.name, extension.origin, _NAMED_BY_USER[backend.target_name])
                continue
            try:
                add_backend(backend, builtin_names)
            except uma.BackendError as err:
                raise api.ExtensionError(f"{err} (extension {extension.name} from {extension.origin})") from None
            if named:
                _NAMED_BY_USER[backend.target_name] = f"{extension.name} from {extension.origin}"


def merge_into(composite_target):
    """Replace TVMC's lookups by ones that also see extension backends."""
    builtin = composite_target.REGISTERED_CODEGEN

    def get_codegen_names():
        _load_implicit(builtin)
        return list(builtin) + [n for n in extension_codegens() if n not in builtin]

    def get_codegen_by_target(name):
        _load_implicit(builtin)
        if name in builtin:
            return builtin[name]
        extensions = extension_codegens()
        if name in extensions:
            return extensions[name]
        raise composite_target.TVMCException(f"Composite target {name} is not defined in TVMC.")

    get_codegen_names.__doc__ = composite_target.get_codegen_names.__doc__
    get_codegen_by_target.__doc__ = composite_target.get_codegen_by_target.__doc__
    return get_codegen_names, get_codegen_by_target


def _load_implicit(builtin):
    if not _implicit_done:
        try:
            load_extensions((), builtin)
        except (api.ExtensionError, uma.BackendError) as err:
            sys.stderr.write(f"Warning: {err}\n")
