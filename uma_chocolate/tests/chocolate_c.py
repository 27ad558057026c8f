"""Chocolate's C library as its tests call it (``tvm_extension.testing.clib``, the way every
backend's tests call C): the hardware model (chocolate_*.c, with the kit's requantization header)
and the plain reference (reference/chocolate_conv_ref.c) built with gcc into one shared object,
called through ctypes with the header's structs; host tensors are numpy arrays of exactly their
size (under ``clib.run_sanitized`` ASan sees one element too far)."""
import ctypes
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

from tvm_extension.testing import clib

from uma_chocolate.codegen import KERNEL_DIR as CHOCOLATE, KIT_DIR as KIT

HERE = Path(__file__).parent
REFERENCE = HERE / "reference"  # the plain reference kernel: tests only, not in the MLF
# The header's status codes: {"OK": 0, "ENOTREADY": 1, ...}
CODES = {name: int(value) for name, value in
         re.findall(r"\bCHOCOLATE_(E\w+|OK) = (\d+)", (CHOCOLATE / "chocolate.h").read_text())}

# The header's packing functions are static inline (compiled code calls them): exported here so
# that the tests configure layers through them, as compiled code does.  g: the 13 geometry integers.
PACKING = r"""
#include "chocolate.h"

int32_t chocolate_test_configure_s8(const int32_t* g, int32_t input_zp, int32_t* table, int32_t output_zp,
                                    int32_t act_min, int32_t act_max) {
  return chocolate_configure_s8_call(g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8], g[9], g[10], g[11], g[12],
                                     input_zp, table, output_zp, act_min, act_max);
}

int32_t chocolate_test_configure_f32(const int32_t* g, float* bias, float lo, float hi) {
  return chocolate_configure_f32_call(g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8], g[9], g[10], g[11], g[12],
                                      bias, lo, hi);
}
"""


class HW(ctypes.Structure):
    _fields_ = [("h", ctypes.c_int32), ("w", ctypes.c_int32)]


class Dims(ctypes.Structure):
    _fields_ = [("h", ctypes.c_int32), ("w", ctypes.c_int32), ("c", ctypes.c_int32)]


class ConvParams(ctypes.Structure):
    _fields_ = [("rows", ctypes.c_int32), ("channels", ctypes.c_int32), ("depth", ctypes.c_int32), ("input", Dims),
                ("kernel", HW), ("stride", HW), ("padding", HW), ("ow", ctypes.c_int32)]

    @classmethod
    def of(cls, g):
        """From the geometry list: rows, channels, depth, ih, iw, ic, kh, kw, stride (h, w), pad (top, left), ow."""
        return cls(*g[:3], Dims(*g[3:6]), HW(*g[6:8]), HW(*g[8:10]), HW(*g[10:12]), g[12])


class QuantParams(ctypes.Structure):
    _fields_ = [(name, ctypes.c_int32) for name in ("input_zp", "output_zp", "act_min", "act_max")]


class PerChannelQuantParams(ctypes.Structure):
    _fields_ = [(name, ctypes.POINTER(ctypes.c_int32)) for name in ("bias", "multiplier", "shift")]


class F32Params(ctypes.Structure):
    _fields_ = [("bias", ctypes.POINTER(ctypes.c_float)), ("lo", ctypes.c_float), ("hi", ctypes.c_float)]


COUNTERS_KEYS = ["layers", "configure_calls", "core_calls", "zero_calls", "macs_issued", "macs_useful", "dma_in_calls",
                 "dma_out_calls", "dma_in_bytes", "dma_out_bytes", "dma_cycles", "core_cycles", "spad_peak_bytes",
                 "dma_local_calls"]


class Counters(ctypes.Structure):
    _fields_ = [(name, ctypes.c_int64) for name in COUNTERS_KEYS]


