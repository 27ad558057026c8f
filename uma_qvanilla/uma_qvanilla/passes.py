"""QVanilla's TIR pass (no Relay: it works on the PrimFunc TVM lowered from the function
``patterns.prepare_quantized_conv`` left, and reads the scalars that pass put in its attributes).

``QVanillaConv2DPass`` replaces the function by one call of what generated code calls,
``qvanilla_conv2d_nhwc_packed_s8`` (``_packed8_s8`` for int8 weights) or
``qvanilla_depthwise_conv2d_nhwc_packed_s8`` (``c/qvanilla.h``:
static inline functions that fill the C API's structs and call its struct entries), its status
checked.  The function's second output is the entry's scratch (sized by ``scratch.buffer_size``,
the mirror of the C's ``_get_buffer_size``): a tensor the AOT planner put in the workspace.
"""
import tvm
from tvm import tir

from tvm_extension.kit.calls import named_scratch, status_checked

from . import scratch, target

ATTR = "QVanilla"  # function attribute holding the kernel's scalar parameters (set by patterns.py)


@tvm.tir.transform.prim_func_pass(opt_level=2)
class QVanillaConv2DPass:
    """The whole function becomes ``qvanilla_conv2d_nhwc_packed_s8(...)`` (or the depthwise
    entry), its status checked."""

    def transform_function(self, func, mod, ctx):
        relay_attrs = func.attrs["relay_attrs"] if func.attrs and "relay_attrs" in func.attrs else None
        if relay_attrs is None or ATTR not in relay_attrs:
            return func
        q = {k: int(v) for k, v in relay_attrs[ATTR].items()}
        func, work = named_scratch(func)  # its last output (patterns.py)
        buffers = [func.buffer_map[p] for p in func.params]
        data, output = buffers[0], buffers[-2]
        packed8 = q.get("packed8", 0) == 1
        weights = next(b for b in buffers[1:-2] if b.dtype == ("int8" if packed8 else "int16") and len(b.shape) == 2)
        params = next(b for b in buffers[1:-2] if b.dtype == "int32" and len(b.shape) == 2)
        _, ih, iw, ic = data.shape
        _, oh, ow, oc = output.shape
        scalars = [tir.IntImm("int32", q[n]) for n in ("kh", "kw", "stride_h", "stride_w", "pad_top", "pad_left",
                                                       "input_zp", "output_zp", "act_min", "act_max", "rounding")]
        kind = scratch.packed_kind(q["depthwise"], packed8)
        budget = target.scratch_budget(func.attrs["target_attrs"])  # this compile's (lowering wrote them)
        nbytes = scratch.buffer_size(kind, q["kh"], q["kw"], int(ic), int(oc), budget)
        assert work.dtype == "int8" and [int(d) for d in work.shape] == [max(nbytes, 1)], work  # patterns.py's
        if q["depthwise"]:
            call = ("qvanilla_depthwise_conv2d_nhwc_packed_s8", ih, iw, oc, oh, ow)
        else:
            call = (f"qvanilla_{kind.replace('conv2d_', 'conv2d_nhwc_')}", ih, iw, ic, oh, ow, oc)
        status = tir.call_extern("int32", call[0], data.data, weights.data, params.data, output.data, work.data,
                                 tir.IntImm("int32", nbytes), *call[1:], *scalars)
        return func.with_body(status_checked(status, "qvanilla_status"))
