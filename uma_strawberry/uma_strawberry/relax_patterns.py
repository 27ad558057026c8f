"""Strawberry for the Relax engine (apache-tvm 0.27: ``tvm-extension compile --target strawberry``).

The same layers as on the Relay engine (Vanilla's patterns: ``conv2d -> [add(bias)] ->
[add(residual)] -> [relu|clip|prelu]``, NCHW or NHWC, dense or depthwise, a window of at most
7 x 7 taps), the same tiling (``tiling.plan_layer``) and the same program of DMA transfers and
engine calls (``program.build``), built with apache-tvm's TIR; only the scratchpad buffers are
placed by the program itself (given ``extern``), as this TVM has no memory scopes to place them.
This module imports nothing of Relay.
"""
import logging
from typing import Optional

from tvm_extension.relax.backends import UserError
from tvm_extension.relax import tvm_internals as tir
from tvm_extension.relax.patterns import (
    clamp_bounds, conv2d_patterns, conv2d_problem, conv_geometry, is_depthwise, oihw_packs, prelu_slope, split,
    split_fused, stage_problem,
)

from . import program
from .codegen import gen_includes  # noqa: F401  (its C library, as for Relay)
from .target import ATTR_RANGES as TARGET_ATTR_RANGES, ATTRIBUTES as TARGET_ATTRS, NAME as TARGET  # noqa: F401
from .target import MAX_KERNEL_SIZE, MAX_TAPS
from .tiling import Config, ConfigError, Layer, Unfit, lower_bound, plan_layer

log = logging.getLogger("tvm_extension.strawberry")  # tvmc -v prints it, as the Relay engine's passes.py


def _config(attrs) -> Config:
    try:
        return Config.from_attrs(attrs)
    except ConfigError as err:
        raise UserError(str(err)) from None


def _layer(parts) -> Layer:
    conv, g = parts.conv, conv_geometry(parts.conv)
    slope = prelu_slope(parts) is not None
    return Layer(layout=str(conv.attrs.data_layout).lower(), depthwise=is_depthwise(conv), ic=g["ic"], ih=g["ih"],
                 iw=g["iw"], oc=g["oc"], oh=g["oh"], ow=g["ow"], kh=g["kh"], kw=g["kw"], stride_h=g["stride_h"],
                 stride_w=g["stride_w"], pad_top=g["pad_top"], pad_left=g["pad_left"], bias=parts.bias is not None,
                 residual=parts.residual is not None, slope=slope)


def _problem(parts, attrs) -> Optional[str]:
    reason = conv2d_problem(parts.conv, MAX_KERNEL_SIZE, nhwc=True, max_taps=MAX_TAPS) or stage_problem(parts)
    if reason is not None:
        return reason
    config = _config(attrs)
    try:
        plan_layer(_layer(parts), config)
    except Unfit as unfit:
        return f"too large for the scratchpad at any split ({unfit}; scratchpad_bytes {config.spad_bytes})"
    return None


def why_not_offloaded(conv, attrs) -> Optional[str]:
    """Why Strawberry does not compute this ``relax.nn.conv2d`` (the conv alone), else None."""
    return _problem(split(conv, {}), attrs)


def patterns(attrs):
    _config(attrs)  # a bad combination of attributes: one line before anything runs
    return conv2d_patterns(TARGET, lambda parts: _problem(parts, attrs) is None)


def pack_constants(func, _constants=None) -> dict:
    """The engine reads weights as [oc][ic|1][kh][kw] whatever the feature maps' layout, and one
    PReLU slope per channel (the kit's conv engine: ``oihw_packs``)."""
    return oihw_packs(func)


def kernel_call(match, attrs):
    """The layer's program: its tiles' DMA transfers and engine calls, every status checked."""
    parts = split_fused(match.func)
    layer, config = _layer(parts), _config(attrs)
    slope = prelu_slope(parts)
    host = {role: match.pointer(expr) if expr is not None else None for role, expr in (
        ("ifmap", parts.conv.args[0]), ("weights", parts.conv.args[1]), ("bias", parts.bias),
        ("residual", parts.residual), ("slope", slope))}
    host["ofmap"] = tir.pointer(match.result)
    lo, hi = clamp_bounds(parts.activation)
    plan = plan_layer(layer, config)
    log.info("%s: %s (lower bound %d bytes, scratchpad %d bytes in use)", match.pattern, plan.describe(),
             lower_bound(layer), plan.occupancy_bytes)
    return tir.checked_program(TARGET, lambda extern: program.build(layer, plan, config, host, lo, hi, extern))


def register():
    """The ``tvm.backends`` entry point (pyproject.toml): apache-tvm calls it at ``import tvm``."""
    import sys  # pylint: disable=import-outside-toplevel

    from tvm_extension.relax.backends import register as register_backend  # pylint: disable=import-outside-toplevel

    register_backend(sys.modules[__name__])
