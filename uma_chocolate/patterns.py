"""What Chocolate offloads: QVanilla's quantized conv chains, dense convs only (a depthwise
conv is no matrix product), with symmetric weights (the core multiplies raw int8 values)."""
from typing import Optional

from uma_qvanilla.patterns import conv_problem, is_depthwise, qconv2d_pattern, split_chain
from uma_qvanilla.patterns import why_not_offloaded as qvanilla_problem

__all__ = ["qconv2d_pattern", "core_problem", "chain_problem"]


def core_problem(conv) -> Optional[str]:
    """None when the core computes this qnn.conv2d, else why not."""
    problem = conv_problem(conv)
    if problem:
        return problem
    if is_depthwise(conv):
        return "depthwise (not a matrix product; stays on the CPU)"
    weight_zp = conv.args[3].data.numpy().reshape(-1)[0]
    if weight_zp != 0:
        return f"weight zero point {int(weight_zp)} (the core multiplies raw int8 weights: needs 0)"
    return None


def chain_problem(root) -> Optional[str]:
    return qvanilla_problem(root) or core_problem(split_chain(root)["qnn.conv2d"])
