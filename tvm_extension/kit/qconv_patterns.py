"""The quantized Conv2D chains TVM's frontends produce, for an int8 kernel that computes one
chain per call: dense convs, and depthwise convs (groups = channels, channel multiplier 1), NHWC.

TFLite int8: qnn.conv2d -> nn.bias_add -> qnn.requantize -> clip (the fused activation).
ONNX QDQ (after FakeQuantizationToInteger): qnn.conv2d -> nn.bias_add -> maximum (ReLU) -> qnn.requantize.

``qconv2d_pattern`` matches a chain, ``split_chain`` names its calls, ``why_not_offloaded`` says
in one phrase why an int8 kernel with per-channel requantization would refuse it (None: it
computes it); ``chain_clamp`` and ``lower_clamps`` give the output clamp the kernel applies.
"""
from typing import Optional, Tuple

import numpy as np
from tvm import relay
from tvm.relay.dataflow_pattern import is_constant, is_op, wildcard

from tvm_extension.tflite_exact.rewrite import TFLITE

from . import limits
from .limits import conv_geometry
from .quantization import activation_range, chain_channel_params, channel_multipliers, requantize_int, rounding_code

INT8 = (-128, 127)


def qconv2d_pattern():
    conv = is_op("qnn.conv2d")(wildcard(), is_constant(), is_constant(), is_constant(), is_constant(), is_constant())
    biased = conv.optional(lambda x: is_op("nn.bias_add")(x, is_constant()) | is_op("add")(x, is_constant()))
    relu = biased.optional(lambda x: is_op("maximum")(x, is_constant()))
    requant = is_op("qnn.requantize")(relu, is_constant(), is_constant(), is_constant(), is_constant())
    return requant.optional(lambda x: is_op("clip")(x))


def chain_operand(call):
    """The operand of ``call`` that continues the chain: TVM's matcher takes add and maximum
    as commutative, so their constant may come first."""
    if call.op.name in ("add", "maximum") and isinstance(call.args[1], relay.Call):
        return call.args[1]
    return call.args[0]


def constant_operand(call):
    """The constant of an add, bias_add or maximum in a matched chain."""
    return call.args[0] if chain_operand(call) is call.args[1] else call.args[1]


def split_chain(root):
    """{op name: call} of a matched chain, from the root back to qnn.conv2d."""
    parts, call = {}, root
    while True:
        parts[call.op.name] = call
        if call.op.name == "qnn.conv2d":
            return parts
        call = chain_operand(call)


def _scalar(const) -> bool:
    """One value (possibly repeated per channel, as FakeQuantizationToInteger leaves zero points)."""
    values = const.data.numpy().reshape(-1)
    return bool(np.all(values == values[0]))


def out_channels(conv) -> int:
    """The output channels of a typed qnn.conv2d in NHWC."""
    return int(conv.checked_type.shape[3])


def is_depthwise(conv) -> bool:
    """A depthwise qnn.conv2d the kernel takes: groups = input channels = output channels (a
    channel multiplier of 1), weights HWOI (TFLite) or HWIO (ONNX after the layout conversion)
    with the unit axis where it belongs."""
    attrs = conv.attrs
    groups, channels = int(attrs.groups), int(conv.args[0].checked_type.shape[3])
    if groups == 1 or groups != channels or out_channels(conv) != channels:
        return False
    kh, kw, a, b = (int(d) for d in conv.args[1].checked_type.shape)
    return (attrs.kernel_layout, a, b) in (("HWOI", channels, 1), ("HWIO", 1, channels))


def conv_problem(conv) -> Optional[str]:
    """None when the kernel can compute this qnn.conv2d (dense or depthwise), else why not."""
    if conv.op.name != "qnn.conv2d":
        return "not a quantized conv2d"
    attrs = conv.attrs
    data, weight = conv.args[0].checked_type, conv.args[1].checked_type
    if attrs.data_layout != "NHWC":
        return f"layout {attrs.data_layout}/{attrs.kernel_layout} (needs NHWC/HWIO)"
    groups, channels = int(attrs.groups), int(data.shape[3])
    if groups != 1 and not is_depthwise(conv):
        if groups == channels and out_channels(conv) == channels:
            return f"depthwise weights in {attrs.kernel_layout} (needs HWOI or HWIO)"
        if groups == channels:
            return f"depthwise with channel multiplier {out_channels(conv) // channels}"
        return f"grouped (groups={groups} of {channels} channels)"
    if groups == 1 and attrs.kernel_layout != "HWIO":
        return f"layout {attrs.data_layout}/{attrs.kernel_layout} (needs NHWC/HWIO)"
    if data.dtype != "int8" or weight.dtype != "int8":
        return f"dtype {data.dtype}/{weight.dtype} (needs int8)"
    if [int(d) for d in attrs.dilation] != [1, 1]:
        return "dilation"
    if int(data.shape[0]) != 1:
        return "batch is not 1"
    if not (_scalar(conv.args[2]) and _scalar(conv.args[3])):
        return "per-channel zero points"
    return geometry_problem(conv)


