"""UMA backend for Chocolate: int8 and float convs decomposed onto a small matrix core."""
import tvm
from tvm import relay, tir
from tvm.relay.backend.contrib.uma.api.utils import PassPhase
from tvm.relay.backend.contrib.uma.backend import UMABackend

from tvm_extension.kit.fold import fold_batch_norm_pass
from tvm_extension.kit.layout import as_kernel_layout, fold_weights_pass, offload_layout_pass
from tvm_extension.kit.limits import INT32_MAX, c_limits
from tvm_extension.uma import config_of

from .codegen import KERNEL_DIR, gen_includes
from .passes import prepare_core_conv, tiling_pass
from .patterns import (
    chain_problem, conv2d_alone_pattern, conv2d_pattern, core_problem, float_chain_problem, qconv2d_pattern,
)
from .schedule import Core

ATTRIBUTES = {"tile_m": 8, "tile_n": 8, "tile_k": 8, "scratchpad_bytes": 65536, "dma_bytes_per_cycle": 8,
              "dma_setup_cycles": 32}
LIMITS = c_limits(KERNEL_DIR / "chocolate.h", "CHOCOLATE_")  # what chocolate_begin accepts
# Checked when the target is parsed; core() checks what involves several attributes.  Tiles from
# 2: the core takes 1, but the schedule's tensor intrinsics do not match a loop of extent 1 yet.
ATTR_RANGES = {**{f"tile_{d}": (2, LIMITS["MAX_TILE"]) for d in "mnk"},
               "scratchpad_bytes": (4, LIMITS["MAX_SPAD_BYTES"]), "dma_bytes_per_cycle": (1, INT32_MAX),
               "dma_setup_cycles": (0, INT32_MAX)}


class ConfigError(ValueError):
    """A bad value among Chocolate's target attributes (one line for the user)."""


class ChocolateBackend(UMABackend):
    """A tile_m x tile_n x tile_k int8 matrix core with a scratchpad and a DMA engine."""

    target_attr_ranges = ATTR_RANGES

    def __init__(self):
        super().__init__(merge_compiler_regions=False)
        for name, default in ATTRIBUTES.items():
            self._register_target_attr(name, default=default)
        self._register_relay_pass(PassPhase.PRE_PARTITIONING, self._validate_config())
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
        self._register_relay_pass(PassPhase.POST_PARTITIONING_1, prepare_core_conv)
        self._register_tir_pass(PassPhase.TIR_PHASE_0, tiling_pass(self))
        self._register_tir_pass(PassPhase.TIR_PHASE_3, tir.transform.LowerDeviceStorageAccessInfo())
        self._register_codegen(fmt="c", includes=gen_includes)

    def core(self) -> Core:
        attrs = config_of(self)  # this compile's attributes
        values = {}
        for name in ATTRIBUTES:
            try:
                values[name] = int(str(attrs[name]))
            except ValueError:
                raise ConfigError(f"target 'chocolate': {name} must be an integer, got '{attrs[name]}'") from None
        tiles = [values[f"tile_{d}"] for d in "mnk"]
        if not all(1 <= t <= LIMITS["MAX_TILE"] for t in tiles):
            raise ConfigError(f"target 'chocolate': tile sizes {'x'.join(map(str, tiles))} must be in "
                              f"[1, {LIMITS['MAX_TILE']}]")
        core = Core(*tiles, values["scratchpad_bytes"], values["dma_bytes_per_cycle"], values["dma_setup_cycles"])
        need = sum(core.tile_bytes("float32").values())
        if core.spad_bytes % 4 or not need <= core.spad_bytes <= LIMITS["MAX_SPAD_BYTES"]:
            raise ConfigError(f"target 'chocolate': scratchpad_bytes {core.spad_bytes} must be a multiple of 4 holding "
                              f"one A, B and accumulator tile ({need} bytes)")
        if core.dma_bytes_per_cycle < 1 or core.dma_setup_cycles < 0:
            raise ConfigError("target 'chocolate': dma_bytes_per_cycle must be >= 1 and dma_setup_cycles >= 0")
        return core

    def _validate_config(self):
        """Before partitioning: the target attributes must describe a chip (one line otherwise)."""

        @tvm.transform.module_pass(opt_level=0, name="ChocolateValidateConfig")
        def validate(mod, _ctx):
            self.core()
            return mod

        return validate

    def rejection_reason(self, call):
        """Why a conv stays on the CPU; shown in the offload report (an NCHW conv as converted)."""
        if call.op.name not in ("qnn.conv2d", "nn.conv2d"):
            return None
        return core_problem(as_kernel_layout(call, "NHWC", "HWIO") or call)

    @property
    def target_name(self):
        return "chocolate"
