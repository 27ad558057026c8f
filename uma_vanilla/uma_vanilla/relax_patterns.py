"""Vanilla for the Relax engine (apache-tvm 0.27: ``tvm-extension compile --target vanilla_accelerator``).

What a backend adds for Relax, beside its Relay backend (which this module never imports):
its target name and attributes, its patterns in Relax terms, why a conv stays on the CPU, the
constants its kernel reads repacked, and the call of its C API computing one match.  Its C
library is the same, found from ``gen_includes`` (codegen.py), and compiled into the exported library.

Offloaded, as on the Relay engine: ``conv2d -> [add(bias)] -> [add(residual)] -> [relu|clip|prelu]``,
NCHW/OIHW or NHWC (TFLite's) float32, dense or depthwise, batch 1, no dilation, a window of at
most ``max_kernel_size`` squared taps (depthwise: VANILLA_MAX_TAPS), any stride and zero padding.
"""
from typing import Optional

from tvm_extension.relax import tvm_internals as tir
from tvm_extension.relax.patterns import (
    clamp_bounds, conv2d_patterns, conv2d_problem, conv_geometry, is_depthwise, oihw_packs, prelu_slope, split_fused,
    stage_problem,
)

from .codegen import KERNEL_DIR, gen_includes  # noqa: F401  (its C library, as for Relay)
from .buffer_size import buffer_size
from .target import MAX_KERNEL_SIZE, MAX_TAPS, NAME as TARGET

# As the Relay backend's: --target-vanilla_accelerator-max_kernel_size=N (its window buffer holds N*N taps).
TARGET_ATTRS = {"max_kernel_size": 7}
TARGET_ATTR_RANGES = {"max_kernel_size": (1, MAX_KERNEL_SIZE)}


def why_not_offloaded(conv, attrs) -> Optional[str]:
    """Why Vanilla does not compute this ``relax.nn.conv2d``, else None."""
    return conv2d_problem(conv, attrs["max_kernel_size"], nhwc=True, max_taps=MAX_TAPS)


def patterns(attrs):
    return conv2d_patterns(TARGET, lambda parts: why_not_offloaded(parts.conv, attrs) is None
                           and stage_problem(parts) is None)


def pack_constants(func, _constants=None) -> dict:
    """Vanilla reads weights as [oc][ic][kh][kw] whatever the feature maps' layout, and one PReLU
    slope per channel (the kit's conv engine: ``oihw_packs``)."""
    return oihw_packs(func)


def kernel_call(match, attrs):
    """The flat call of vanilla_accelerator.h for the match's layout and kind (dense or depthwise) on
    its buffers: (its status, the scratch buffer to allocate for it, sized as the C sizes it)."""
    parts = split_fused(match.func)
    conv, g = parts.conv, conv_geometry(parts.conv)
    depthwise, layout = is_depthwise(conv), conv.attrs.data_layout.lower()
    slope = prelu_slope(parts)
    lo, hi = clamp_bounds(parts.activation)
    nbytes = buffer_size(depthwise, layout, g)
    work = tir.scratch(nbytes, "vanilla_scratch")
    sizes = ["ic", "ih", "iw", "oc", "oh", "ow"] if not depthwise else ["ic", "ih", "iw", "oh", "ow"]  # ic = oc
    window = [g[k] for k in (*sizes, "kh", "kw", "stride_h", "stride_w", "pad_top", "pad_left")]
    function = f"vanilla_depthwise_conv2d{layout}" if depthwise else f"vanilla_conv2d{layout}_general"
    status = tir.c_call(function, work, nbytes, match.pointer(conv.args[0]), match.pointer(conv.args[1]),
                        match.pointer(parts.bias), match.pointer(parts.residual), match.pointer(slope), match.result,
                        *window, float(lo), float(hi))
    return status, [work]


def register():
    """The ``tvm.backends`` entry point (pyproject.toml): apache-tvm calls it at ``import tvm``, so
    an installed Vanilla needs no option (``tvm_extension.relax.backends.register``)."""
    import sys  # pylint: disable=import-outside-toplevel

    from tvm_extension.relax.backends import register as register_backend  # pylint: disable=import-outside-toplevel

    register_backend(sys.modules[__name__])
