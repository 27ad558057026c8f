"""Vanilla's passes: weights packed for its engine, and the TIR pass calling its C API."""
import tvm
from tvm import tir

from tvm_extension.kit.describe import describe_pass
from tvm_extension.kit.layout import fold_weights_pass, pack_weights_pass
from tvm_extension.kit.calls import status_checked
from tvm_extension.uma import lift_constants_pass

ATTR = "VanillaOutputStage"  # function attribute: what follows the conv in an offloaded function

describe_output_stage = describe_pass("vanilla_accelerator", ATTR, "VanillaDescribeOutputStage")


@tvm.tir.transform.prim_func_pass(opt_level=2)
class VanillaAcceleratorConv2DPass:
    """Replace an offloaded conv2d (+ bias, + residual, + activation) function by one call of
    Vanilla's C API, ``vanilla_conv2d{nchw|nhwc}_general`` (``vanilla_depthwise_conv2d{nchw|nhwc}``
    for a depthwise one).

    The function's parameters are the input (NCHW or NHWC), the weights (packed OIHW), the bias,
    the residual and the PReLU slope (which is which: the function's VanillaOutputStage
    attribute), and the output.  The kernel pads by itself, so it reads the unpadded input, and
    writes the function's output directly; a non-zero status fails the whole inference instead of
    returning wrong numbers.
    """

    def transform_function(self, func, mod, ctx):
        relay_attrs = func.attrs["relay_attrs"] if func.attrs and "relay_attrs" in func.attrs else None
        if relay_attrs is None or ATTR not in relay_attrs:
            return func
        stage = relay_attrs[ATTR]
        buffers = [func.buffer_map[p] for p in func.params]
        ifmap, weights, result = buffers[int(stage["ifmap"])], buffers[int(stage["weights"])], buffers[-1]
        layout = str(stage["layout"])
        size = dict(zip(layout, (int(d) for d in ifmap.shape)))
        out = dict(zip(layout, (int(d) for d in result.shape)))
        oc, weight_ic, kh, kw = (int(d) for d in weights.shape)
        depthwise = int(stage["depthwise"])
        if weight_ic != (1 if depthwise else size["c"]) or out["c"] != oc:
            raise ValueError(f"{func.attrs['global_symbol']}: weights {list(weights.shape)} do not fit its input and output")
        stride_h, stride_w = (int(s) for s in stage["strides"])
        # A left-out tensor is a null float*: typed, so the C prototype TVM declares matches the header.
        absent = tir.Var("absent", tvm.ir.PointerType(tvm.ir.PrimType("float32")))
        optional = [buffers[int(stage[role])].data if role in stage else absent for role in ("bias", "residual", "slope")]
        channels = [oc, size["w"], size["h"]] + ([] if depthwise else [size["c"]])
        window = [*channels, kh, kw, out["w"], out["h"], stride_w, stride_h, int(stage["pad_left"]), int(stage["pad_top"])]
        bounds = [tir.FloatImm("float32", float(stage[bound])) for bound in ("lo", "hi")]
        kernel = f"vanilla_depthwise_conv2d{layout}" if depthwise else f"vanilla_conv2d{layout}_general"
        status = tir.call_extern("int32", kernel, ifmap.data, weights.data, *optional, result.data, *window, *bounds)
        null = tir.reinterpret("handle", tir.const(0, "uint64"))
        return func.with_body(tir.LetStmt(absent, null, status_checked(status, "vanilla_status")))


def pack_weights():
    """Vanilla reads weights as [oc][ic][kh][kw] whatever the feature maps' layout."""
    return pack_weights_pass("vanilla_accelerator", "OIHW", name="VanillaPackWeights")


def fold_weights():
    """TFLite's float16 weights arrive as cast(constant): fold them so the pattern sees constants."""
    return fold_weights_pass(name="VanillaFoldWeights")


def lift_constants():
    """Every tensor an offloaded function reads becomes a parameter (the framework would do it
    after the backend's passes; describing the roles needs it first)."""
    return lift_constants_pass("vanilla_accelerator")
