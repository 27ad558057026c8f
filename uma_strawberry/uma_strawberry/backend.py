"""UMA backend for the Strawberry accelerator."""
from tvm import relay
from tvm.relay.backend.contrib.uma.api.utils import PassPhase
from tvm.relay.backend.contrib.uma.backend import UMABackend

from tvm_extension.kit.fold import fold_batch_norm_pass, unflatten_prelu_pass
from tvm_extension.uma import config_of, register_target

from .codegen import gen_includes
from .passes import StrawberryDMAPass, lower_scratchpad_access
from .patterns import (
    conv2d_alone_pattern, conv2d_pattern, conv2d_residual_pattern, describe_layer, fold_weights,
    hard_activation_reason, lift_constants, pack_weights, validate_config, why_not_offloaded,
)
from .strategies import STRATEGIES
from . import target
from .target import NAME
from .tiling import Config


class StrawberryBackend(UMABackend):
    """Vanilla's conv engine with a scratchpad of its own and a DMA engine."""

    def __init__(self):
        # One engine call sequence per conv: adjacent convs must not merge into one function.
        super().__init__(merge_compiler_regions=False)
        # The chip (target.py): its scratchpad's size and partitions, the DMA's and engine's rates.
        register_target(self, target)
        self._register_relay_pass(PassPhase.PRE_PARTITIONING, validate_config(self))
        # As Vanilla: weights as constants, batch norm and TFLite's PReLU folded, explicit pads
        # folded into the conv (the DMA pads on the way in).
        self._register_relay_pass(PassPhase.PRE_PARTITIONING, fold_weights())
        self._register_relay_pass(PassPhase.PRE_PARTITIONING, fold_batch_norm_pass())
        self._register_relay_pass(PassPhase.PRE_PARTITIONING, unflatten_prelu_pass())
        self._register_relay_pass(PassPhase.PRE_PARTITIONING, relay.transform.FoldExplicitPadding())
        # Vanilla's patterns, largest first (a rejected match is not retried smaller).
        self._register_pattern("conv2d_residual", conv2d_residual_pattern(), self._offloadable)
        self._register_pattern("conv2d", conv2d_pattern(), self._offloadable)
        self._register_pattern("conv2d_bias", conv2d_pattern(activation=False), self._offloadable)
        self._register_pattern("conv2d_alone", conv2d_alone_pattern(), self._offloadable)
        self._register_relay_pass(PassPhase.POST_PARTITIONING_1, lift_constants())
        self._register_relay_pass(PassPhase.POST_PARTITIONING_1, describe_layer)
        self._register_relay_pass(PassPhase.POST_PARTITIONING_1, pack_weights())
        for op, strategy, plevel in STRATEGIES:
            self._register_operator_strategy(op, strategy, plevel)
        # The transfers are TIR: scratchpad buffers, DMA calls around the engine's call.
        self._register_tir_pass(PassPhase.TIR_PHASE_0, StrawberryDMAPass())
        self._register_tir_pass(PassPhase.TIR_PHASE_3, lower_scratchpad_access())
        self._register_codegen(fmt="c", includes=gen_includes)

    def config(self) -> Config:
        return Config.from_attrs(config_of(self).as_dict())

    def _offloadable(self, matched) -> bool:
        return why_not_offloaded(matched, self.config()) is None

    def rejection_reason(self, call):
        """Why an operator stays on the CPU; shown in the offload report."""
        if call.op.name == "clip":
            return hard_activation_reason(call)
        return why_not_offloaded(call, self.config()) if call.op.name == "nn.conv2d" else None

    @property
    def target_name(self):
        return NAME
