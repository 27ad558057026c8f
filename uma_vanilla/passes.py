"""Vanilla's passes: the TIR pass calling its C API, and the layout conversion before partitioning."""
import tvm
from tvm import tir

from tvm_extension.uma import offloaded_functions, status_checked
from tvm_extension.uma.layout import offload_layout_pass

from .patterns import split_composite


FLT_MAX = 3.4028234663852886e38
ATTR = "VanillaOutputStage"  # function attribute: what follows the conv in an offloaded function


@tvm.transform.module_pass(opt_level=0, name="VanillaDescribeOutputStage")
def describe_output_stage(mod, _ctx):
    """Record on each offloaded function whether it adds a bias and how it clamps.

    Read from Relay (conv2d -> add(bias) -> relu|clip), so the TIR pass needs no block names.
    """
    for gvar, func in offloaded_functions(mod, "vanilla_accelerator"):
        _, add, activation = split_composite(func.body)
        lo, hi = -FLT_MAX, FLT_MAX
        if activation is not None and activation.op.name == "nn.relu":
            lo = 0.0
        elif activation is not None:
            lo, hi = max(float(activation.attrs.a_min), -FLT_MAX), min(float(activation.attrs.a_max), FLT_MAX)
        stage = {"bias": int(add is not None), "clamp": int(activation is not None), "lo": lo, "hi": hi}
        mod[gvar] = func.with_attr(ATTR, stage)
    return mod


@tvm.tir.transform.prim_func_pass(opt_level=2)
class VanillaAcceleratorConv2DPass:
    """Replace an offloaded conv2d (+ bias, + ReLU/clip) function by one call of Vanilla's C API.

    The function's buffers are, in order: input, weights, [bias], output.  The kernel pads by
    itself, so it reads the unpadded input, and writes the function's output directly; a
    non-zero status fails the whole inference instead of returning wrong numbers.
    """

    def transform_function(self, func, mod, ctx):
        relay_attrs = func.attrs["relay_attrs"] if func.attrs and "relay_attrs" in func.attrs else None
        if relay_attrs is None or ATTR not in relay_attrs:
            return func
        stage = relay_attrs[ATTR]
        buffers = [func.buffer_map[p] for p in func.params]
        ifmap, weights, result = buffers[0], buffers[1], buffers[-1]
        _, ic, ih, iw = ifmap.shape
        oc, weight_ic, kh, kw = weights.shape
        if int(weight_ic) != int(ic) or [int(d) for d in result.shape[2:]] != [int(ih), int(iw)]:
            raise ValueError(f"{func.attrs['global_symbol']}: not a stride-1 same-padded conv2d, the pattern let it through")
        sizes = [oc, iw, ih, ic, kh, kw]
        bounds = [tir.FloatImm("float32", float(stage["lo"])), tir.FloatImm("float32", float(stage["hi"]))]
        if int(stage["bias"]):
            status = tir.call_extern("int32", "vanilla_conv2dnchw_bias_clamp", ifmap.data, weights.data,
                                     buffers[2].data, result.data, *sizes, *bounds)
        elif int(stage["clamp"]):
            status = tir.call_extern("int32", "vanilla_conv2dnchw_clamp", ifmap.data, weights.data, result.data,
                                     *sizes, *bounds)
        else:
            status = tir.call_extern("int32", "vanilla_conv2dnchw", ifmap.data, weights.data, result.data, *sizes)
        return func.with_body(status_checked(status, "vanilla_status"))


def nchw_layout_pass(accepts):
    """Vanilla computes in NCHW: convert the convs it takes (and their bias/activation) before partitioning."""
    return offload_layout_pass(accepts, "NCHW", "OIHW", name="VanillaOffloadLayout")
