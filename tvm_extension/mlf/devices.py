"""Devices an MLF's host build can link a backend's library against instead of its C model, e.g.
Chocolate's RTL under Verilator (``python -m tvm_extension.mlf run --device rtl``).

A backend package offers one under the entry-point group ``tvm_extension.devices`` (name: the
device, value: an object with ``cflags``, a sequence of flags every source of the MLF is compiled
with, and ``link(tree, objects, executable, work)``, which links the compiled objects into the
program, raising ``HostBuildError``-like errors with one line).
"""
from importlib.metadata import entry_points
from typing import Dict

from .host import HostBuildError

GROUP = "tvm_extension.devices"


def available() -> Dict[str, object]:
    """The installed devices, by name (their entry points, not loaded)."""
    return {point.name: point for point in entry_points(group=GROUP)}


def device(name: str):
    """The device ``name`` (HostBuildError naming the installed ones if there is none)."""
    points = available()
    if name not in points:
        known = ", ".join(sorted(points)) or "none installed"
        raise HostBuildError(f"no device '{name}' (known: {known})")
    return points[name].load()
