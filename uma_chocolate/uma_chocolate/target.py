"""Chocolate's target attributes: names, defaults, bounds, and the chip they describe (no Relay).

``backend.py`` registers them with UMA; ``core_of`` turns one compile's values into the
``schedule.Core`` the TIR pass tiles for, checking what involves several of them.
"""
from tvm_extension.kit.limits import INT32_MAX, c_limits

from .codegen import KERNEL_DIR
from .schedule import Core

NAME = "chocolate"

ATTRIBUTES = {"tile_m": 8, "tile_n": 8, "tile_k": 8, "scratchpad_bytes": 65536, "dma_bytes_per_cycle": 8,
              "dma_setup_cycles": 32}
LIMITS = c_limits(KERNEL_DIR / "chocolate.h", "CHOCOLATE_")  # what chocolate_begin accepts
# Checked when the target is parsed; core_of() checks what involves several attributes.  Tiles from
# 2: the core takes 1, but the schedule's tensor intrinsics do not match a loop of extent 1 yet.
ATTR_RANGES = {**{f"tile_{d}": (2, LIMITS["MAX_TILE"]) for d in "mnk"},
               "scratchpad_bytes": (4, LIMITS["MAX_SPAD_BYTES"]), "dma_bytes_per_cycle": (1, INT32_MAX),
               "dma_setup_cycles": (0, INT32_MAX)}


class ConfigError(ValueError):
    """A bad value among Chocolate's target attributes (one line for the user)."""


def core_of(attrs) -> Core:
    """The chip one compile's attributes (a mapping by name) describe."""
    values = {}
    for name in ATTRIBUTES:
        try:
            values[name] = int(str(attrs[name]))
        except ValueError:
            raise ConfigError(f"target 'chocolate': {name} must be an integer, got '{attrs[name]}'") from None
    tiles = [values[f"tile_{d}"] for d in "mnk"]
    if not all(1 <= t <= LIMITS["MAX_TILE"] for t in tiles):
        raise ConfigError(f"target 'chocolate': tile sizes {'x'.join(map(str, tiles))} must be in "
                          f"[1, {LIMITS['MAX_TILE']}]")
    core = Core(*tiles, values["scratchpad_bytes"], values["dma_bytes_per_cycle"], values["dma_setup_cycles"])
    need = sum(core.tile_bytes("float32").values())
    if core.spad_bytes % 4 or not need <= core.spad_bytes <= LIMITS["MAX_SPAD_BYTES"]:
        raise ConfigError(f"target 'chocolate': scratchpad_bytes {core.spad_bytes} must be a multiple of 4 holding "
                          f"one A, B and accumulator tile ({need} bytes)")
    if core.dma_bytes_per_cycle < 1 or core.dma_setup_cycles < 0:
        raise ConfigError("target 'chocolate': dma_bytes_per_cycle must be >= 1 and dma_setup_cycles >= 0")
    return core
