"""QVanilla's target, without Relay: its name and attributes, what ``backend.py`` registers and
what a second engine would read.

``scratch_budget``: the bytes of scratch one kernel call may take (``QVANILLA_SCRATCH_BUDGET``, see
c/qvanilla.h): 0 for the fastest layout (hosts: 5-36 KB a call on usual layers), 4096 for a
microcontroller (CMSIS-NN's kernels take 0.1-4.5 KB).  The workspace the MLF plans shrinks with it;
the outputs are the same."""
from typing import Dict, Tuple

NAME = "qvanilla"
ATTRIBUTES: Dict[str, object] = {"scratch_budget": 0}  # name: default
ATTR_RANGES: Dict[str, Tuple[int, int]] = {"scratch_budget": (0, 1 << 20)}  # name: (lowest, highest)


def scratch_budget(attrs) -> int:
    """The ``scratch_budget`` of one compile's attributes (a mapping by name; strings or ints)."""
    return int(str(attrs["scratch_budget"]))