I32, F32, VOID = ctypes.c_int32, ctypes.c_float, ctypes.c_void_p
POINTERS = {"chocolate_begin": [I32] * 6, "chocolate_dma_im2col": [I32, VOID, I32, I32],
            "chocolate_dma_weights": [I32, VOID, I32, I32], "chocolate_zero": [I32], "chocolate_matmul": [I32] * 3,
            "chocolate_store": [VOID, I32, I32, I32], "chocolate_dma_patch": [I32, VOID, I32, I32],
            "chocolate_im2col_patch": [I32] * 4,
            **{f"chocolate_{name}_{t}": [I32, VOID, I32, I32]
               for name in ("dma_im2col", "dma_weights", "dma_patch") for t in ("s8", "f32")},
            **{f"chocolate_store_{t}": [VOID, I32, I32, I32] for t in ("s8", "f32")},
            "chocolate_configure_s8": [VOID] * 3, "chocolate_configure_f32": [VOID] * 2,
            "chocolate_test_configure_s8": [VOID, I32, VOID, I32, I32, I32],
            "chocolate_test_configure_f32": [VOID, VOID, F32, F32]}
ARGTYPES = {**POINTERS, "chocolate_get_counters": [VOID], "chocolate_conv_s8_ref": [VOID] * 6,
            "chocolate_conv_f32_ref": [VOID] * 5}

def build(directory: Path, flags=("-O2",)) -> ctypes.CDLL:
    """The library, the reference and the exported packing functions as one shared object built
    as C99 with ``flags`` (under ``clib.run_sanitized``, with the sanitizers; -D flags stay)."""
    packing = Path(directory) / "chocolate_packing.c"
    packing.write_text(PACKING)
    lib = clib.build([*sorted(CHOCOLATE.glob("*.c")), REFERENCE / "chocolate_conv_ref.c", packing],
                     [CHOCOLATE, KIT, REFERENCE], directory, "libchocolate", ["-pedantic", *flags], std="-std=c99")
    return load(lib._name)


def load(path) -> ctypes.CDLL:
    """The shared object ``build`` made, with its prototypes (also in a Python of its own: run_alone)."""
    lib = ctypes.CDLL(str(path))
    for name, argtypes in ARGTYPES.items():
        getattr(lib, name).argtypes = argtypes
    clib.prototypes(lib, I32, *POINTERS)
    clib.prototypes(lib, None, "chocolate_get_counters", "chocolate_report", "chocolate_shutdown",
                    "chocolate_conv_s8_ref", "chocolate_conv_f32_ref")
    clib.prototypes(lib, ctypes.c_char_p, "chocolate_last_error")
    return lib


def _host(array):
    """A host pointer: the numpy array's own memory (C-contiguous), or NULL for None."""
    if array is None:
        return None
    assert array.flags.c_contiguous
    return array.ctypes.data_as(VOID)


def _geometry(g):
    return (I32 * 13)(*g)


