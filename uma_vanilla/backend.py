"""UMA backend for the Vanilla accelerator."""
from tvm.relay.backend.contrib.uma.api.utils import PassPhase
from tvm.relay.backend.contrib.uma.backend import UMABackend

from .codegen import gen_includes
from .passes import VanillaAcceleratorConv2DPass, convert_to_kernel_layout
from .patterns import conv2d_pattern, why_not_offloaded


class VanillaAcceleratorBackend(UMABackend):
    """UMA backend for VanillaAccelerator."""

    def __init__(self):
        # One kernel call per conv: adjacent convs must not merge into one function.
        super().__init__(merge_compiler_regions=False)
        # The MAC array's window buffer holds kernels up to this size.
        self._register_target_attr("max_kernel_size", default=7)
        self._register_relay_pass(PassPhase.PRE_PARTITIONING, convert_to_kernel_layout)
        self._register_pattern("conv2d", conv2d_pattern(), self._offloadable)
        self._register_tir_pass(PassPhase.TIR_PHASE_0, VanillaAcceleratorConv2DPass())
        self._register_codegen(fmt="c", includes=gen_includes)

    def _offloadable(self, conv) -> bool:
        return self.rejection_reason(conv) is None

    def rejection_reason(self, conv):
        """Why a conv2d stays on the CPU (None if Vanilla takes it); shown in the offload report."""
        if conv.op.name != "nn.conv2d":
            return None
        attrs = getattr(self, "target_attrs", self._target_attrs)
        return why_not_offloaded(conv, int(attrs["max_kernel_size"]))

    @property
    def target_name(self):
        return "vanilla_accelerator"
