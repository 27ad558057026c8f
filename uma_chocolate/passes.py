"""Chocolate's passes.

* ``PrepareCoreConv`` (Relay, after partitioning): per offloaded chain (quantized conv, bias,
  requantize, clamp), the weights as the core's B matrix ``[kh*kw*ic][oc]`` (HWIO flattened),
  the input zero point's contribution folded into the bias (the core multiplies raw int8 and
  the DMA pads with the input zero point), each channel's multiplier and shift; a stand-in
  body using exactly those tensors, the layer's scalars as a function attribute.
* ``ChocolateTilingPass`` (TIR, phase 0): the function becomes the scheduled GEMM of
  ``schedule.py``: loops of DMA transfers and core calls.
"""
import logging

import numpy as np
import tvm
from tvm import relay, tir

from tvm_extension.uma import offloaded_functions
from uma_qvanilla.packing import fold_bias
from uma_qvanilla.patterns import constant_operand, lower_clamps, out_channels, split_chain
from uma_qvanilla.quantization import activation_range, channel_params

from . import schedule

TARGET = "chocolate"
ATTR = "Chocolate"
log = logging.getLogger("tvm_extension")


def _scalar(const) -> int:
    return int(np.asarray(const.data.numpy()).reshape(-1)[0])


def _prepare(func: relay.Function) -> relay.Function:
    parts = split_chain(func.body)
    conv, requant = parts["qnn.conv2d"], parts["qnn.requantize"]
    bias_call, clip = parts.get("nn.bias_add") or parts.get("add"), parts.get("clip")
    weight = conv.args[1].data.numpy()  # HWIO
    kh, kw, ic, oc = weight.shape
    matrix = weight.reshape(kh * kw * ic, oc)
    input_zp = _scalar(conv.args[2])
    bias = None if bias_call is None else constant_operand(bias_call).data.numpy().reshape(-1)
    bias = fold_bias(bias, matrix.astype(np.int64).sum(axis=0), input_zp)
    table = channel_params(bias, requant.args[1].data.numpy(), requant.args[3].data.numpy(), oc)
    act_min, act_max = activation_range(clip.attrs.a_min if clip else None, clip.attrs.a_max if clip else None)
    if "maximum" in parts:  # ReLU before requantizing (ONNX QDQ)
        act_min = max(act_min, lower_clamps(parts)[0])
    data = conv.args[0].checked_type
    attrs = conv.attrs
    out = [int(d) for d in func.ret_type.shape]
    scalars = dict(ih=int(data.shape[1]), iw=int(data.shape[2]), ic=int(ic), oh=out[1], ow=out[2], oc=int(oc),
                   kh=int(kh), kw=int(kw), stride_h=int(attrs.strides[0]), stride_w=int(attrs.strides[1]),
                   pad_top=int(attrs.padding[0]), pad_left=int(attrs.padding[1]), input_zp=input_zp,
                   output_zp=_scalar(requant.args[4]), act_min=act_min, act_max=act_max)
    # A stand-in TVM lowers in no time whose buffers are the input, the weights matrix and the
    # channel table; the TIR pass replaces all of it.
    total = relay.sum(relay.cast(func.params[0], "int32"))
    for constant in (matrix, table):
        total = relay.add(total, relay.sum(relay.cast(relay.const(constant), "int32")))
    body = relay.cast(relay.broadcast_to(total, out), "int8")
    new = relay.Function(func.params, body, func.ret_type, func.type_params, func.attrs)
    return new.with_attr(ATTR, scalars)


@tvm.transform.module_pass(opt_level=0, name="PrepareCoreConv")
def prepare_core_conv(mod, _ctx):
    mod = relay.transform.InferType()(mod)
    for gvar, func in offloaded_functions(mod, TARGET):
        if ATTR not in func.attrs:
            mod[gvar] = _prepare(func)
    return relay.transform.InferType()(mod)


def _roles(func: tir.PrimFunc):
    """The stand-in's buffers by role, in parameter order."""
    roles = []
    for i, param in enumerate(func.params):
        buf = func.buffer_map[param]
        if i == len(func.params) - 1:
            roles.append(("output", buf))
        elif buf.dtype == "int32":
            roles.append(("table", buf))
        elif len(buf.shape) == 2:
            roles.append(("weights", buf))
        else:
            roles.append(("input", buf))
    return roles


class ChocolateTilingPass:
    """Phase 0: the offloaded function becomes its tiled, tensorized GEMM."""

    def __init__(self, backend):
        self._backend = backend

    def __call__(self, func, mod, ctx):
        relay_attrs = func.attrs["relay_attrs"] if func.attrs and "relay_attrs" in func.attrs else None
        if relay_attrs is None or ATTR not in relay_attrs:
            return func
        layer = schedule.ConvLayer(**{k: int(v) for k, v in relay_attrs[ATTR].items()})
        core = self._backend.core()
        plan = schedule.plan_layer(layer, core)
        log.info("%s: GEMM %d x %d x %d on %dx%dx%d tiles, %s (lower bound %d bytes)", func.attrs["global_symbol"],
                 *layer.gemm, core.tile_m, core.tile_n, core.tile_k, plan.describe(), layer.lower_bound())
        schedule.register_memory(plan)
        names = schedule.register_intrinsics(core, plan)
        roles = _roles(func)
        shapes = {role: [int(d) for d in buf.shape] for role, buf in roles}
        tensors = dict(zip(("input", "weights", "table", "output"), schedule.gemm_compute(layer, core, shapes)))
        scheduled = schedule.schedule(layer, core, plan, [tensors[role] for role, _ in roles], names)
        return tir.PrimFunc(scheduled.params, scheduled.body, func.ret_type, scheduled.buffer_map, func.attrs)


def tiling_pass(backend):
    return tvm.tir.transform.prim_func_pass(ChocolateTilingPass(backend), opt_level=2, name="ChocolateTiling")
