"""UMA backend for QVanilla, the int8 accelerator."""
from tvm import relay
from tvm.relay.backend.contrib.uma.api.utils import PassPhase
from tvm.relay.backend.contrib.uma.backend import UMABackend

from tvm_extension.kit.layout import as_kernel_layout, offload_layout_pass
from tvm_extension.uma import register_target

from . import target
from .codegen import gen_includes
from .passes import QVanillaConv2DPass
from .patterns import conv_problem, prepare_quantized_conv, qconv2d_pattern, why_not_offloaded


class QVanillaBackend(UMABackend):
    """UMA backend for QVanilla."""

    # Its kernel computes TFLite's rounding too, when a requantize asks for it (--tflite-exact).
    computes_tflite_rounding = True

    def __init__(self):
        # One kernel call per quantized conv: regions must not merge.
        super().__init__(merge_compiler_regions=False)
        register_target(self, target)  # scratch_budget (target.py)
        # ONNX QDQ models: dequantize -> conv -> quantize becomes qnn.conv2d -> requantize.
        self._register_relay_pass(PassPhase.PRE_PARTITIONING, relay.transform.FakeQuantizationToInteger())
        # ONNX arrives NCHW: convert what the kernel takes to NHWC/HWIO.
        accepts = lambda conv: conv_problem(conv) is None
        self._register_relay_pass(PassPhase.PRE_PARTITIONING, offload_layout_pass(accepts, "NHWC", "HWIO"))
        self._register_pattern("qconv2d", qconv2d_pattern(), lambda root: why_not_offloaded(root) is None)
        self._register_relay_pass(PassPhase.POST_PARTITIONING_1, prepare_quantized_conv(self))
        self._register_tir_pass(PassPhase.TIR_PHASE_0, QVanillaConv2DPass())
        self._register_codegen(fmt="c", includes=gen_includes)

    def rejection_reason(self, call):
        """Why a qnn.conv2d stays on the CPU; shown in the offload report.  An NCHW conv is
        explained as converted: why the kernel refused it, not the layout it was left in."""
        if call.op.name != "qnn.conv2d":
            return None
        return conv_problem(as_kernel_layout(call, "NHWC", "HWIO") or call)

    @property
    def target_name(self):
        return target.NAME
