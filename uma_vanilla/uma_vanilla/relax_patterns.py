"""Vanilla for the Relax engine (apache-tvm 0.27: ``python -m tvm_extension.relax``).

What a backend adds for Relax, beside its Relay backend (which this module never imports):
its target name and attributes, its patterns in Relax terms, why a conv stays on the CPU, and
the call of its C API computing one match.  Its C library is the same, found from
``gen_includes`` (codegen.py), and compiled into the exported library.

Offloaded: ``conv2d -> [add(bias)] -> [relu]``, NCHW/OIHW float32, batch 1, no dilation or
groups, a window of at most ``max_kernel_size`` squared taps, any stride and zero padding.
Not yet: depthwise, NHWC, residual, clip, PReLU (the Relay backend offloads those).
"""
from typing import Optional

from tvm import tirx

from tvm_extension.relax.patterns import FLT_MAX, bias_problem, conv2d_patterns, conv2d_problem, conv_geometry

from .codegen import KERNEL_DIR, gen_includes  # noqa: F401  (its C library, as for Relay)
from .buffer_size import buffer_size
from .target import MAX_KERNEL_SIZE, NAME as TARGET

# As the Relay backend's: --target-vanilla_accelerator-max_kernel_size=N (its window buffer holds N*N taps).
TARGET_ATTRS = {"max_kernel_size": 7}
TARGET_ATTR_RANGES = {"max_kernel_size": (1, MAX_KERNEL_SIZE)}


def why_not_offloaded(conv, attrs) -> Optional[str]:
    """Why Vanilla does not compute this ``relax.nn.conv2d``, else None."""
    return conv2d_problem(conv, attrs["max_kernel_size"])


def patterns(attrs):
    def check(match):
        problem = why_not_offloaded(match["conv"], attrs)
        return problem is None and ("bias" not in match or bias_problem(match["bias"], match["conv"]) is None)

    return conv2d_patterns(TARGET, check)


def kernel_call(match, attrs):
    """``vanilla_conv2dnchw_general`` on the match's buffers (vanilla_accelerator.h): (its status,
    the scratch buffer to allocate for it, sized as the Relay pass sizes it)."""
    conv = match.ops["relax.nn.conv2d"]
    g = conv_geometry(conv)
    null = tirx.reinterpret("handle", tirx.const(0, "uint64"))  # a left-out tensor
    bias = match.buffer(match.ops["relax.add"].args[1]).data if "relax.add" in match.ops else null
    lo = 0.0 if "relax.nn.relu" in match.ops else -FLT_MAX
    nbytes = buffer_size(False, "nchw", g)
    scratch = tirx.decl_buffer((max(nbytes, 1),), "int8", "vanilla_scratch")
    window = [g[k] for k in ("ic", "ih", "iw", "oc", "oh", "ow", "kh", "kw", "stride_h", "stride_w", "pad_top", "pad_left")]
    status = tirx.call_extern(
        "int32", "vanilla_conv2dnchw_general", scratch.data, tirx.IntImm("int32", nbytes),
        match.buffer(conv.args[0]).data, match.buffer(conv.args[1]).data, bias, null, null, match.result.data, *window,
        tirx.FloatImm("float32", lo), tirx.FloatImm("float32", FLT_MAX))
    return status, [scratch]


def register():
    """The ``tvm.backends`` entry point (pyproject.toml): apache-tvm calls it at ``import tvm``, so
    an installed Vanilla needs no option (``tvm_extension.relax.backends.register``)."""
    import sys  # pylint: disable=import-outside-toplevel

    from tvm_extension.relax.backends import register as register_backend  # pylint: disable=import-outside-toplevel

    register_backend(sys.modules[__name__])
