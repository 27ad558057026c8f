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

_REGISTERED: Dict[str, Any] = {}


class BackendError(Exception):
    """A backend could not be registered or configured (one line for the user)."""


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
    _check_ranges_declared(backend)

    # The backend's own objects are only read: what the framework adds runs in ``partition``.
    register_pattern_table(name, backend._relay_to_relay._pattern_table)
    for op, strategy, plevel in backend._relay_to_tir._operator_strategies:
        register_strategy(op, strategy, plevel)
    tvm._ffi.register_func(
        f"relay.ext.{name}", lambda func: codegen.compile_function(backend, func), override=True
    )
    _REGISTERED[name] = backend
    return backend


def _convert(value, default, name: str, attr: str):
    if isinstance(default, bool):
        text = str(value).lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off"):
            return False
        raise BackendError(f"target '{name}': attribute '{attr}' expects true or false, got '{value}'")
    if isinstance(default, int):
        try:
            return int(value)
        except (TypeError, ValueError):
            raise BackendError(f"target '{name}': attribute '{attr}' expects an integer, got '{value}'") from None
    return str(value)


def attr_ranges(backend) -> Dict[str, tuple]:
    """The backend's ``target_attr_ranges``: {attribute: (low, high)} inclusive integer bounds, or
    {attribute: ("a", "b", ...)} the allowed values of a string attribute.  A plain class
    attribute, so a backend written for upstream UMA (which has none) has no bounds."""
    return dict(getattr(backend, "target_attr_ranges", None) or {})


def register_target(backend, target) -> None:
    """Register a backend's Relay-free target description ``target`` (a module with ``ATTRIBUTES``,
    {name: default}, and ``ATTR_RANGES``, see ``attr_ranges``) on ``backend``, in its ``__init__``:
    each attribute with its default, and the bounds checked when a target is parsed."""
    for name, default in target.ATTRIBUTES.items():
        backend._register_target_attr(name, default=default)
    backend.target_attr_ranges = dict(getattr(target, "ATTR_RANGES", {}))


def _range_text(allowed) -> str:
    if all(isinstance(a, str) for a in allowed):
        return "one of " + ", ".join(repr(a) for a in allowed)
    return f"in {allowed[0]}..{allowed[1]}"


def _in_range(value, allowed) -> bool:
    if all(isinstance(a, str) for a in allowed):
        return value in allowed
    return allowed[0] <= value <= allowed[1]


def _check_ranges_declared(backend):
    """At registration: each range names an attribute, fits its type, and holds its default."""
    name, defaults = backend.target_name, backend._target_attrs
    for attr, allowed in attr_ranges(backend).items():
        default = defaults.get(attr)
        if attr not in defaults:
            raise BackendError(f"target '{name}': target_attr_ranges names '{attr}', which is no attribute")
        strings = isinstance(default, str) and isinstance(allowed, tuple) and all(isinstance(a, str) for a in allowed)
        integers = (type(default) is int and isinstance(allowed, tuple) and len(allowed) == 2
                    and all(type(a) is int for a in allowed) and allowed[0] <= allowed[1])
        if not (strings or integers):
            raise BackendError(f"target '{name}': target_attr_ranges['{attr}'] = {allowed!r} is neither (low, high) "
                               f"integers for an integer attribute nor allowed strings for a string one")
        if not _in_range(default, allowed):
            raise BackendError(f"target '{name}': the default {default!r} of attribute '{attr}' is not "
                               f"{_range_text(allowed)}")


def target_attrs(backend, options: Dict[str, Any]) -> Dict[str, Any]:
    """The backend's attribute defaults overlaid with the user's options, converted to the
    defaults' types and checked against ``target_attr_ranges`` (BackendError: one line)."""
    name = backend.target_name
    attrs = dict(backend._target_attrs)
    for attr, value in options.items():
        if attr not in attrs:
            known = ", ".join(sorted(attrs)) or "none"
            raise BackendError(f"target '{name}' has no attribute '{attr}' (known: {known})")
        attrs[attr] = _convert(value, attrs[attr], name, attr)
    for attr, allowed in attr_ranges(backend).items():
        if not _in_range(attrs[attr], allowed):
            raise BackendError(f"target '{name}': attribute '{attr}' must be {_range_text(allowed)}, "
                               f"got {attrs[attr]!r}")
    return attrs


def configure(backend, options: Dict[str, Any]):
    """The backend's frozen configuration for ``options`` (``config.TargetConfig``); the backend
    object itself is never changed."""
    from .config import target_config  # pylint: disable=import-outside-toplevel

    return target_config(backend, options)
