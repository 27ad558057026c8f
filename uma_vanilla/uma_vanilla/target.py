"""Vanilla's target: its name and attributes with their ranges, without Relay (any engine that
compiles for Vanilla reads them here; backend.py registers them with UMA)."""
import math

from tvm_extension.kit.limits import c_limits

from .codegen import KERNEL_DIR

NAME = "vanilla_accelerator"

# The kernel's own limits (vanilla_accelerator.h): the patterns refuse what its checks refuse.
LIMITS = c_limits(KERNEL_DIR / "vanilla_accelerator.h", "VANILLA_")
MAX_TAPS = LIMITS["MAX_TAPS"]
# The largest max_kernel_size: a square window the depthwise buffer holds (8x8 of 64 taps).
MAX_KERNEL_SIZE = math.isqrt(MAX_TAPS)

ATTRIBUTES = {
    # The MAC array's window buffer holds this size squared taps (7: a 7x7 or a 9x1 kernel).
    "max_kernel_size": 7,
    # Extra compiler flags for the kernel library in the MLF (e.g. -march=native), written beside
    # each of its sources as NAME.cflags, which the host and board builds read.
    "cflags": "",
}
# Checked when the target is parsed: the window buffer holds at most VANILLA_MAX_TAPS taps.
ATTR_RANGES = {"max_kernel_size": (1, MAX_KERNEL_SIZE)}
