"""Strawberry's C library as its tests call it (``tvm_extension.testing.clib``, the way every
backend's tests call C): strawberry_*.c with the kit's conv engine, built with gcc, called through
ctypes with the header's structs."""
import ctypes
import re
from pathlib import Path

from tvm_extension.testing import clib

from uma_strawberry.codegen import KERNEL_DIR, KIT_DIR

HEADER = KERNEL_DIR / "strawberry.h"
SOURCES = [*sorted(KERNEL_DIR.glob("*.c")), KIT_DIR / "kit_conv_f32.c"]
# The header's status codes: {"OK": 0, "ENOTREADY": 1, ...}
STATUS = {m.group(1): int(m.group(2))
          for m in re.finditer(r"^\s*STRAWBERRY_(E\w+|OK) = (\d+)", HEADER.read_text(), re.MULTILINE)}
CONV_ENTRIES = [f"strawberry_{op}_{layout}" for op in ("conv2d", "depthwise_conv2d") for layout in ("nchw", "nhwc")]

# The header's packing functions are `static inline` (ctypes cannot reach them): exported under
# a test_ prefix, so that the tests call what the generated code calls.
PACKING = r"""
#include "strawberry.h"

int32_t test_depthwise_conv2d_nchw_call(int32_t ifmap, int32_t weights, int32_t bias, int32_t residual, int32_t slope,
                                        int32_t ofmap, int32_t ih, int32_t iw, int32_t ic, int32_t oh, int32_t ow,
                                        int32_t oc, int32_t kh, int32_t kw, int32_t stride_h, int32_t stride_w,
                                        float lo, float hi, int32_t accumulate) {
  return strawberry_depthwise_conv2d_nchw_call(ifmap, weights, bias, residual, slope, ofmap, ih, iw, ic, oh, ow, oc,
                                               kh, kw, stride_h, stride_w, lo, hi, accumulate);
}
"""


class Tile(ctypes.Structure):
    _fields_ = [(name, ctypes.c_int32 * 3) for name in ("extent", "stride", "start", "size")]


class HW(ctypes.Structure):
    _fields_ = [("h", ctypes.c_int32), ("w", ctypes.c_int32)]


class Dims(ctypes.Structure):
    _fields_ = [("h", ctypes.c_int32), ("w", ctypes.c_int32), ("c", ctypes.c_int32)]


class ConvAddrs(ctypes.Structure):
    _fields_ = [(name, ctypes.c_int32) for name in ("ifmap", "weights", "bias", "residual", "slope", "ofmap")]


class ConvParams(ctypes.Structure):
    _fields_ = [("input", Dims), ("output", Dims), ("kernel", HW), ("stride", HW), ("lo", ctypes.c_float),
                ("hi", ctypes.c_float), ("accumulate", ctypes.c_int32)]


class Counters(ctypes.Structure):
    _fields_ = [(name, ctypes.c_int64) for name in (
        "layers", "dma_in_calls", "dma_out_calls", "dma_in_bytes", "dma_pad_bytes", "dma_out_bytes", "dma_cycles",
        "compute_calls", "macs", "compute_cycles", "spad_high_water", "spad_peak_bytes")]

    def as_dict(self):
        return {name: getattr(self, name) for name, _ in self._fields_}


def build(directory: Path, flags=("-O2", "-pedantic")) -> ctypes.CDLL:
    """The library (and the exported packing function) as one shared object (under
    ``clib.run_sanitized``, with the sanitizers)."""
    packing = Path(directory) / "strawberry_packing.c"
    packing.write_text(PACKING)
    lib = clib.build([*SOURCES, packing], [KERNEL_DIR, KIT_DIR], directory, "strawberry", flags, std="-std=c99")
    return prototypes(lib)


def prototypes(lib: ctypes.CDLL) -> ctypes.CDLL:
    """The entries' return types (all status codes are int32)."""
    clib.prototypes(lib, ctypes.c_int32, "strawberry_init", "strawberry_begin", "strawberry_dma_in", "strawberry_dma_out",
                    "strawberry_spad_bytes", *CONV_ENTRIES, "test_depthwise_conv2d_nchw_call")
    clib.prototypes(lib, ctypes.c_char_p, "strawberry_last_error")
    clib.prototypes(lib, None, "strawberry_get_counters", "strawberry_report", "strawberry_shutdown")
    lib.test_depthwise_conv2d_nchw_call.argtypes = [ctypes.c_int32] * 16 + [ctypes.c_float] * 2 + [ctypes.c_int32]
    return lib
