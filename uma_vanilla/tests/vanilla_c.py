"""Vanilla's C library as its tests call it (``tvm_extension.testing.clib``, the way every
backend's tests call C): built with gcc with the kit's engine and the plain reference
(vanilla_reference.c), called through ctypes with the API's structs."""
import ctypes
import re
from pathlib import Path

import numpy as np

from tvm_extension.testing import clib

from uma_vanilla.codegen import KERNEL_DIR, KIT_DIR

HEADER = KERNEL_DIR / "vanilla_accelerator.h"
SOURCES = sorted(KERNEL_DIR.glob("*.c")) + [KIT_DIR / "kit_conv_f32.c"]
REFERENCE = Path(__file__).with_name("vanilla_reference.c")
# The header's status codes: {"OK": 0, "EINVAL": 1, ...}
STATUS = {m.group(1): int(m.group(2)) for m in re.finditer(r"^\s*VANILLA_(\w+) = (\d+)", HEADER.read_text(), re.MULTILINE)}
FLT_MAX = float(np.finfo(np.float32).max)
ENTRIES = [f"vanilla_{op}_{layout}" for op in ("conv2d", "depthwise_conv2d") for layout in ("nchw", "nhwc")]
# What the compiler's generated C calls (vanilla_accelerator.c): flat arguments, no structs.
FLAT = {(layout, depthwise): f"vanilla_depthwise_conv2d{layout}" if depthwise else f"vanilla_conv2d{layout}_general"
        for layout in ("nchw", "nhwc") for depthwise in (False, True)}
# The library as the host build compiles it (-O2: SSE2, a multiply then an add), with the host's
# vector units and FMA (-O3 -march=native: fmaf, 8 x 16 register blocks on AVX-512), and with odd
# register blocks (3 x 6, half-width kernel of 3 lanes) that leave partial blocks everywhere.
FLAGS = {"O2": ["-O2"], "native": ["-O3", "-march=native"],
         "odd_blocks": ["-O2", "-DKIT_CONV_F32_MR=3", "-DKIT_CONV_F32_NR=6"]}


class HW(ctypes.Structure):
    _fields_ = [("h", ctypes.c_int32), ("w", ctypes.c_int32)]


class Dims(ctypes.Structure):
    _fields_ = [("n", ctypes.c_int32), ("h", ctypes.c_int32), ("w", ctypes.c_int32), ("c", ctypes.c_int32)]


class Context(ctypes.Structure):
    _fields_ = [("buf", ctypes.c_void_p), ("size", ctypes.c_int32)]


class Activation(ctypes.Structure):
    _fields_ = [("min", ctypes.c_float), ("max", ctypes.c_float)]


class ConvParams(ctypes.Structure):
    _fields_ = [("stride", HW), ("padding", HW), ("activation", Activation)]


def build(directory: Path, flags) -> ctypes.CDLL:
    """The library (and the reference) as one shared object built with ``flags`` (under
    ``clib.run_sanitized``, with the sanitizers)."""
    lib = clib.build([*SOURCES, REFERENCE], [KERNEL_DIR, KIT_DIR], directory, "libvanilla", flags)
    clib.prototypes(lib, ctypes.c_int32, *ENTRIES, *(f"{entry}_get_buffer_size" for entry in ENTRIES))
    clib.prototypes(lib, None, "vanilla_conv2d_reference")
    tensors = [ctypes.POINTER(ctypes.c_float)] * 6
    for (_, depthwise), name in FLAT.items():  # (float arguments need their types)
        getattr(lib, name).argtypes = [ctypes.POINTER(ctypes.c_int8), ctypes.c_int32, *tensors,
                                       *[ctypes.c_int32] * (11 if depthwise else 12), ctypes.c_float, ctypes.c_float]
        getattr(lib, name).restype = ctypes.c_int32
    return lib


_pointer = clib.pointer


