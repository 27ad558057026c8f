"""The quantized Conv2D chains QVanilla offloads, one kernel call each: the kit's
(``tvm_extension.kit.qconv_patterns``: dense and depthwise int8 convs with bias, requantize and
clamp), with the requantize shifts its kernel takes (qvanilla.h)."""
from typing import Optional

from tvm_extension.kit import qconv_patterns
from tvm_extension.kit.limits import c_limits
from tvm_extension.kit.qconv_patterns import conv_problem, qconv2d_pattern  # noqa: F401  (the backend's)

from .codegen import KERNEL_DIR

LIMITS = c_limits(KERNEL_DIR / "qvanilla.h", "QVANILLA_")  # the kernel's check() refuses what they exclude


def why_not_offloaded(root) -> Optional[str]:
    """None when QVanilla computes this chain (conv, bias, requantize, clamp), else why not."""
    return qconv_patterns.why_not_offloaded(root, shifts=(LIMITS["SHIFT_MIN"], LIMITS["SHIFT_MAX"]))
