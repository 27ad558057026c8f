"""QVanilla's target, without Relay: its name and attributes (none: its limits are fixed by the
C header), what ``backend.py`` registers and what a second engine would read."""
from typing import Dict, Tuple

NAME = "qvanilla"
ATTRIBUTES: Dict[str, object] = {}  # name: default
ATTR_RANGES: Dict[str, Tuple[int, int]] = {}  # name: (lowest, highest)
