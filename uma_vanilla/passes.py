"""Vanilla's passes: the TIR pass calling its C API, and the layout conversion before partitioning."""
import tvm
from tvm import tir

from tvm_extension.uma.layout import offload_layout_pass


FLT_MAX = 3.4028234663852886e38


def _blocks(func):
    found = {}

    def visit(node):
        if isinstance(node, tir.Block):
            found.setdefault(node.name_hint, []).append(node)

    tir.stmt_functor.post_order_visit(func.body, visit)
    return found


def _clip_bounds(block):
    """(lo, hi) of a clip block: max(min(x, hi), lo)."""
    bounds = {}

    def visit(node):
        if isinstance(node, (tir.Min, tir.Max)):
            for operand in (node.a, node.b):
                if isinstance(operand, tir.FloatImm):
                    bounds["hi" if isinstance(node, tir.Min) else "lo"] = operand.value

    tir.stmt_functor.post_order_visit(block.body, visit)
    return bounds.get("lo", -FLT_MAX), bounds.get("hi", FLT_MAX)


@tvm.tir.transform.prim_func_pass(opt_level=2)
class VanillaAcceleratorConv2DPass:
    """Replace a function computing conv2d (+ bias, + ReLU/clip) by one call of Vanilla's C API.

    The kernel pads by itself, so it reads the function's unpadded input, and writes the
    function's output directly; a non-zero status fails the whole inference instead of
    returning wrong numbers.
    """

    def transform_function(self, func, mod, ctx):
        blocks = _blocks(func)
        if len(blocks.get("conv2d_nchw", [])) != 1:
            return func
        conv = blocks["conv2d_nchw"][0]
        params = [func.buffer_map[p] for p in func.params]
        is_param = lambda buffer: any(buffer.same_as(p) for p in params)
        result = params[-1]
        weights = next(r.buffer for r in conv.reads if is_param(r.buffer))
        bias = None
        for add in blocks.get("T_add", []):
            bias = next((r.buffer for r in add.reads if is_param(r.buffer)), None)
        lo, hi = -FLT_MAX, FLT_MAX
        if "T_relu" in blocks:
            lo = 0.0
        elif "compute" in blocks:
            lo, hi = _clip_bounds(blocks["compute"][0])
        ifmap = next(p for p in params if not any(p.same_as(b) for b in (result, weights, bias) if b is not None))
        _, ic, ih, iw = ifmap.shape
        oc, weight_ic, kh, kw = weights.shape
        if int(weight_ic) != int(ic) or [int(d) for d in result.shape[2:]] != [int(ih), int(iw)]:
            raise ValueError(f"{func.attrs['global_symbol']}: not a stride-1 same-padded conv2d, the pattern let it through")
        sizes = [oc, iw, ih, ic, kh, kw]
        bounds = [tir.FloatImm("float32", lo), tir.FloatImm("float32", hi)]
        if bias is not None:
            status = tir.call_extern("int32", "vanilla_conv2dnchw_bias_clamp", ifmap.data, weights.data, bias.data,
                                     result.data, *sizes, *bounds)
        elif "T_relu" in blocks or "compute" in blocks:
            status = tir.call_extern("int32", "vanilla_conv2dnchw_clamp", ifmap.data, weights.data, result.data,
                                     *sizes, *bounds)
        else:
            status = tir.call_extern("int32", "vanilla_conv2dnchw", ifmap.data, weights.data, result.data, *sizes)
        # Propagate the kernel's status: the AOT executor stops at a non-zero return.
        code = tir.Var("vanilla_status", "int32")
        check = tir.IfThenElse(code != 0, tir.Evaluate(tir.ret(code)), None)
        return func.with_body(tir.LetStmt(code, status, check))

def nchw_layout_pass(accepts):
    """Vanilla computes in NCHW: convert the convs it takes (and their bias/activation) before partitioning."""
    return offload_layout_pass(accepts, "NCHW", "OIHW", name="VanillaOffloadLayout")
