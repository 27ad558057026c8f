"""UMA backend for the Vanilla accelerator."""
from tvm import relay
from tvm.relay.backend.contrib.uma.api.utils import PassPhase
from tvm.relay.backend.contrib.uma.backend import UMABackend

from tvm_extension.kit.fold import fold_batch_norm_pass, unflatten_prelu_pass
from tvm_extension.uma import config_of, register_target

from . import target
from .codegen import gen_includes
from .passes import VanillaAcceleratorConv2DPass
from .patterns import (
    conv2d_alone_pattern, conv2d_pattern, conv2d_residual_pattern, describe_output_stage, fold_weights,
    hard_activation_reason, lift_constants, pack_weights, plan_scratch, why_not_offloaded,
)


class VanillaAcceleratorBackend(UMABackend):
    """UMA backend for VanillaAccelerator."""

    def __init__(self):
        # One kernel call per conv: adjacent convs must not merge into one function.
        super().__init__(merge_compiler_regions=False)
        # Its attributes, defaults and bounds (target.py: max_kernel_size at most 8).
        register_target(self, target)
        # Its DMA reads NCHW and NHWC feature maps: models keep their layout, no transposes.
        # Weights only need to be constants (TFLite's float16 ones are cast first).
        self._register_relay_pass(PassPhase.PRE_PARTITIONING, fold_weights())
        # What frontends leave unfolded: batch norm after a conv (ONNX), TFLite's flattened PReLU.
        self._register_relay_pass(PassPhase.PRE_PARTITIONING, fold_batch_norm_pass())
        self._register_relay_pass(PassPhase.PRE_PARTITIONING, unflatten_prelu_pass())
        # The engine pads by itself: an explicit zero nn.pad (ONNX's auto_pad) goes into the conv.
        self._register_relay_pass(PassPhase.PRE_PARTITIONING, relay.transform.FoldExplicitPadding())
        # Largest first.  When the check rejects a match (a broadcast residual, a PReLU slope along
        # another axis), TVM's MergeComposite does not retry that pattern on the smaller graph
        # inside it, so each fallback is a pattern of its own: the conv stays offloaded.
        self._register_pattern("conv2d_residual", conv2d_residual_pattern(), self._offloadable)
        self._register_pattern("conv2d", conv2d_pattern(), self._offloadable)
        self._register_pattern("conv2d_bias", conv2d_pattern(activation=False), self._offloadable)
        self._register_pattern("conv2d_alone", conv2d_alone_pattern(), self._offloadable)
        # After partitioning: every tensor a parameter, each one's role recorded, weights packed,
        # the C's scratch an output (planned in the workspace).
        self._register_relay_pass(PassPhase.POST_PARTITIONING_1, lift_constants())
        self._register_relay_pass(PassPhase.POST_PARTITIONING_1, describe_output_stage)
        self._register_relay_pass(PassPhase.POST_PARTITIONING_1, pack_weights())
        self._register_relay_pass(PassPhase.POST_PARTITIONING_1, plan_scratch())
        self._register_tir_pass(PassPhase.TIR_PHASE_0, VanillaAcceleratorConv2DPass())
        self._register_codegen(fmt="c", includes=gen_includes)

    def _max_kernel_size(self) -> int:
        return config_of(self)["max_kernel_size"]  # this compile's attribute

    def _offloadable(self, matched) -> bool:
        return why_not_offloaded(matched, self._max_kernel_size()) is None

    def rejection_reason(self, call):
        """Why a conv2d stays on the CPU; shown in the offload report."""
        if call.op.name == "clip":
            return hard_activation_reason(call)
        return why_not_offloaded(call, self._max_kernel_size()) if call.op.name == "nn.conv2d" else None

    @property
    def target_name(self):
        return target.NAME
