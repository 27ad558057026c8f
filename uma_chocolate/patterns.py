"""What Chocolate offloads: dense convs (a depthwise conv is no matrix product), NHWC/HWIO
(ONNX's NCHW is converted before partitioning).

* int8: QVanilla's quantized conv chains (conv, bias, requantize, clamp), with symmetric
  weights (the core multiplies raw int8 values);
* float32: Vanilla's conv patterns (conv, bias, ReLU or clip), without residual or PReLU: the
  core's output stage adds a bias and clamps.
"""
from typing import Optional

from uma_qvanilla.patterns import conv_problem, qconv2d_pattern, split_chain
from uma_qvanilla.patterns import is_depthwise as is_quantized_depthwise
from uma_qvanilla.patterns import why_not_offloaded as qvanilla_problem
from uma_vanilla.patterns import conv2d_alone_pattern, conv2d_pattern, is_depthwise, split_composite
from uma_vanilla.patterns import why_not_offloaded as vanilla_problem

__all__ = ["qconv2d_pattern", "conv2d_pattern", "conv2d_alone_pattern", "core_problem", "chain_problem",
           "float_chain_problem"]

NO_KERNEL_LIMIT = 1 << 16  # the im2col view takes any window


def core_problem(conv) -> Optional[str]:
    """None when the core computes this conv (before what follows it), else why not."""
    if conv.op.name == "qnn.conv2d":
        problem = conv_problem(conv)
        if problem:
            return problem
        if is_quantized_depthwise(conv):
            return "depthwise (not a matrix product; stays on the CPU)"
        weight_zp = conv.args[3].data.numpy().reshape(-1)[0]
        if weight_zp != 0:
            return f"weight zero point {int(weight_zp)} (the core multiplies raw int8 weights: needs 0)"
        return None
    if int(conv.attrs.groups) != 1:
        return "depthwise (not a matrix product; stays on the CPU)" if is_depthwise(conv) else "grouped"
    return None


def chain_problem(root) -> Optional[str]:
    """int8 chains."""
    return qvanilla_problem(root) or core_problem(split_chain(root)["qnn.conv2d"])


def float_chain_problem(root) -> Optional[str]:
    """float32 chains."""
    parts = split_composite(root)
    problem = core_problem(parts.conv) or vanilla_problem(root, NO_KERNEL_LIMIT)
    if problem:
        return problem
    if parts.conv.attrs.data_layout != "NHWC":
        return f"layout {parts.conv.attrs.data_layout} (needs NHWC)"
    if parts.residual is not None:
        return "residual add: not in the core's output stage"
    if parts.activation is not None and parts.activation.op.name == "nn.prelu":
        return "PReLU: not in the core's output stage (bias and clamp)"
    return None
