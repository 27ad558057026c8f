"""Strawberry in Relay: the patterns it offloads and the Relay passes around partitioning (the
one module of the backend that speaks Relay, with backend.py's wiring).

The patterns are Vanilla's (both compute on the kit's conv engine), plus one condition of its
own: the layer must fit the scratchpad at some split (``tiling.plan_layer``).  The patterns, the
split of a matched expression into conv / bias / residual / activation and the reasons a conv
engine refuses a match are the kit's (``tvm_extension.kit.conv_patterns``); the engine's own
limits are read from the kit's C header (kit_conv_f32.h).
"""
from typing import Optional

import tvm

from tvm_extension.kit import conv_patterns
from tvm_extension.kit.conv_patterns import (  # noqa: F401  (the patterns the backend registers)
    conv2d_alone_pattern, conv2d_pattern, conv2d_residual_pattern, is_depthwise, split_composite,
)
from tvm_extension.kit.describe import describe_pass
from tvm_extension.kit.layout import fold_weights_pass, pack_weights_pass
from tvm_extension.uma import config_of, lift_constants_pass

from .passes import ATTR
from .target import MAX_KERNEL_SIZE, MAX_TAPS, NAME as TARGET
from .tiling import Config, Layer, Unfit, plan_layer



def hard_activation_reason(clip) -> Optional[str]:
    """Why a hard-sigmoid / hard-swish clip stays on the CPU (for the offload report), else None."""
    return conv_patterns.hard_activation_reason(clip, "Vanilla's output stage")


def layer_of(root) -> Layer:
    """The Layer of a matched (type-checked) expression: conv2d [-> bias] [-> residual] [-> activation]."""
    conv, add, _, residual, activation = split_composite(root)
    attrs = conv.attrs
    layout = str(attrs.data_layout)
    data = [int(d) for d in conv.args[0].checked_type.shape]
    out = [int(d) for d in conv.checked_type.shape]
    weight = [int(d) for d in conv.args[1].checked_type.shape]
    size = dict(zip(layout, data))
    out_size = dict(zip(layout, out))
    kernel_layout = str(attrs.kernel_layout)
    pad_top, pad_left = (int(p) for p in attrs.padding[:2])
    stride_h, stride_w = (int(s) for s in attrs.strides)
    return Layer(
        layout=layout.lower(), depthwise=is_depthwise(conv), ic=size["C"], ih=size["H"], iw=size["W"],
        oc=out_size["C"], oh=out_size["H"], ow=out_size["W"], kh=weight[kernel_layout.index("H")],
        kw=weight[kernel_layout.index("W")], stride_h=stride_h, stride_w=stride_w, pad_top=pad_top, pad_left=pad_left,
        bias=add is not None, residual=residual is not None,
        slope=activation is not None and activation.op.name == "nn.prelu",
    )


def why_not_offloaded(root, config: Config) -> Optional[str]:
    """None when Strawberry computes this match, else why not (for the offload report)."""
    reason = conv_patterns.why_not_offloaded(root, MAX_KERNEL_SIZE, MAX_TAPS)
    if reason is not None:
        return reason
    try:
        plan_layer(layer_of(root), config)
    except Unfit as unfit:
        return f"too large for the scratchpad at any split ({unfit}; scratchpad_bytes {config.spad_bytes})"
    return None


# Which parameter is what (ifmap, weights, bias, residual, PReLU slope), the window and the
# clamp, read from Relay (the kit's describe_pass), so the TIR pass needs no block names.
describe_layer = describe_pass(TARGET, ATTR, "StrawberryDescribeLayer")


def validate_config(backend):
    """Before partitioning: the target attributes must describe a chip (one line otherwise)."""

    @tvm.transform.module_pass(opt_level=0, name="StrawberryValidateConfig")
    def validate(mod, _ctx):
        Config.from_attrs(config_of(backend).as_dict())
        return mod

    return validate


def pack_weights():
    """Strawberry's engine reads weights as [oc][ic][kh][kw] whatever the feature maps' layout."""
    return pack_weights_pass(TARGET, "OIHW", name="StrawberryPackWeights")


def fold_weights():
    return fold_weights_pass(name="StrawberryFoldWeights")


def lift_constants():
    return lift_constants_pass(TARGET)
