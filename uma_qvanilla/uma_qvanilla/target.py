"""QVanilla's target, without Relay: its name and attributes, what ``backend.py`` registers and
what a second engine would read.

``scratch_budget``: the bytes of scratch one kernel call may take (``QVANILLA_SCRATCH_BUDGET``, see
c/qvanilla.h): 0 for the fastest layout (hosts: 5-36 KB a call on usual layers), 4096 for a
microcontroller (CMSIS-NN's kernels take 0.1-4.5 KB).  The workspace the MLF plans shrinks with it;
the outputs are the same.

``int8_weights``: 1 packs dense convs' weights as int8 (``qvanilla_conv2d_packed8_s8``) where they fit
(every weight less its zero point in [-128, 127], as TFLite's int8 weights): for Helium (Cortex-M55,
M85), whose int8 multiply-adds take them as they are (half the flash, no narrowing at run time);
other cores run the int16 packed entry faster, so 0 is the default."""
from typing import Dict, Tuple

NAME = "qvanilla"
ATTRIBUTES: Dict[str, object] = {"scratch_budget": 0, "int8_weights": 0}  # name: default
ATTR_RANGES: Dict[str, Tuple[int, int]] = {"scratch_budget": (0, 1 << 20), "int8_weights": (0, 1)}  # (lowest, highest)


def scratch_budget(attrs) -> int:
    """The ``scratch_budget`` of one compile's attributes (a mapping by name; strings or ints)."""
    return int(str(attrs["scratch_budget"]))


def int8_weights(attrs) -> bool:
    """Whether one compile's attributes ask for int8 packed weights."""
    return int(str(attrs["int8_weights"])) == 1
