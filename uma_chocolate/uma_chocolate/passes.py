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

from tvm_extension.kit.conv_patterns import split_composite
from tvm_extension.kit.qconv_patterns import constant_operand, lower_clamps, split_chain
from tvm_extension.kit.quantization import activation_range, channel_params, fold_bias
from tvm_extension.uma import offloaded_functions

from . import schedule

TARGET = "chocolate"
ATTR = "Chocolate"
log = logging.getLogger("tvm_extension")


def _scalar(const) -> int:
    return int(np.asarray(const.data.numpy()).reshape(-1)[0])


def _stand_in(func: relay.Function, constants, dtype: str) -> relay.Function:
    """A body TVM lowers in no time whose buffers are the input and ``constants``; the TIR pass
    replaces all of it."""
    acc = "int32" if dtype == "int8" else "float32"
    total = relay.sum(relay.cast(func.params[0], acc))
    for constant in constants:
        total = relay.add(total, relay.sum(relay.cast(relay.const(constant), acc)))
    body = relay.cast(relay.broadcast_to(total, [int(d) for d in func.ret_type.shape]), dtype)
    return relay.Function(func.params, body, func.ret_type, func.type_params, func.attrs)


def _geometry(conv, out_type) -> dict:
    data, weight = conv.args[0].checked_type, conv.args[1].checked_type
    kh, kw, ic, oc = (int(d) for d in weight.shape)  # HWIO
    out = [int(d) for d in out_type.shape]
    attrs = conv.attrs
    return dict(ih=int(data.shape[1]), iw=int(data.shape[2]), ic=ic, oh=out[1], ow=out[2], oc=oc, kh=kh, kw=kw,
                stride_h=int(attrs.strides[0]), stride_w=int(attrs.strides[1]), pad_top=int(attrs.padding[0]),
                pad_left=int(attrs.padding[1]))


def _prepare_float(func: relay.Function) -> relay.Function:
    conv, bias_call, _, _, activation = split_composite(func.body)
    weight = conv.args[1].data.numpy()  # HWIO
    kh, kw, ic, oc = weight.shape
    bias = np.zeros(oc, np.float32)
    if bias_call is not None:
        bias = constant_operand(bias_call).data.numpy().reshape(-1).astype(np.float32)
    lo, hi = -np.inf, np.inf
    if activation is not None and activation.op.name == "nn.relu":
        lo = 0.0
    elif activation is not None:  # clip
        lo, hi = float(activation.attrs.a_min), float(activation.attrs.a_max)
    scalars = dict(_geometry(conv, func.ret_type), dtype="float32", lo=str(float(lo)), hi=str(float(hi)))
    new = _stand_in(func, (weight.reshape(kh * kw * ic, oc), bias.reshape(1, oc)), "float32")
    return new.with_attr(ATTR, scalars)


def _prepare(func: relay.Function) -> relay.Function:
    if func.ret_type.dtype == "float32":
        return _prepare_float(func)
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
    scalars = dict(_geometry(conv, func.ret_type), input_zp=input_zp, output_zp=_scalar(requant.args[4]),
                   act_min=act_min, act_max=act_max)
    return _stand_in(func, (matrix, table), "int8").with_attr(ATTR, scalars)


def _bind_constant_arguments(mod):
    """Offloaded functions whose call passes a constant (Vanilla's float patterns match the
    weights as an argument) get it bound inside, as QVanilla's chains have theirs: the Relay
    pass reads its values; the lifting after partitioning makes them parameters again."""
    calls = {}

    class Sites(relay.ExprVisitor):
        def visit_call(self, call):
            if isinstance(call.op, relay.GlobalVar):
                calls.setdefault(call.op, []).append(call)
            super().visit_call(call)

    for _, func in mod.functions.items():
        if isinstance(func, relay.Function):
            Sites().visit(func)
    bound = {}
    for gvar, func in offloaded_functions(mod, TARGET):
        sites = calls.get(gvar, [])
        if len(sites) != 1:
            continue
        constant = [i for i, a in enumerate(sites[0].args) if isinstance(a, relay.Constant)]
        if constant:
            keep = [i for i in range(len(func.params)) if i not in constant]
            body = relay.bind(func.body, {func.params[i]: sites[0].args[i] for i in constant})
            mod[gvar] = relay.Function([func.params[i] for i in keep], body, func.ret_type, func.type_params,
                                       func.attrs)
            bound[gvar] = keep

    class Calls(relay.ExprMutator):
        def visit_call(self, call):
            new = super().visit_call(call)
            if isinstance(new.op, relay.GlobalVar) and new.op in bound:
                return relay.Call(new.op, [new.args[i] for i in bound[new.op]], new.attrs, new.type_args, new.span)
            return new

    for gvar, func in list(mod.functions.items()):
        if isinstance(func, relay.Function) and gvar not in bound:
            mod[gvar] = Calls().visit(func)
    return relay.transform.InferType()(mod)


@tvm.transform.module_pass(opt_level=0, name="PrepareCoreConv")
def prepare_core_conv(mod, _ctx):
    mod = _bind_constant_arguments(relay.transform.InferType()(mod))
    for gvar, func in offloaded_functions(mod, TARGET):
        if ATTR not in func.attrs:
            mod[gvar] = _prepare(func)
    return relay.transform.InferType()(mod)


def _roles(func: tir.PrimFunc, depth: int):
    """The stand-in's buffers by role, in parameter order: the input first, the output last,
    between them the weights ([depth][channels]) and the channel table (int8: [3][channels]
    of bias, multiplier, shift; float: the bias, [1][channels])."""
    buffers = [func.buffer_map[p] for p in func.params]
    middle = buffers[1:-1]
    weights = next(b for b in middle if int(b.shape[0]) == depth and b.dtype in ("int8", "float32"))
    return [("input", buffers[0])] + [("weights" if b.same_as(weights) else "table", b) for b in middle] + \
        [("output", buffers[-1])]


class ChocolateTilingPass:
    """Phase 0: the offloaded function becomes its tiled, tensorized GEMM."""

    def __init__(self, backend):
        self._backend = backend

    def __call__(self, func, mod, ctx):
        relay_attrs = func.attrs["relay_attrs"] if func.attrs and "relay_attrs" in func.attrs else None
        if relay_attrs is None or ATTR not in relay_attrs:
            return func
        layer = schedule.ConvLayer.from_attrs(relay_attrs[ATTR])
        core = self._backend.core()
        plan = schedule.plan_layer(layer, core, layer.dtype)
        log.info("%s: GEMM %d x %d x %d on %dx%dx%d tiles, %s (lower bound %d bytes)", func.attrs["global_symbol"],
                 *layer.gemm, core.tile_m, core.tile_n, core.tile_k, plan.describe(), layer.lower_bound())
        names = schedule.register_intrinsics(core, plan)
        roles = _roles(func, layer.gemm[2])
        shapes = {role: [int(d) for d in buf.shape] for role, buf in roles}
        tensors = dict(zip(("input", "weights", "table", "output"), schedule.gemm_compute(layer, core, shapes)))
        scheduled = schedule.schedule(layer, core, plan, [tensors[role] for role, _ in roles], names)
        return tir.PrimFunc(scheduled.params, scheduled.body, func.ret_type, scheduled.buffer_map, func.attrs)


def tiling_pass(backend):
    return tvm.tir.transform.prim_func_pass(ChocolateTilingPass(backend), opt_level=2, name="ChocolateTiling")
