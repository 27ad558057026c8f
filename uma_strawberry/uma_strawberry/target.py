"""Strawberry's target attributes: names, defaults and bounds (no Relay, no TVM).

``backend.py`` registers them with UMA; ``tiling.Config.from_attrs`` (tiling.py, Relay-free too)
turns one compile's values into the chip's partitions and rates and checks what involves two of
them.
"""
from tvm_extension.kit.limits import INT32_MAX, c_limits

from .codegen import KERNEL_DIR, KIT_DIR

NAME = "strawberry"

# The chip: its scratchpad, split into three partitions (input tile, weights with bias and PReLU
# slope, output tile with the residual), and the rates of its DMA and engine.
ATTRIBUTES = {
    "scratchpad_bytes": 262144,
    "ifmap_percent": 40,
    "weights_percent": 30,  # the ofmap partition gets the rest
    "dma_bytes_per_cycle": 8,
    "dma_setup_cycles": 32,
    "macs_per_cycle": 64,
}

# The kit's conv engine computes the layers: a window of at most 7 x 7 taps (Vanilla's
# max_kernel_size default), its depthwise buffer's taps in any shape.
MAX_KERNEL_SIZE = 7
MAX_TAPS = c_limits(KIT_DIR / "kit_conv_f32.h", "KIT_CONV_F32_")["MAX_TAPS"]

MIN_SPAD_BYTES = 64  # smaller scratchpads hold no useful tile
MAX_SPAD_BYTES = c_limits(KERNEL_DIR / "strawberry.h", "STRAWBERRY_")["MAX_SPAD_BYTES"]  # the model's largest

# Inclusive bounds, checked when the target is parsed.
ATTR_RANGES = {"scratchpad_bytes": (MIN_SPAD_BYTES, MAX_SPAD_BYTES), "ifmap_percent": (1, 98),
               "weights_percent": (1, 98), "dma_bytes_per_cycle": (1, INT32_MAX), "dma_setup_cycles": (0, INT32_MAX),
               "macs_per_cycle": (1, INT32_MAX)}
