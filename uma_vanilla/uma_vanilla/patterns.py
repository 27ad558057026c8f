"""Relay patterns offloaded to Vanilla: exactly what its Conv2D engine can compute.

The engine computes any window (kernel size, stride, zero padding).  Its output stage adds a
per-channel bias, then a residual tensor of the output's shape (the skip connection of
ResNet-style blocks), and applies an activation (ReLU, ReLU6, any clip, per-channel PReLU), so
``conv2d -> add|bias_add(bias) -> add(residual) -> relu|clip|prelu`` is one offloaded call: the
kit's float conv patterns (``tvm_extension.kit.conv_patterns``), with Vanilla's limits.
"""
import math
from typing import Optional

from tvm_extension.kit import conv_patterns
from tvm_extension.kit.conv_patterns import (  # noqa: F401  (the patterns the backend registers)
    conv2d_alone_pattern, conv2d_pattern, conv2d_residual_pattern,
)
from tvm_extension.kit.limits import c_limits

from .codegen import KERNEL_DIR

# The kernel's own limits (vanilla_accelerator.h): the patterns refuse what its check() refuses.
LIMITS = c_limits(KERNEL_DIR / "vanilla_accelerator.h", "VANILLA_")
MAX_TAPS = LIMITS["MAX_TAPS"]
# The largest max_kernel_size: a square window the depthwise buffer holds (8x8 of 64 taps).
MAX_KERNEL_SIZE = math.isqrt(MAX_TAPS)


def why_not_offloaded(root, max_kernel_size: int) -> Optional[str]:
    """None when Vanilla computes this conv2d (with its bias and activation), else why not.

    Vanilla: NCHW/OIHW or NHWC/HWIO float32, batch 1, no dilation, dense or depthwise, kernel of at most
    ``max_kernel_size`` squared taps (9x1 fits 7x7's buffer); any stride and zero padding.
    """
    return conv_patterns.why_not_offloaded(root, max_kernel_size, MAX_TAPS)


def hard_activation_reason(clip) -> Optional[str]:
    """Why a hard-sigmoid / hard-swish clip stays on the CPU (for the offload report), else None."""
    return conv_patterns.hard_activation_reason(clip, "Vanilla's output stage")
