"""Vanilla's Relay side: the patterns offloaded to it (exactly what its Conv2D engine can
compute) and the Relay passes around partitioning.  The one module that speaks Relay, besides
backend.py's UMA wiring.

The engine computes any window (kernel size, stride, zero padding).  Its output stage adds a
per-channel bias, then a residual tensor of the output's shape (the skip connection of
ResNet-style blocks), and applies an activation (ReLU, ReLU6, any clip, per-channel PReLU), so
``conv2d -> add|bias_add(bias) -> add(residual) -> relu|clip|prelu`` is one offloaded call: the
kit's float conv patterns (``tvm_extension.kit.conv_patterns``), with Vanilla's limits.
"""
from typing import Optional

from tvm_extension.kit import conv_patterns
from tvm_extension.kit.conv_patterns import (  # noqa: F401  (the patterns the backend registers)
    conv2d_alone_pattern, conv2d_pattern, conv2d_residual_pattern,
)
from tvm_extension.kit.describe import describe_pass
from tvm_extension.kit.layout import fold_weights_pass, pack_weights_pass
from tvm_extension.uma import lift_constants_pass

from tvm_extension.kit.workspace import scratch_output_pass

from .passes import ATTR, scratch_bytes
from .target import MAX_KERNEL_SIZE, MAX_TAPS, NAME  # noqa: F401  (MAX_KERNEL_SIZE: for the backend)

# Records on each offloaded function what its TIR pass reads (roles, window, clamp) as ATTR.
describe_output_stage = describe_pass(NAME, ATTR, "VanillaDescribeOutputStage")


def why_not_offloaded(root, max_kernel_size: int) -> Optional[str]:
    """None when Vanilla computes this conv2d (with its bias and activation), else why not.

    Vanilla: NCHW/OIHW or NHWC/HWIO float32, batch 1, no dilation, dense or depthwise, kernel of at most
    ``max_kernel_size`` squared taps (9x1 fits 7x7's buffer); any stride and zero padding.
    """
    return conv_patterns.why_not_offloaded(root, max_kernel_size, MAX_TAPS)


def hard_activation_reason(clip) -> Optional[str]:
    """Why a hard-sigmoid / hard-swish clip stays on the CPU (for the offload report), else None."""
    return conv_patterns.hard_activation_reason(clip, "Vanilla's output stage")


def pack_weights():
    """Vanilla reads weights as [oc][ic][kh][kw] whatever the feature maps' layout."""
    return pack_weights_pass(NAME, "OIHW", name="VanillaPackWeights")


def fold_weights():
    """TFLite's float16 weights arrive as cast(constant): fold them so the pattern sees constants."""
    return fold_weights_pass(name="VanillaFoldWeights")


def lift_constants():
    """Every tensor an offloaded function reads becomes a parameter (the framework would do it
    after the backend's passes; describing the roles needs it first)."""
    return lift_constants_pass(NAME)


def _scratch_bytes(func) -> int:
    stage, params = func.attrs[ATTR], func.params
    shape = lambda role: params[int(stage[role])].checked_type.shape
    return scratch_bytes(func.attrs["global_symbol"], stage, shape("ifmap"), shape("weights"), func.ret_type.shape)


def plan_scratch():
    """Each call's scratch (its C entry's ``_get_buffer_size``) becomes the offloaded function's
    second output, so the AOT planner puts it in the workspace instead of the heap."""
    return scratch_output_pass(NAME, ATTR, _scratch_bytes, name="VanillaPlanScratch")
