"""Relay patterns offloaded to Vanilla: exactly what its Conv2D engine can compute.

The engine's output stage adds a per-channel bias and clamps (ReLU, ReLU6, any clip), so
``conv2d -> add(bias) -> relu|clip`` is one offloaded call; each part after the conv is optional.
"""
from typing import Optional

import tvm
from tvm.relay.dataflow_pattern import is_constant, is_op, wildcard


def conv2d_pattern():
    conv = is_op("nn.conv2d")(wildcard(), wildcard())
    with_bias = conv.optional(lambda x: is_op("add")(x, is_constant()))
    return with_bias.optional(lambda x: is_op("nn.relu")(x) | is_op("clip")(x))


def split_composite(root):
    """(conv2d, add or None, relu/clip or None) of an expression matched by ``conv2d_pattern``."""
    parts = {}
    call = root
    while call.op.name != "nn.conv2d":
        parts[call.op.name] = call
        call = call.args[0]
    return call, parts.get("add"), parts.get("nn.relu") or parts.get("clip")


def _ints(values):
    return [int(v) for v in values]


def _static(shape) -> bool:
    return all(isinstance(d, tvm.tir.IntImm) for d in shape)


def _bias_problem(add, channels: int) -> Optional[str]:
    bias = add.args[1].checked_type
    if bias.dtype != "float32" or _ints(bias.shape) not in ([1, channels, 1, 1], [channels, 1, 1]):
        return f"bias of shape {_ints(bias.shape)} is not per output channel"
    return None


def why_not_offloaded(root, max_kernel_size: int) -> Optional[str]:
    """None when Vanilla computes this conv2d (with its bias and activation), else why not.

    Vanilla: NCHW/OIHW float32, batch 1, stride 1, no dilation or groups, odd kernel up to
    ``max_kernel_size``, "same" zero padding.
    """
    conv, add, _ = split_composite(root)
    attrs = conv.attrs
    data, weight = conv.args[0].checked_type, conv.args[1].checked_type
    if attrs.data_layout != "NCHW" or attrs.kernel_layout != "OIHW" or attrs.out_layout not in ("", "NCHW"):
        return f"layout {attrs.data_layout}/{attrs.kernel_layout} (needs NCHW/OIHW)"
    if data.dtype != "float32" or weight.dtype != "float32" or attrs.out_dtype not in ("", "float32"):
        return f"dtype {data.dtype} (needs float32)"
    if len(data.shape) != 4 or not (_static(data.shape) and _static(weight.shape)):
        return "dynamic shape"
    if int(attrs.groups) != 1:
        return "grouped/depthwise"
    if _ints(attrs.strides) != [1, 1]:
        return f"stride {'x'.join(map(str, _ints(attrs.strides)))} (needs 1)"
    if _ints(attrs.dilation) != [1, 1]:
        return "dilation"
    if int(data.shape[0]) != 1:
        return f"batch {int(data.shape[0])} (needs 1)"
    kh, kw = _ints(weight.shape[2:])
    if kh % 2 == 0 or kw % 2 == 0:
        return f"even kernel {kh}x{kw}"
    if max(kh, kw) > max_kernel_size:
        return f"kernel {kh}x{kw} above max_kernel_size {max_kernel_size}"
    ph, pw = (kh - 1) // 2, (kw - 1) // 2
    if _ints(attrs.padding) != [ph, pw, ph, pw]:
        return "padding is not 'same'"
    return _bias_problem(add, int(weight.shape[0])) if add is not None else None


def conv2d_supported(conv, max_kernel_size: int) -> bool:
    return why_not_offloaded(conv, max_kernel_size) is None
