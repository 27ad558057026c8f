"""QVanilla's passes.

* ``PrepareQuantizedConv`` (Relay, after partitioning): reads the zero points, scales, bias
  and clamp of every offloaded chain, turns them into the kernel's integer parameters
  (``quantization``), and leaves a function TVM can lower: an int32 conv of the same
  geometry using every tensor the kernel needs, with the scalars as function attributes.
* ``QVanillaConv2DPass`` (TIR): replaces that function by one call of the C API.
"""
import numpy as np
import tvm
from tvm import relay, tir

from tvm_extension.uma import offloaded_functions, status_checked

from . import quantization
from .patterns import constant_operand, lower_clamps, split_chain

TARGET = "qvanilla"
ATTR = "QVanilla"  # function attribute holding the kernel's scalar parameters


def _scalar(const) -> float:
    return np.asarray(const.data.numpy()).reshape(-1)[0].item()


def _prepare(func: relay.Function) -> relay.Function:
    parts = split_chain(func.body)
    conv, requant = parts["qnn.conv2d"], parts["qnn.requantize"]
    bias_call = parts.get("nn.bias_add") or parts.get("add")
    clip = parts.get("clip")
    weight = conv.args[1].data.numpy()  # HWIO
    channels = weight.shape[3]
    params = quantization.channel_params(
        None if bias_call is None else constant_operand(bias_call).data.numpy().reshape(-1),
        requant.args[1].data.numpy(), requant.args[3].data.numpy(), channels,
    )
    act_min, act_max = quantization.activation_range(
        clip.attrs.a_min if clip else None, clip.attrs.a_max if clip else None
    )
    if "maximum" in parts:  # ReLU before requantizing (ONNX QDQ)
        act_min = max(act_min, lower_clamps(parts)[0])
    attrs = conv.attrs
    pad_top, pad_left, _, _ = [int(p) for p in attrs.padding]
    scalars = {
        "stride_h": int(attrs.strides[0]), "stride_w": int(attrs.strides[1]),
        "pad_top": pad_top, "pad_left": pad_left,
        "input_zp": int(_scalar(conv.args[2])), "weight_zp": int(_scalar(conv.args[3])),
        "output_zp": int(_scalar(requant.args[4])), "act_min": act_min, "act_max": act_max,
    }
    # A lowerable stand-in with the right signature; the TIR pass replaces all of it.
    data = func.params[0]
    acc = relay.nn.conv2d(
        data, relay.const(weight), strides=attrs.strides, padding=attrs.padding, channels=channels,
        kernel_size=weight.shape[:2], data_layout="NHWC", kernel_layout="HWIO", out_dtype="int32",
    )
    body = relay.cast(relay.add(acc, relay.sum(relay.const(params), axis=0)), "int8")
    new = relay.Function(func.params, body, func.ret_type, func.type_params, func.attrs)
    return new.with_attr(ATTR, scalars)


@tvm.transform.module_pass(opt_level=0, name="PrepareQuantizedConv")
def prepare_quantized_conv(mod, _ctx):
    for gvar, func in offloaded_functions(mod, TARGET):
        if ATTR not in func.attrs:
            mod[gvar] = _prepare(func)
    return relay.transform.InferType()(mod)


@tvm.tir.transform.prim_func_pass(opt_level=2)
class QVanillaConv2DPass:
    """The whole function becomes ``qvanilla_conv2d_nhwc_s8(...)``, its status checked."""

    def transform_function(self, func, mod, ctx):
        relay_attrs = func.attrs["relay_attrs"] if func.attrs and "relay_attrs" in func.attrs else None
        if relay_attrs is None or ATTR not in relay_attrs:
            return func
        q = relay_attrs[ATTR]
        buffers = [func.buffer_map[p] for p in func.params]
        data, output = buffers[0], buffers[-1]
        weights = next(b for b in buffers[1:-1] if b.dtype == "int8" and len(b.shape) == 4)
        params = next(b for b in buffers[1:-1] if b.dtype == "int32" and len(b.shape) == 2)
        _, ih, iw, ic = data.shape
        _, oh, ow, oc = output.shape
        kh, kw = weights.shape[0], weights.shape[1]
        names = ("stride_h", "stride_w", "pad_top", "pad_left", "input_zp", "weight_zp", "output_zp",
                 "act_min", "act_max")
        status = tir.call_extern(
            "int32", "qvanilla_conv2d_nhwc_s8", data.data, weights.data, params.data, output.data,
            ih, iw, ic, oh, ow, oc, kh, kw, *[tir.IntImm("int32", int(q[n])) for n in names],
        )
        return func.with_body(status_checked(status, "qvanilla_status"))
