"""UMA backend for Chocolate: int8 and float convs decomposed onto a small matrix core."""
from tvm import relay, tir
from tvm.relay.backend.contrib.uma.api.utils import PassPhase
from tvm.relay.backend.contrib.uma.backend import UMABackend

from tvm_extension.kit.fold import fold_batch_norm_pass
from tvm_extension.kit.layout import as_kernel_layout, fold_weights_pass, offload_layout_pass
from tvm_extension.uma import config_of, register_target

from .codegen import gen_includes
from .passes import tiling_pass
from .patterns import (
    chain_problem, conv2d_alone_pattern, conv2d_pattern, core_problem, float_chain_problem, mac_share,
    prepare_core_conv, qconv2d_pattern, validate_config,
)
from . import target
from .schedule import Core
from .target import ATTR_RANGES, ATTRIBUTES, LIMITS, NAME, ConfigError, core_of  # noqa: F401  (re-exported)


class ChocolateBackend(UMABackend):
    """A tile_m x tile_n x tile_k int8 matrix core with a scratchpad and a DMA engine."""

    def __init__(self):
        super().__init__(merge_compiler_regions=False)
        register_target(self, target)  # the core's shape, scratchpad and rates (target.py)
        self._register_relay_pass(PassPhase.PRE_PARTITIONING, validate_config(self))
        # Float: weights as constants, batch norm folded into the conv, explicit pads into the
        # conv (the DMA pads on the way in).  int8 ONNX QDQ: the integer chain.
        self._register_relay_pass(PassPhase.PRE_PARTITIONING, fold_weights_pass(name="ChocolateFoldWeights"))
        self._register_relay_pass(PassPhase.PRE_PARTITIONING, fold_batch_norm_pass())
        self._register_relay_pass(PassPhase.PRE_PARTITIONING, relay.transform.FoldExplicitPadding())
        self._register_relay_pass(PassPhase.PRE_PARTITIONING, relay.transform.FakeQuantizationToInteger())
        # ONNX arrives NCHW: the im2col view is NHWC's, weights HWIO (the B matrix).
        accepts = lambda conv: core_problem(conv) is None
        self._register_relay_pass(PassPhase.PRE_PARTITIONING, offload_layout_pass(accepts, "NHWC", "HWIO"))
        self._register_pattern("qconv2d", qconv2d_pattern(), lambda root: chain_problem(root) is None)
        takes_float = lambda root: float_chain_problem(root) is None
        self._register_pattern("conv2d", conv2d_pattern(), takes_float)
        self._register_pattern("conv2d_bias", conv2d_pattern(activation=False), takes_float)
        self._register_pattern("conv2d_alone", conv2d_alone_pattern(), takes_float)
        self._register_relay_pass(PassPhase.POST_PARTITIONING_1, mac_share(self))  # a line of the offload report
        self._register_relay_pass(PassPhase.POST_PARTITIONING_1, prepare_core_conv)
        self._register_tir_pass(PassPhase.TIR_PHASE_0, tiling_pass(self))
        self._register_tir_pass(PassPhase.TIR_PHASE_3, tir.transform.LowerDeviceStorageAccessInfo())
        self._register_codegen(fmt="c", includes=gen_includes)

    def core(self) -> Core:
        return core_of(config_of(self))  # this compile's attributes

    def rejection_reason(self, call):
        """Why a conv stays on the CPU; shown in the offload report (an NCHW conv as converted)."""
        if call.op.name not in ("qnn.conv2d", "nn.conv2d"):
            return None
        return core_problem(as_kernel_layout(call, "NHWC", "HWIO") or call)

    @property
    def target_name(self):
        return NAME