def conv(lib, layout, ifmap, weights, out_hw, stride=(1, 1), pad=(0, 0), bias=None, residual=None, slope=None,
         lo=-FLT_MAX, hi=FLT_MAX, depthwise=False, reference=False, scratch=None, dims=None):
    """One call of ``vanilla_[depthwise_]conv2d_<layout>`` (or the reference) on NCHW-shaped numpy
    arrays (weights [oc][ic][kh][kw], depthwise [c][kh][kw]): (status, NCHW result).  Its scratch
    is the entry's _get_buffer_size unless ``scratch`` gives the bytes; ``dims`` replaces the
    (input, filter, output) dims the arrays imply."""
    to_layout = (lambda a: np.ascontiguousarray(a.transpose(1, 2, 0))) if layout == "nhwc" else (lambda a: a)
    weights = weights[:, None] if depthwise else weights
    oc, ic, kh, kw = weights.shape
    (ic_in, ih, iw), (oh, ow) = (1, 1, 1) if ifmap is None else ifmap.shape, out_hw  # (None: a NULL input)
    data, skip = (None if a is None else to_layout(a) for a in (ifmap, residual))
    result = to_layout(np.full((oc, oh, ow), np.nan, np.float32))
    params = ConvParams(HW(*stride), HW(*pad), Activation(lo, hi))
    in_dims, filter_dims, out_dims = dims or (Dims(1, ih, iw, ic_in), Dims(oc, kh, kw, ic), Dims(1, oh, ow, oc))
    refs = [ctypes.byref(d) for d in (params, in_dims, filter_dims, out_dims)]
    entry = f"vanilla_{'depthwise_' if depthwise else ''}conv2d_{layout}"
    if reference:
        lib.vanilla_conv2d_reference(int(depthwise), int(layout == "nhwc"), refs[0], refs[1], _pointer(data), refs[2],
                                     _pointer(weights), _pointer(bias), _pointer(skip), _pointer(slope), refs[3],
                                     _pointer(result))
        status = 0
    else:
        size = getattr(lib, f"{entry}_get_buffer_size")(*refs) if scratch is None else scratch
        buf = ctypes.create_string_buffer(max(size, 1))
        ctx = Context(ctypes.cast(buf, ctypes.c_void_p), size)
        status = getattr(lib, entry)(ctypes.byref(ctx), refs[0], refs[1], _pointer(data), refs[2], _pointer(weights),
                                     _pointer(bias), _pointer(skip), _pointer(slope), refs[3], _pointer(result))
    return status, result.transpose(2, 0, 1) if layout == "nhwc" else result


def buffer_size(lib, layout, g, depthwise=False) -> int:
    """The C's ``_get_buffer_size`` for a geometry dict (uma_vanilla.buffer_size's argument)."""
    params = ConvParams(HW(g["stride_h"], g["stride_w"]), HW(g["pad_top"], g["pad_left"]), Activation(-FLT_MAX, FLT_MAX))
    dims = (Dims(1, g["ih"], g["iw"], g["ic"]), Dims(g["oc"], g["kh"], g["kw"], 1 if depthwise else g["ic"]),
            Dims(1, g["oh"], g["ow"], g["oc"]))
    entry = f"vanilla_{'depthwise_' if depthwise else ''}conv2d_{layout}_get_buffer_size"
    return getattr(lib, entry)(ctypes.byref(params), *(ctypes.byref(d) for d in dims))


def flat(lib, layout, depthwise, arrays, ints, lo=-FLT_MAX, hi=FLT_MAX, scratch=0) -> int:
    """The status of one call of the flat entry on ``arrays`` as they are (input, filter, bias,
    residual, slope, output; None: NULL) and ``ints`` (ic, ih, iw, oc, oh, ow, kh, kw, stride, pad;
    depthwise: channels, ih, iw, oh, ow, ...); its scratch an array of exactly ``scratch`` bytes
    (NULL for 0 or less), so the sanitized run sees a byte beyond it."""
    buf = np.zeros(scratch, np.int8) if scratch > 0 else None
    entry = getattr(lib, FLAT[layout, depthwise])
    return entry(_pointer(buf, ctypes.c_int8), scratch, *map(_pointer, arrays), *ints, lo, hi)


def flat_conv(lib, layout, ifmap, weights, out_hw, stride=(1, 1), pad=(0, 0), bias=None, residual=None, slope=None,
              lo=-FLT_MAX, hi=FLT_MAX, depthwise=False, scratch=None):
    """``conv`` through the flat entry, as generated code calls it: (status, NCHW result); the
    scratch is exactly the entry's _get_buffer_size unless ``scratch`` gives the bytes."""
    to_layout = (lambda a: np.ascontiguousarray(a.transpose(1, 2, 0))) if layout == "nhwc" else (lambda a: a)
    oc, kh, kw = weights.shape[0], *weights.shape[-2:]
    (ic, ih, iw), (oh, ow) = ifmap.shape, out_hw
    if scratch is None:
        g = dict(ic=ic, ih=ih, iw=iw, oc=oc, oh=oh, ow=ow, kh=kh, kw=kw, stride_h=stride[0], stride_w=stride[1],
                 pad_top=pad[0], pad_left=pad[1])
        scratch = buffer_size(lib, layout, g, depthwise)
    result = to_layout(np.full((oc, oh, ow), np.nan, np.float32))
    sizes = [oc, ih, iw, oh, ow] if depthwise else [ic, ih, iw, oc, oh, ow]
    arrays = [to_layout(ifmap), weights, bias, None if residual is None else to_layout(residual), slope, result]
    status = flat(lib, layout, depthwise, arrays, [*sizes, kh, kw, *stride, *pad], lo, hi, scratch)
    return status, result.transpose(2, 0, 1) if layout == "nhwc" else result
