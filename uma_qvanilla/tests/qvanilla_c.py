"""QVanilla's C library as its tests call it (``tvm_extension.testing.clib``, the way every
backend's tests call C): every C file of c/ (what an MLF ships), the plain reference kernels
(c/reference) and the addresses of the header's static inline calls (qvanilla_calls.c), built
with gcc and called through ctypes with the API's structs, numpy arrays as the tensors."""
import ctypes
import re
from pathlib import Path

import numpy as np

from tvm_extension.testing import clib

from uma_qvanilla.codegen import KERNEL_DIR, KIT_DIR

HEADER = KERNEL_DIR / "qvanilla.h"
SHIPPED = sorted(KERNEL_DIR.glob("*.c"))  # the C files an MLF ships
SOURCES = [*SHIPPED, KERNEL_DIR / "reference" / "qvanilla_conv2d_ref.c", Path(__file__).with_name("qvanilla_calls.c")]
# The header's status codes and constants: {"OK": 0, "EINVAL": 1, ..., "ROUNDING_TFLITE": 1, "SHIFT_MIN": -31, ...}
CONSTANTS = {m.group(1): int(m.group(2)) for m in re.finditer(r"^(?:#define |\s+)QVANILLA_(\w+)(?: | = )\(?(-?\d+)\)?",
                                                               HEADER.read_text(), re.MULTILINE)}
# The struct entries (the API), the plain ones' reference kernels (c/reference: no ctx, no status)
# and what generated code calls (the header's static inline functions that fill the structs).
STRUCT = ["qvanilla_conv2d_s8", "qvanilla_conv2d_packed_s8", "qvanilla_conv2d_packed8_s8",
          "qvanilla_depthwise_conv2d_s8", "qvanilla_depthwise_conv2d_packed_s8"]
REFERENCES = ["qvanilla_conv2d_s8_ref", "qvanilla_depthwise_conv2d_s8_ref"]
GENERATED = ["qvanilla_conv2d_nhwc_packed_s8", "qvanilla_conv2d_nhwc_packed8_s8",
             "qvanilla_depthwise_conv2d_nhwc_packed_s8"]
NULLABLE = ["ctx", "params", "quant", "input_dims", "filter_dims", "output_dims"]  # the struct pointers


class HW(ctypes.Structure):
    _fields_ = [("h", ctypes.c_int32), ("w", ctypes.c_int32)]


class Dims(ctypes.Structure):
    _fields_ = [("n", ctypes.c_int32), ("h", ctypes.c_int32), ("w", ctypes.c_int32), ("c", ctypes.c_int32)]


class Activation(ctypes.Structure):
    _fields_ = [("min", ctypes.c_int32), ("max", ctypes.c_int32)]


class ConvParams(ctypes.Structure):
    _fields_ = [("stride", HW), ("padding", HW), ("input_zp", ctypes.c_int32), ("weight_zp", ctypes.c_int32),
                ("output_zp", ctypes.c_int32), ("activation", Activation), ("rounding", ctypes.c_int32)]


class Quant(ctypes.Structure):
    _fields_ = [("multiplier", ctypes.POINTER(ctypes.c_int32)), ("shift", ctypes.POINTER(ctypes.c_int32))]


class Context(ctypes.Structure):
    _fields_ = [("buf", ctypes.c_void_p), ("size", ctypes.c_int32)]


