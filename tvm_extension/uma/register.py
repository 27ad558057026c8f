"""What ``UMABackend.register()`` does natively, done in Python.

The native registration (``relay.backend.contrib.uma.RegisterTarget``) is missing from
this TVM build, so a backend becomes a classic BYOC external codegen instead:

* its patterns form the pattern table of its target name (for ``partition``);
* its operator strategies are registered as upstream does;
* ``relay.ext.<target_name>`` lowers each offloaded function and prints C for it;
* partitioning (``partition``) adds the framework's passes around the backend's own.
"""
from typing import Any, Dict

import tvm
from tvm.relay.op.contrib.register import register_pattern_table
from tvm.relay.op.op import register_strategy

from . import codegen
from .attrs import BackendError, attr_ranges, check_ranges_declared, register_target, target_attrs  # noqa: F401
from .config import target_config

_REGISTERED: Dict[str, Any] = {}


def registered_backends() -> Dict[str, Any]:
    return dict(_REGISTERED)


def _same_backend(a, b) -> bool:
    return type(a).__module__ == type(b).__module__ and type(a).__qualname__ == type(b).__qualname__


def register_backend(backend) -> Any:
    """Register a UMA backend; returns the registered instance (the first one of its kind)."""
    name = backend.target_name
    existing = _REGISTERED.get(name)
    if existing is not None:
        if _same_backend(existing, backend):
            return existing
        raise BackendError(
            f"target '{name}' is registered twice, by {type(existing).__module__}.{type(existing).__qualname__} "
            f"and by {type(backend).__module__}.{type(backend).__qualname__}: rename one of them"
        )
    if name in tvm.target.Target.list_kinds():
        raise BackendError(f"target '{name}' clashes with TVM's own target kind of that name: rename the backend")
    for attr, default in backend._target_attrs.items():
        if default is None:
            raise BackendError(f"target '{name}': attribute '{attr}' has no default (None is not supported)")
    check_ranges_declared(backend)

    # The backend's own objects are only read: what the framework adds runs in ``partition``.
    register_pattern_table(name, backend._relay_to_relay._pattern_table)
    for op, strategy, plevel in backend._relay_to_tir._operator_strategies:
        register_strategy(op, strategy, plevel)
    tvm._ffi.register_func(
        f"relay.ext.{name}", lambda func: codegen.compile_function(backend, func), override=True
    )
    _REGISTERED[name] = backend
    return backend


def configure(backend, options: Dict[str, Any]):
    """The backend's frozen configuration for ``options`` (``config.TargetConfig``); the backend
    object itself is never changed."""
    return target_config(backend, options)
