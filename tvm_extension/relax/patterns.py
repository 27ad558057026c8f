"""Relax patterns of a float32 conv engine with an output stage, for backends to use:
``conv2d -> [add(bias)] -> [relu]``, what the ONNX and TFLite frontends emit for a conv layer.

``conv2d_patterns(target, check)`` gives the ``FuseOpsByPattern`` entries, largest first, each
annotated ``ifmap``, ``weights``, ``conv`` and ``bias`` (when there is one); ``conv2d_problem``
says why the engine does not compute a conv (one phrase, shown in the offload report), and
``conv_geometry`` gives the integers a conv passes to a kernel.
"""
from typing import Callable, Optional

from tvm.relax.dpl import is_const, is_op, wildcard
from tvm.relax.transform import FusionPattern

FLT_MAX = 3.4028234663852886e38


def conv2d_patterns(target: str, check: Callable) -> list:
    """``<target>.conv2d[_bias][_relu]`` entries; ``check(annotated)`` (a dict of the annotated
    expressions) accepts a match."""
    entries = []
    for bias in (True, False):
        for relu in (True, False):
            ifmap, weights = wildcard(), is_const()
            root = conv = is_op("relax.nn.conv2d")(ifmap, weights)
            annotations = {"ifmap": ifmap, "weights": weights, "conv": conv}
            if bias:
                annotations["bias"] = is_const()
                root = is_op("relax.add")(root, annotations["bias"])
            if relu:
                root = is_op("relax.nn.relu")(root)
            name = f"{target}.conv2d{'_bias' if bias else ''}{'_relu' if relu else ''}"
            entries.append(FusionPattern(name, root, annotations, lambda ctx: check(dict(ctx.annotated_expr))))
    return entries


def _ints(values) -> list:
    return [int(v) for v in values]


def conv2d_problem(conv, max_kernel_size: int) -> Optional[str]:
    """Why the engine does not compute this ``relax.nn.conv2d``, else None: it takes NCHW/OIHW
    float32, batch 1, no dilation, no groups, a window of at most ``max_kernel_size`` squared taps."""
    attrs, data, weight = conv.attrs, conv.args[0].ty, conv.args[1].ty
    if (attrs.data_layout, attrs.kernel_layout, attrs.out_layout) != ("NCHW", "OIHW", "NCHW"):
        return f"layout {attrs.data_layout}/{attrs.kernel_layout} (needs NCHW/OIHW)"
    if data.dtype != "float32" or weight.dtype != "float32" or conv.ty.dtype != "float32":
        return f"dtype {data.dtype} (needs float32)"
    if data.shape is None or any(not isinstance(d, int) and not hasattr(d, "value") for d in data.shape):
        return "dynamic shape"
    if int(attrs.groups) != 1:
        return f"groups {int(attrs.groups)} (needs 1)"
    if _ints(attrs.dilation) != [1, 1]:
        return "dilation {}x{}".format(*_ints(attrs.dilation))
    if int(data.shape[0]) != 1:
        return f"batch {int(data.shape[0])} (needs 1)"
    kh, kw = _ints(weight.shape)[2:]
    if kh * kw > max_kernel_size ** 2:
        return f"kernel {kh}x{kw} larger than the window buffer (max_kernel_size {max_kernel_size})"
    return None


def bias_problem(bias, conv) -> Optional[str]:
    """Why a constant added after the conv is not a per-channel bias, else None."""
    channels = int(conv.ty.shape[1])
    shape = _ints(bias.ty.shape)
    if bias.ty.dtype != "float32" or shape not in ([1, channels, 1, 1], [channels, 1, 1]):
        return f"added tensor of shape {shape} is not a bias of {channels} channels"
    return None


def conv_geometry(conv) -> dict:
    """The integers of an NCHW/OIHW conv: channels, sizes, kernel, strides, top/left pads."""
    _, ic, ih, iw = _ints(conv.args[0].ty.shape)
    oc, _, kh, kw = _ints(conv.args[1].ty.shape)
    _, _, oh, ow = _ints(conv.ty.shape)
    pad_top, pad_left = _ints(conv.attrs.padding)[:2]  # bottom/right follow from the output size
    stride_h, stride_w = _ints(conv.attrs.strides)
    return dict(oc=oc, ic=ic, ih=ih, iw=iw, kh=kh, kw=kw, oh=oh, ow=ow, stride_h=stride_h, stride_w=stride_w,
                pad_top=pad_top, pad_left=pad_left)
