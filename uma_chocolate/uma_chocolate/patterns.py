"""What Chocolate offloads: dense convs (a depthwise conv is no matrix product), NHWC/HWIO
(ONNX's NCHW is converted before partitioning).

* int8: the kit's quantized conv chains (conv, bias, requantize, clamp: ``qconv_patterns``),
  with symmetric weights (the core multiplies raw int8 values) and any requantize shift;
* float32: the kit's conv patterns (conv, bias, ReLU or clip: ``conv_patterns``), without
  residual or PReLU: the core's output stage adds a bias and clamps.

And the Relay passes around partitioning (this is the one module of the backend that speaks
Relay, with backend.py's wiring):

* ``validate_config`` (before partitioning): the target attributes describe a chip;
* ``mac_share`` (after partitioning): the MACs of the convs and dense layers on the core and on
  the CPU (depthwise apart), a line of the offload report;
* ``prepare_core_conv`` (after partitioning): per offloaded chain (quantized conv, bias,
  requantize, clamp), the weights as the core's B matrix ``[kh*kw*ic][oc]`` (HWIO flattened),
  the input zero point's contribution folded into the bias (the core multiplies raw int8 and
  the DMA pads with the input zero point), each channel's multiplier and shift; a stand-in
  body using exactly those tensors, the layer's scalars as a function attribute.
"""
import collections
import dataclasses
from typing import Counter, Optional

import numpy as np
import tvm
from tvm import relay

from tvm_extension.kit.conv_patterns import conv2d_alone_pattern, conv2d_pattern, is_depthwise, split_composite
from tvm_extension.kit.conv_patterns import why_not_offloaded as float_problem
from tvm_extension.kit.limits import INT32_MAX, PTRDIFF_MAX, below_one, conv_geometry
from tvm_extension.kit.qconv_patterns import constant_operand, conv_problem, lower_clamps, qconv2d_pattern, split_chain
from tvm_extension.kit.qconv_patterns import is_depthwise as is_quantized_depthwise
from tvm_extension.kit.qconv_patterns import why_not_offloaded as quantized_problem
from tvm_extension.kit.quantization import activation_range, channel_params, fold_bias
from tvm_extension.uma import config_of, offloaded_functions
from tvm_extension.uma.report import OffloadReport

from .passes import ATTR
from .target import NAME as TARGET, core_of

__all__ = ["qconv2d_pattern", "conv2d_pattern", "conv2d_alone_pattern", "core_problem", "chain_problem",
           "float_chain_problem", "prepare_core_conv", "validate_config", "mac_share"]

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
    """Why chocolate_configure_s8/_f32 (chocolate_configure.c) would refuse this conv's geometry, in its
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


def validate_config(backend):
    """Before partitioning: the target attributes must describe a chip (one line otherwise)."""

    @tvm.transform.module_pass(opt_level=0, name="ChocolateValidateConfig")
    def validate(mod, _ctx):
        core_of(config_of(backend))
        return mod

    return validate


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


@dataclasses.dataclass
class MacReport(OffloadReport):
    """The offload report with one more line: where the model's multiply-accumulates run."""

    macs: Counter = dataclasses.field(default_factory=collections.Counter)  # core, depthwise, other

    def lines(self):
        yield from super().lines()
        total = sum(self.macs.values())
        if total:
            share = lambda kind: f"{self.macs[kind]} ({100 * self.macs[kind] / total:.1f} %)"
            yield (f"[{self.target}] MACs of convs and dense layers: {total}; on the core {share('core')}; never on "
                   f"the core: depthwise convs {share('depthwise')}, others {share('other')}")


MAC_OPS = ("nn.conv2d", "qnn.conv2d", "nn.dense", "qnn.dense")


def macs_of(call) -> int:
    """Multiply-accumulates of a conv2d or dense call (types inferred)."""
    out = [int(d) for d in call.checked_type.shape]
    weight = [int(d) for d in call.args[1].checked_type.shape]
    if call.op.name.endswith("dense"):
        return int(np.prod(out)) * weight[-1]
    layout = str(call.attrs.out_layout or call.attrs.data_layout)
    return int(np.prod(out)) * int(np.prod(weight)) // out[layout.index("C")]  # each output: kh*kw*ic/groups


def mac_share(backend):
    """After partitioning: the MACs the core computes and those it never sees (depthwise convs
    apart), added to the backend's offload report."""

    @tvm.transform.module_pass(opt_level=0, name="ChocolateMacShare")
    def count(mod, _ctx):
        mod = relay.transform.InferType()(mod)
        on_core = {gvar for gvar, _ in offloaded_functions(mod, TARGET)}
        macs = collections.Counter()
        for gvar, func in mod.functions.items():
            if not isinstance(func, relay.Function):
                continue
            calls = []
            relay.analysis.post_order_visit(func, lambda e: calls.append(e) if isinstance(e, relay.Call) and isinstance(
                e.op, tvm.ir.Op) and e.op.name in MAC_OPS else None)
            for call in calls:
                kind = "core" if gvar in on_core else "depthwise" if _depthwise(call) else "other"
                macs[kind] += macs_of(call)
        report = getattr(backend, "offload_report", None)
        if report is not None:
            fields = {f.name: getattr(report, f.name) for f in dataclasses.fields(OffloadReport)}
            backend.offload_report = MacReport(**fields, macs=macs)
        return mod

    return count


def _depthwise(call) -> bool:
    """A conv with one group per input channel."""
    if not call.op.name.endswith("conv2d") or int(call.attrs.groups) == 1:
        return False
    data = [int(d) for d in call.args[0].checked_type.shape]
    return int(call.attrs.groups) == data[str(call.attrs.data_layout).index("C")]


@tvm.transform.module_pass(opt_level=0, name="PrepareCoreConv")
def prepare_core_conv(mod, _ctx):
    mod = _bind_constant_arguments(relay.transform.InferType()(mod))
    for gvar, func in offloaded_functions(mod, TARGET):
        if ATTR not in func.attrs:
            mod[gvar] = _prepare(func)
    return relay.transform.InferType()(mod)
