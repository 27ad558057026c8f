"""One configuration per compile: each backend's target attributes, parsed once (typed, within
their bounds) into a frozen ``TargetConfig``, and the compile's own options (``--tflite-exact``).

A compile runs inside ``compiling(settings)``; everything that runs for it (pattern predicates,
Relay and TIR passes, codegen) reads ``config_of(backend)``.  The settings live in a context
variable, not in the backend object nor a module global: two compiles one after the other, or
in two threads at once, each see their own.  Outside a compile, a backend sees its defaults.
Lowering also writes the attributes into each offloaded PrimFunc (``target_attrs``), so a TIR
pass can read them from the IR it is given.
"""
import contextlib
import contextvars
import dataclasses
import threading
from types import MappingProxyType
from typing import Any, Dict, Iterator, Mapping, Optional, Tuple

from .attrs import target_attrs


@dataclasses.dataclass(frozen=True)
class TargetConfig:
    """A backend's target attributes for one compile, typed as their defaults and checked."""

    target: str
    items: Tuple[Tuple[str, Any], ...]

    def __getitem__(self, attr: str) -> Any:
        return dict(self.items)[attr]

    def get(self, attr: str, default: Any = None) -> Any:
        return dict(self.items).get(attr, default)

    def as_dict(self) -> Dict[str, Any]:
        return dict(self.items)


@dataclasses.dataclass(frozen=True)
class CompileSettings:
    """What one compile was asked for: a configuration per extension target, and its options."""

    targets: Mapping[str, TargetConfig] = dataclasses.field(default_factory=lambda: MappingProxyType({}))
    tflite_exact: bool = False
    # Generated C of offloaded functions, by (target, attributes, function structure): a cache of
    # this compile only (functions of the same shape print the same C but for their name).
    sources: dict = dataclasses.field(default_factory=dict, compare=False, repr=False)


_CURRENT: contextvars.ContextVar = contextvars.ContextVar("tvm_extension_compile", default=None)


def target_config(backend, options: Optional[Mapping[str, Any]] = None) -> TargetConfig:
    """Parse ``options`` (strings from the command line, or values) over the backend's defaults
    (BackendError naming the attribute and its range when one is wrong)."""
    return TargetConfig(backend.target_name, tuple(sorted(target_attrs(backend, dict(options or {})).items())))


def settings(backends_options: Mapping[Any, Mapping[str, Any]], tflite_exact: bool = False) -> CompileSettings:
    """Settings of a compile from {backend: its options}."""
    targets = {backend.target_name: target_config(backend, options) for backend, options in backends_options.items()}
    return CompileSettings(MappingProxyType(targets), bool(tflite_exact))


def with_target(running: Optional[CompileSettings], config: TargetConfig) -> CompileSettings:
    """``running`` (or empty settings) with ``config`` for its target."""
    running = running if running is not None else CompileSettings()
    return dataclasses.replace(running, targets=MappingProxyType({**running.targets, config.target: config}))


# TVM's lowering keeps process-wide state that two compiles at once corrupt (te.tag's scope stack:
# "nested op_tag is not allowed", seen with two threads): compiles in one process take turns.
# Each still runs in its own settings; for parallel compiles, use processes.
COMPILE_LOCK = threading.RLock()


@contextlib.contextmanager
def compiling(compile_settings: CompileSettings) -> Iterator[CompileSettings]:
    with COMPILE_LOCK:
        token = _CURRENT.set(compile_settings)
        try:
            yield compile_settings
        finally:
            _CURRENT.reset(token)


def current() -> Optional[CompileSettings]:
    """The settings of the compile running in this thread (or context), None outside one."""
    return _CURRENT.get()


def config_of(backend) -> TargetConfig:
    """The backend's configuration in the compile in progress; its defaults outside one."""
    running = current()
    if running is not None and backend.target_name in running.targets:
        return running.targets[backend.target_name]
    return target_config(backend)
