"""QVanilla's Relay side (the one module that speaks Relay, with backend.py's wiring).

* The quantized Conv2D chains it offloads, one kernel call each: the kit's
  (``tvm_extension.kit.qconv_patterns``: dense and depthwise int8 convs with bias, requantize and
  clamp), with the requantize shifts its kernel takes (qvanilla.h).
* ``PrepareQuantizedConv`` (after partitioning): reads the zero points, scales, bias and clamp of
  every offloaded chain and turns them into what the packed C entries take: the weights packed
  (``packing``: int16, weight zero point subtracted, in the engine's order; int8 for the packed8
  entry if the target's ``int8_weights`` asks and they fit), the input zero
  point's contribution folded into the bias, each output channel's multiplier and shift
  (``tvm_extension.kit.quantization``).  It leaves a function TVM can lower cheaply that uses
  every tensor the kernel needs (input, packed weights, channel table) and outputs the conv's
  tensor and the C entry's scratch (a workspace tensor the AOT planner places), with the scalars
  as a function attribute, which the TIR pass (``passes.py``) reads.  The scratch's size depends on
  the target's ``scratch_budget``.
"""
from typing import Optional

import numpy as np
import tvm
from tvm import relay

from tvm_extension.kit import qconv_patterns
from tvm_extension.kit.limits import c_limits
from tvm_extension.kit.qconv_patterns import (chain_clamp, constant_operand, is_depthwise, out_channels,
                                              split_chain)
from tvm_extension.kit.qconv_patterns import conv_problem, qconv2d_pattern  # noqa: F401  (the backend's)
from tvm_extension.kit.workspace import scratch_tensor, take_first_outputs, with_output
from tvm_extension.kit.quantization import chain_channel_params, rounding_code  # qvanilla.h: QVANILLA_ROUNDING_*
from tvm_extension.uma import config_of, offloaded_functions

from . import packing, scratch, target
from .codegen import KERNEL_DIR
from .passes import ATTR
from .target import NAME as TARGET

LIMITS = c_limits(KERNEL_DIR / "qvanilla.h", "QVANILLA_")  # the kernel's check() refuses what they exclude


def why_not_offloaded(root) -> Optional[str]:
    """None when QVanilla computes this chain (conv, bias, requantize, clamp), else why not."""
    return qconv_patterns.why_not_offloaded(root, shifts=(LIMITS["SHIFT_MIN"], LIMITS["SHIFT_MAX"]))


def _scalar(const) -> float:
    return np.asarray(const.data.numpy()).reshape(-1)[0].item()


def _prepare(func: relay.Function, budget: int, int8_weights: bool) -> relay.Function:
    parts = split_chain(func.body)
    conv, requant = parts["qnn.conv2d"], parts["qnn.requantize"]
    bias_call = parts.get("nn.bias_add") or parts.get("add")
    weight = conv.args[1].data.numpy()  # HWIO, or HWOI / HWIO with a unit axis (depthwise)
    channels, depthwise = out_channels(conv), is_depthwise(conv)
    input_zp, weight_zp = int(_scalar(conv.args[2])), int(_scalar(conv.args[3]))
    bias = None if bias_call is None else constant_operand(bias_call).data.numpy().reshape(-1)
    if depthwise:
        packed, bias = packing.pack_depthwise(weight.reshape(weight.shape[0], weight.shape[1], channels),
                                              weight_zp, input_zp, bias)
    else:
        int8 = int8_weights and packing.fits_int8(weight, weight_zp)
        packed, bias = (packing.pack_conv8 if int8 else packing.pack_conv)(weight, weight_zp, input_zp, bias)
    params = chain_channel_params(parts, bias, channels)
    act_min, act_max = chain_clamp(parts)  # what the pattern checked
    attrs = conv.attrs
    pad_top, pad_left, _, _ = [int(p) for p in attrs.padding]
    scalars = {
        "depthwise": int(depthwise), "kh": int(weight.shape[0]), "kw": int(weight.shape[1]),
        "stride_h": int(attrs.strides[0]), "stride_w": int(attrs.strides[1]),
        "pad_top": pad_top, "pad_left": pad_left,
        "input_zp": input_zp, "output_zp": int(_scalar(requant.args[4])), "act_min": act_min, "act_max": act_max,
        "rounding": rounding_code(requant), "packed8": int(packed.dtype == np.int8),
    }
    # A stand-in TVM lowers in no time, reading the input, the packed weights and the channel
    # table (which become the PrimFunc's buffers), with two outputs: the conv's, and the scratch
    # the C entry takes (its _get_buffer_size, mirrored by scratch.py), so that the AOT planner
    # puts the scratch in the workspace with the tensors.  The TIR pass replaces all of it by the
    # kernel call.
    kind = scratch.packed_kind(depthwise, scalars["packed8"])
    ic = int(func.params[0].checked_type.shape[3])
    nbytes = scratch.buffer_size(kind, scalars["kh"], scalars["kw"], ic, channels, budget)
    total = relay.sum(relay.cast(func.params[0], "int32"))
    for constant in (packed, params):
        total = relay.add(total, relay.sum(relay.cast(relay.const(constant), "int32")))
    output = relay.cast(relay.broadcast_to(total, [int(d) for d in func.ret_type.shape]), "int8")
    return with_output(func.with_attr(ATTR, scalars), [output, scratch_tensor(func.params[0], nbytes)])


def prepare_quantized_conv(backend) -> tvm.transform.Pass:
    """``PrepareQuantizedConv`` for ``backend`` (whose compile's attributes size the scratch)."""

    @tvm.transform.module_pass(opt_level=0, name="PrepareQuantizedConv")
    def prepare(mod, _ctx):
        mod = relay.transform.InferType()(mod)  # the predicates' helpers read types
        config = config_of(backend)
        budget, int8_weights = target.scratch_budget(config), target.int8_weights(config)
        prepared = []
        for gvar, func in offloaded_functions(mod, TARGET):
            if ATTR not in func.attrs:
                mod[gvar] = _prepare(func, budget, int8_weights)
                prepared.append(gvar)
        return take_first_outputs(mod, prepared)

    return prepare