class Device:
    """The device model in this process: each method is one call of the C API.  Host tensors are
    numpy arrays (None: NULL); ``printed()`` is what the C has written on fd 2 since it was last
    asked (read with pytest's ``capfd``)."""

    def __init__(self, lib, capfd=None):
        self.lib, self._capfd = lib, capfd

    def begin(self, spad=4096, tile=(4, 4, 4), bpc=8, setup=32):
        return self.lib.chocolate_begin(spad, *tile, bpc, setup)

    def configure_s8(self, geometry, input_zp, table, output_zp=0, act=(-128, 127)):
        """Through the packing function compiled code calls; table [3][channels] int32 (or None)."""
        return self.lib.chocolate_test_configure_s8(_geometry(geometry), input_zp, _host(table), output_zp, *act)

    def configure_f32(self, geometry, bias=None, lo=-np.inf, hi=np.inf):
        return self.lib.chocolate_test_configure_f32(_geometry(geometry), _host(bias), lo, hi)

    def configure_s8_structs(self, geometry, quant, per_channel):
        """chocolate_configure_s8 itself: quant (zero points, clamp) and per_channel (bias,
        multiplier, shift arrays) None for a NULL struct, an array None for a NULL array."""
        arrays = [None if a is None else a.ctypes.data_as(ctypes.POINTER(I32)) for a in per_channel or ()]
        structs = [ConvParams.of(geometry), None if quant is None else QuantParams(*quant),
                   None if per_channel is None else PerChannelQuantParams(*arrays)]
        return self.lib.chocolate_configure_s8(*(None if s is None else ctypes.byref(s) for s in structs))

    def configure_f32_structs(self, geometry, stage):
        """chocolate_configure_f32 itself; geometry or stage (bias, lo, hi) None for a NULL struct."""
        conv = None if geometry is None else ConvParams.of(geometry)
        stage = None if stage is None else F32Params(None if stage[0] is None else stage[0].ctypes.data_as(
            ctypes.POINTER(F32)), *stage[1:])
        return self.lib.chocolate_configure_f32(*(None if s is None else ctypes.byref(s) for s in (conv, stage)))

    def im2col(self, a, src, m0, k0):
        return self.lib.chocolate_dma_im2col(a, _host(src), m0, k0)

    def weights(self, b, src, k0, n0):
        return self.lib.chocolate_dma_weights(b, _host(src), k0, n0)

    def patch(self, p, src, iy0, rows):
        return self.lib.chocolate_dma_patch(p, _host(src), iy0, rows)

    def im2col_patch(self, a, p, m0, k0):
        return self.lib.chocolate_im2col_patch(a, p, m0, k0)

    def zero(self, acc):
        return self.lib.chocolate_zero(acc)

    def matmul(self, a, b, acc):
        return self.lib.chocolate_matmul(a, b, acc)

    def store(self, dst, acc, m0, n0):
        return self.lib.chocolate_store(_host(dst), acc, m0, n0)

    def typed(self, entry, address, array, r0, c0):
        """One of the typed entries (chocolate_dma_im2col_s8, ...): the same arguments in the
        untyped entry's order (the store's host pointer first)."""
        function = getattr(self.lib, entry)
        if "store" in entry:
            return function(_host(array), address, r0, c0)
        return function(address, _host(array), r0, c0)

    def reference_s8(self, geometry, quant, bias, multiplier, shift, x, w2d, out):
        """The plain reference (tests/reference): the whole int8 layer into out."""
        per_channel = PerChannelQuantParams(*(a.ctypes.data_as(ctypes.POINTER(I32)) for a in (bias, multiplier, shift)))
        self.lib.chocolate_conv_s8_ref(ctypes.byref(ConvParams.of(geometry)), ctypes.byref(QuantParams(*quant)),
                                       ctypes.byref(per_channel), _host(x), _host(w2d), _host(out))

    def reference_f32(self, geometry, bias, lo, hi, x, w2d, out):
        stage = F32Params(bias.ctypes.data_as(ctypes.POINTER(F32)), lo, hi)
        self.lib.chocolate_conv_f32_ref(ctypes.byref(ConvParams.of(geometry)), ctypes.byref(stage), _host(x),
                                        _host(w2d), _host(out))

    def counters(self):
        self.lib.chocolate_get_counters(None)  # ignored
        counters = Counters()
        self.lib.chocolate_get_counters(ctypes.byref(counters))
        return {name: getattr(counters, name) for name in COUNTERS_KEYS}

    def last_error(self):
        return self.lib.chocolate_last_error().decode()

    def shutdown(self):
        self.lib.chocolate_shutdown()

    def report(self):
        self.lib.chocolate_report()

    def printed(self):
        return self._capfd.readouterr().err


def run_alone(library: ctypes.CDLL, script: str, env=None) -> subprocess.CompletedProcess:
    """``script`` in a Python of its own (for a case that needs its own process: an exit, a memory
    limit), with ``dev``, a Device on the shared object ``library`` was loaded from, and this
    module's names defined.  Under ``clib.run_sanitized`` it inherits the sanitized environment."""
    prelude = (f"import sys\nsys.path.insert(0, {str(HERE)!r})\nfrom chocolate_c import *\n"
               f"dev = Device(load({library._name!r}))\n")
    return subprocess.run([sys.executable, "-c", prelude + script], env={**os.environ, **(env or {})},
                          capture_output=True, text=True, timeout=300)