def build(directory: Path, flags=("-O2",)) -> ctypes.CDLL:
    """The library (with the references and qvanilla_calls.c) as one shared object built with
    ``flags`` (under ``clib.run_sanitized``, with the sanitizers)."""
    lib = clib.build(SOURCES, [KERNEL_DIR, KIT_DIR], directory, "libqvanilla", flags)
    clib.prototypes(lib, ctypes.c_int32, *STRUCT, *(f"{entry}_get_buffer_size" for entry in STRUCT))
    clib.prototypes(lib, None, *REFERENCES)
    for name in ("qvanilla_requantize", "qvanilla_requantize_tflite"):
        getattr(lib, name).restype = ctypes.c_int32
        getattr(lib, name).argtypes = [ctypes.c_int32] * 3
    int8, int16, int32 = (ctypes.POINTER(t) for t in (ctypes.c_int8, ctypes.c_int16, ctypes.c_int32))
    lib.generated = {}
    for entry in GENERATED:  # input, packed weights, table, output, scratch, then its ints
        ints = 17 if "depthwise" in entry else 18
        weights = int8 if "packed8" in entry else int16
        prototype = ctypes.CFUNCTYPE(ctypes.c_int32, int8, weights, int32, int8, int8, *[ctypes.c_int32] * ints)
        lib.generated[entry] = prototype(ctypes.c_void_p.in_dll(lib, f"{entry}_address").value)
    return lib


def pointer(array):
    """``array``'s data as a pointer of its dtype (NULL for None)."""
    return None if array is None else clib.pointer(array, np.ctypeslib.as_ctypes_type(array.dtype))


def dims(entry: str, g: dict):
    """(input, filter, output) dims of ``entry`` for a geometry (ih, iw, ic, oh, ow, oc, kh, kw; a
    depthwise entry's channels are ic); n, filter_n, filter_c, output_c replace the batch and channels."""
    depthwise = "depthwise" in entry
    return (Dims(g.get("n", 1), g["ih"], g["iw"], g["ic"]),
            Dims(g.get("filter_n", 1 if depthwise else g["oc"]), g["kh"], g["kw"], g.get("filter_c", g["ic"])),
            Dims(1, g["oh"], g["ow"], g.get("output_c", g["ic"] if depthwise else g["oc"])))


def call(lib, entry: str, arrays, g: dict, size: int = 0, null=(), misaligned=False) -> int:
    """The status of one call of a struct entry (a reference kernel: 0) on ``arrays`` as they are
    (input, weights, bias, output, multiplier, shift, scratch; None: NULL), the geometry and
    parameters of ``g`` (``dims``; stride_h, ..., rounding as qvanilla_conv_params names them) and
    a context of ``size`` bytes at the scratch (one byte in if ``misaligned``); ``null`` names the
    struct pointers (NULLABLE) passed as NULL."""
    x, w, bias, output, multiplier, shift, scratch = arrays
    params = ConvParams(HW(g["stride_h"], g["stride_w"]), HW(g["pad_top"], g["pad_left"]), g["input_zp"],
                        g["weight_zp"], g["output_zp"], Activation(g["act_min"], g["act_max"]), g["rounding"])
    ctx = Context(None if scratch is None else scratch.ctypes.data + misaligned, size)
    structs = dict(zip(NULLABLE, (ctx, params, Quant(pointer(multiplier), pointer(shift)), *dims(entry, g))))
    s = {name: None if name in null else ctypes.byref(struct) for name, struct in structs.items()}
    tensors = (s["input_dims"], pointer(x), s["filter_dims"], pointer(w), pointer(bias), s["output_dims"],
               pointer(output))
    if entry in REFERENCES:
        getattr(lib, entry)(s["params"], s["quant"], *tensors)
        return 0
    return getattr(lib, entry)(s["ctx"], s["params"], s["quant"], *tensors)


def generated(lib, entry: str, arrays, ints) -> int:
    """The status of one call of what generated code calls: ``arrays`` (input, packed weights,
    the table of folded bias, multiplier and shift rows, output, scratch; None: NULL), ``ints``
    (the scratch's size, then ih, iw, ic, ... as the header's signature)."""
    return lib.generated[entry](*map(pointer, arrays), *ints)


def buffer_size(lib, kind: str, input_dims: Dims, filter_dims: Dims) -> int:
    """``qvanilla_<kind>_get_buffer_size`` (kind as ``uma_qvanilla.scratch.KINDS``)."""
    return getattr(lib, f"qvanilla_{kind}_get_buffer_size")(ctypes.byref(input_dims), ctypes.byref(filter_dims))
