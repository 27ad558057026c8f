"""Chocolate's TIR pass (no Relay: the Relay pass that prepares each offloaded chain,
``prepare_core_conv``, is in ``patterns.py``).

``ChocolateTilingPass`` (phase 0): the offloaded function becomes the scheduled GEMM of
``schedule.py``: loops of DMA transfers and core calls.
"""
import logging

import tvm
from tvm import tir

from tvm_extension.uma.config import config_of

from . import schedule
from .target import core_of

ATTR = "Chocolate"  # function attribute: the layer's scalars, written by patterns.prepare_core_conv
log = logging.getLogger("tvm_extension")


def _roles(func: tir.PrimFunc, depth: int):
    """The stand-in's buffers by role, in parameter order: the input first, the output last,
    between them the weights ([depth][channels]) and the channel table (int8: [3][channels]
    of bias, multiplier, shift; float: the bias, [1][channels])."""
    buffers = [func.buffer_map[p] for p in func.params]
    middle = buffers[1:-1]
    weights = next(b for b in middle if int(b.shape[0]) == depth and b.dtype in ("int8", "float32"))
    return [("input", buffers[0])] + [("weights" if b.same_as(weights) else "table", b) for b in middle] + \
        [("output", buffers[-1])]


class ChocolateTilingPass:
    """Phase 0: the offloaded function becomes its tiled, tensorized GEMM."""

    def __init__(self, backend):
        self._backend = backend

    def __call__(self, func, mod, ctx):
        relay_attrs = func.attrs["relay_attrs"] if func.attrs and "relay_attrs" in func.attrs else None
        if relay_attrs is None or ATTR not in relay_attrs:
            return func
        layer = schedule.ConvLayer.from_attrs(relay_attrs[ATTR])
        core = core_of(config_of(self._backend))  # this compile's attributes
        plan = schedule.plan_layer(layer, core, layer.dtype)
        log.info("%s: GEMM %d x %d x %d on %dx%dx%d tiles, %s (lower bound %d bytes)", func.attrs["global_symbol"],
                 *layer.gemm, core.tile_m, core.tile_n, core.tile_k, plan.describe(), layer.lower_bound())
        names = schedule.register_intrinsics(core, plan)
        roles = _roles(func, layer.gemm[2])
        shapes = {role: [int(d) for d in buf.shape] for role, buf in roles}
        tensors = dict(zip(("input", "weights", "table", "output"), schedule.gemm_compute(layer, core, shapes)))
        scheduled = schedule.schedule(layer, core, plan, [tensors[role] for role, _ in roles], names)
        return tir.PrimFunc(scheduled.params, scheduled.body, func.ret_type, scheduled.buffer_map, func.attrs)


def tiling_pass(backend):
    return tvm.tir.transform.prim_func_pass(ChocolateTilingPass(backend), opt_level=2, name="ChocolateTiling")
