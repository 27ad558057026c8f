"""A backend's target attributes: their defaults, declared bounds, and the user's options parsed
against them (no Relay: the compile's settings, ``config``, and the registration, ``register``,
both read this)."""
from typing import Any, Dict


class BackendError(Exception):
    """A backend could not be registered or configured (one line for the user)."""


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


def check_ranges_declared(backend):
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