def why_not_offloaded(root, shifts: Optional[Tuple[int, int]] = None) -> Optional[str]:
    """None when the kernel computes this chain (conv, bias, requantize, clamp), else why not.

    ``shifts``: the (lowest, highest) requantize shift the kernel takes (None: any).
    """
    parts = split_chain(root)
    if "qnn.requantize" not in parts:
        return "no requantize to int8 after it"
    conv, requant = parts["qnn.conv2d"], parts["qnn.requantize"]
    problem = conv_problem(conv)
    if problem:
        return problem
    channels = out_channels(conv)
    bias_call = parts.get("nn.bias_add") or parts.get("add")
    if bias_call is not None:
        bias = constant_operand(bias_call).data.numpy()
        per_channel = bias.shape in ((channels,), (1, 1, 1, channels))
        if bias.dtype != np.int32 or not per_channel or (bias_call.op.name == "nn.bias_add" and
                                                         int(bias_call.attrs.axis) not in (-1, 3)):
            return f"bias of shape {list(bias.shape)} ({bias.dtype}) is not int32 per output channel"
    if requant.attrs.out_dtype != "int8":
        return f"requantize to {requant.attrs.out_dtype} (needs int8)"
    if "maximum" in parts and len(set(lower_clamps(parts))) != 1:
        return "ReLU threshold differs per channel"
    if int(np.asarray(requant.args[2].data.numpy()).reshape(-1)[0]) != 0 or not _scalar(requant.args[2]):
        return "requantize input zero point is not 0"
    if not requant.args[1].data.numpy().size in (1, channels) or int(requant.attrs.axis) not in (-1, 3):
        return "requantize scales are not per output channel"
    if str(requant.attrs.rounding) not in ("None", "UPWARD", TFLITE):
        return f"rounding {requant.attrs.rounding}"
    return kernel_problem(parts, shifts)


def chain_clamp(parts):
    """(act_min, act_max) of a matched chain: its clip, raised by a ReLU before requantizing."""
    clip = parts.get("clip")
    act_min, act_max = activation_range(clip.attrs.a_min if clip else None, clip.attrs.a_max if clip else None)
    if "maximum" in parts:  # ReLU before requantizing (ONNX QDQ)
        act_min = max(act_min, lower_clamps(parts)[0])
    return act_min, act_max


def geometry_problem(conv) -> Optional[str]:
    """Why the kernel's check() would refuse this conv's sizes, strides or pads, else None (QVanilla's
    in qvanilla.c: its weights packed as int16, their rows padded)."""
    # int8 input and output; weights packed as int16, (1 << 20) bytes of slack for their rows' padding
    return limits.geometry_problem(conv_geometry(conv), depthwise=is_depthwise(conv), element_bytes=1, weight_bytes=2,
                                   weight_slack=1 << 20)


def kernel_problem(parts, shifts: Optional[Tuple[int, int]] = None) -> Optional[str]:
    """Why the kernel's check() would refuse this chain's clamp, zero points or shifts (outside
    ``shifts``, the (lowest, highest) it takes; None: any) (``geometry_problem``: the rest), else None."""
    conv, requant = parts["qnn.conv2d"], parts["qnn.requantize"]
    act_min, act_max = chain_clamp(parts)
    if not INT8[0] <= act_min <= act_max <= INT8[1]:
        return f"output clamp [{act_min}, {act_max}] is not a range of int8"
    zero_points = [int(np.asarray(c.data.numpy()).reshape(-1)[0]) for c in (conv.args[2], conv.args[3], requant.args[4])]
    if not all(INT8[0] <= zp <= INT8[1] for zp in zero_points):
        return f"zero points {zero_points} (input, weights, output) are not int8"
    if shifts is None:
        return None
    lowest, highest = shifts
    found = channel_multipliers(conv, requant, out_channels(conv))[1]
    if any(not lowest <= s <= highest for s in found):
        return f"requantize shift {min(found)}..{max(found)} outside the kernel's {lowest}..{highest} (scale ratio)"
    return None


def lower_clamps(parts):
    """Per channel, the int8 value ``maximum(acc, c)`` before requantizing clamps to."""
    requant = parts["qnn.requantize"]
    channels = int(parts["qnn.conv2d"].checked_type.shape[-1 if parts["qnn.conv2d"].attrs.data_layout == "NHWC" else 1])
    params = chain_channel_params(parts, None, channels)
    rounding = rounding_code(requant)
    threshold = constant_operand(parts["maximum"]).data.numpy().reshape(-1)
    if threshold.size not in (1, channels):
        raise ValueError(f"ReLU threshold of {threshold.size} values for {channels} channels")
    threshold = np.broadcast_to(threshold, (channels,))
    zp = int(np.asarray(requant.args[4].data.numpy()).reshape(-1)[0])
    return [requantize_int(int(t), int(m), int(s), rounding) + zp for t, m, s in zip(threshold, params[1], params[2])]
