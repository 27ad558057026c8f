"""TIR pass turning Vanilla's Conv2D into one call of its C API, with the status checked."""
import tvm
from tvm import tir

from tvm_extension.uma.layout import convert_layout_pass


@tvm.tir.transform.prim_func_pass(opt_level=2)
class VanillaAcceleratorConv2DPass:
    """Replace a function holding a ``conv2d_nchw`` block by ``vanilla_conv2dnchw(...)``.

    The kernel pads by itself, so it reads the function's unpadded input; a non-zero
    status fails the whole inference instead of returning wrong numbers.
    """

    _KERNEL = "vanilla_conv2dnchw"
    _BLOCK = "conv2d_nchw"

    def transform_function(self, func, mod, ctx):
        conv = []

        def visit(node):
            if isinstance(node, tir.Block) and node.name_hint == self._BLOCK:
                conv.append(node)

        tir.stmt_functor.post_order_visit(func.body, visit)
        if len(conv) != 1:
            return func
        params = [func.buffer_map[p] for p in func.params]
        result = conv[0].writes[0].buffer
        weights = next(r.buffer for r in conv[0].reads if any(r.buffer.same_as(p) for p in params))
        ifmap = next(p for p in params if not p.same_as(result) and not p.same_as(weights))
        _, ic, ih, iw = ifmap.shape
        oc, _, kh, kw = weights.shape
        status = tir.call_extern(
            "int32", self._KERNEL, ifmap.data, weights.data, result.data, oc, iw, ih, ic, kh, kw
        )
        # Propagate the kernel's status: the AOT executor stops at a non-zero return.
        code = tir.Var("vanilla_status", "int32")
        check = tir.IfThenElse(code != 0, tir.Evaluate(tir.ret(code)), None)
        return func.with_body(tir.LetStmt(code, status, check))



# Vanilla computes in NCHW: convert convolutions (and pools, so no transpose is needed
# around them) before partitioning, whatever layout the model came in.
convert_to_kernel_layout = convert_layout_pass(
    {
        "nn.conv2d": ["NCHW", "OIHW"],
        **{op: ["NCHW"] for op in ("nn.max_pool2d", "nn.avg_pool2d", "nn.global_avg_pool2d", "nn.global_max_pool2d")},
    },
    name="VanillaConvertToNCHW",
)
