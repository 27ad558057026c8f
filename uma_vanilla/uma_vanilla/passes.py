"""Vanilla's TIR pass: an offloaded function's body becomes one call of its C API, with the
scratch memory the C asks for taken from the function's second output (patterns.py adds it, so the
AOT planner places it in the workspace with the tensors).

No Relay here (another engine may run this pass): what the function computes comes from its
VanillaOutputStage attribute, recorded by patterns.py's describe pass.
"""
import tvm
from tvm import tir

from tvm_extension.kit.calls import named_scratch, status_checked

from .buffer_size import buffer_size

ATTR = "VanillaOutputStage"  # function attribute: what follows the conv in an offloaded function

@tvm.tir.transform.prim_func_pass(opt_level=2)
class VanillaAcceleratorConv2DPass:
    """Replace an offloaded conv2d (+ bias, + residual, + activation) function by one call of
    Vanilla's C API through its flat calls (vanilla_accelerator.h): ``vanilla_conv2d{nchw|nhwc}_general``,
    or ``vanilla_depthwise_conv2d{nchw|nhwc}`` for a depthwise one.

    The function's parameters are the input (NCHW or NHWC), the weights (packed OIHW), the bias,
    the residual and the PReLU slope (which is which: the function's VanillaOutputStage
    attribute), and the output.  The kernel pads by itself, so it reads the unpadded input, and
    writes the function's output directly; its scratch is the function's second output; a
    non-zero status fails the whole inference instead of returning wrong numbers.
    """

    def transform_function(self, func, mod, ctx):
        relay_attrs = func.attrs["relay_attrs"] if func.attrs and "relay_attrs" in func.attrs else None
        if relay_attrs is None or ATTR not in relay_attrs:
            return func
        stage = relay_attrs[ATTR]
        func, work = named_scratch(func)  # its last output (patterns.py's plan_scratch)
        buffers = [func.buffer_map[p] for p in func.params]
        ifmap, weights, result = buffers[int(stage["ifmap"])], buffers[int(stage["weights"])], buffers[-2]
        layout, depthwise = str(stage["layout"]), bool(int(stage["depthwise"]))
        g = geometry(func.attrs["global_symbol"], stage, ifmap.shape, weights.shape, result.shape)
        nbytes = buffer_size(depthwise, layout, g)
        assert work.dtype == "int8" and [int(d) for d in work.shape] == [max(nbytes, 1)], work
        # A left-out tensor is a null float*: typed, so the C prototype TVM declares matches the header.
        absent = tir.Var("absent", tvm.ir.PointerType(tvm.ir.PrimType("float32")))
        optional = [buffers[int(stage[role])].data if role in stage else absent for role in ("bias", "residual", "slope")]
        sizes = [g["oc"] if depthwise else g["ic"], g["ih"], g["iw"]] + ([] if depthwise else [g["oc"]]) + [g["oh"], g["ow"]]
        window = [*sizes, *(g[k] for k in ("kh", "kw", "stride_h", "stride_w", "pad_top", "pad_left"))]
        bounds = [tir.FloatImm("float32", float(stage[bound])) for bound in ("lo", "hi")]
        kernel = f"vanilla_depthwise_conv2d{layout}" if depthwise else f"vanilla_conv2d{layout}_general"
        status = tir.call_extern("int32", kernel, work.data, tir.IntImm("int32", nbytes), ifmap.data, weights.data,
                                 *optional, result.data, *window, *bounds)
        null = tir.reinterpret("handle", tir.const(0, "uint64"))
        return func.with_body(tir.LetStmt(absent, null, status_checked(status, "vanilla_status")))


def geometry(name, stage, ifmap_shape, weights_shape, result_shape) -> dict:
    """The conv's sizes and window (the kit engine's geometry) from its description ``stage`` and
    the shapes of its input, packed weights [oc][ic or 1][kh][kw] and output."""
    layout = str(stage["layout"])
    size = dict(zip(layout, (int(d) for d in ifmap_shape)))
    out = dict(zip(layout, (int(d) for d in result_shape)))
    oc, weight_ic, kh, kw = (int(d) for d in weights_shape)
    if weight_ic != (1 if int(stage["depthwise"]) else size["c"]) or out["c"] != oc:
        raise ValueError(f"{name}: weights {[int(d) for d in weights_shape]} do not fit its input and output")
    stride_h, stride_w = (int(s) for s in stage["strides"])
    return dict(ic=size["c"], ih=size["h"], iw=size["w"], oc=oc, oh=out["h"], ow=out["w"], kh=kh, kw=kw,
                stride_h=stride_h, stride_w=stride_w, pad_top=int(stage["pad_top"]), pad_left=int(stage["pad_left"]))


def scratch_bytes(name, stage, ifmap_shape, weights_shape, result_shape) -> int:
    """The bytes of scratch the call of this conv takes (its C entry's ``_get_buffer_size``)."""
    g = geometry(name, stage, ifmap_shape, weights_shape, result_shape)
    return buffer_size(bool(int(stage["depthwise"])), str(stage["layout"]), g)
