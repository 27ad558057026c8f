"""What Chocolate offloads: dense convs (a depthwise conv is no matrix product), NHWC/HWIO
(ONNX's NCHW is converted before partitioning).

* int8: the kit's quantized conv chains (conv, bias, requantize, clamp: ``qconv_patterns``),
  with symmetric weights (the core multiplies raw int8 values) and any requantize shift;
* float32: the kit's conv patterns (conv, bias, ReLU or clip: ``conv_patterns``), without
  residual or PReLU: the core's output stage adds a bias and clamps.
"""
from typing import Optional

import tvm

from tvm_extension.kit.conv_patterns import conv2d_alone_pattern, conv2d_pattern, is_depthwise, split_composite
from tvm_extension.kit.conv_patterns import why_not_offloaded as float_problem
from tvm_extension.kit.limits import INT32_MAX, PTRDIFF_MAX, below_one, conv_geometry
from tvm_extension.kit.qconv_patterns import conv_problem, qconv2d_pattern, split_chain
from tvm_extension.kit.qconv_patterns import is_depthwise as is_quantized_depthwise
from tvm_extension.kit.qconv_patterns import why_not_offloaded as quantized_problem

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
        return window_problem(conv)
    if int(conv.attrs.groups) != 1:
        return "depthwise (not a matrix product; stays on the CPU)" if is_depthwise(conv) else "grouped"
    return window_problem(conv)


def window_problem(conv) -> Optional[str]:
    """Why chocolate_configure_s8/_f32 (chocolate.c) would refuse this conv's geometry, in its
    order, else None.  Its DMA pads less than the window on the top and left: 0 <= pad < kernel."""
    types = (conv.args[0].checked_type, conv.args[1].checked_type, conv.checked_type)
    if not all(isinstance(d, tvm.tir.IntImm) for t in types for d in t.shape):
        return "dynamic shape"
    g = conv_geometry(conv)
    if below_one(g):
        return f"{below_one(g)}: below 1 (CHOCOLATE_ELAYER)"
    kh, kw, top, left = g["kh"], g["kw"], g["pad_top"], g["pad_left"]
    if g["stride_h"] < 1 or g["stride_w"] < 1 or not (0 <= top < kh and 0 <= left < kw):
        return (f"padding top {top}, left {left} of a {kh}x{kw} window at stride {g['stride_h']}x{g['stride_w']} "
                "(the DMA pads 0 <= pad < the window: CHOCOLATE_ELAYER)")
    rows, depth, elem = g["oh"] * g["ow"], kh * kw * g["ic"], 1 if conv.op.name == "qnn.conv2d" else 4
    largest = max(g["ih"] * g["iw"] * g["ic"], max(rows, depth) * g["oc"]) * elem
    if max(rows, depth, *g.values()) > INT32_MAX or largest > PTRDIFF_MAX:
        return "too large for the core's int32 configuration (CHOCOLATE_ELAYER)"
    return None


def chain_problem(root) -> Optional[str]:
    """int8 chains."""
    return quantized_problem(root) or core_problem(split_chain(root)["qnn.conv2d"])  # any shift


def float_chain_problem(root) -> Optional[str]:
    """float32 chains."""
    parts = split_composite(root)
    problem = core_problem(parts.conv) or float_problem(root, NO_KERNEL_LIMIT)
    if problem:
        return problem
    if parts.conv.attrs.data_layout != "NHWC":
        return f"layout {parts.conv.attrs.data_layout} (needs NHWC)"
    if parts.residual is not None:
        return "residual add: not in the core's output stage"
    if parts.activation is not None and parts.activation.op.name == "nn.prelu":
        return "PReLU: not in the core's output stage (bias and clamp)"
    return None
