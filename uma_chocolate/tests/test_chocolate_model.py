"""Chocolate's hardware model in C (c_runtime/chocolate): whole int8 and float layers driven tile by
tile as compiled code drives them, bit-exact with numpy; the counters; and a distinct status code
plus one stderr line for every kind of misuse.

The library (with the kit's requantization header, which its output stage calls) is linked into a small
driver three times: as shipped (-O2), with ``-fsanitize=address,undefined -fno-sanitize-recover=all``,
and sanitized with ``-DCHOCOLATE_COMPLETION_INTERRUPT`` (the core's completion by interrupt instead
of polling).  The tests run against the three builds: the driver executes one call per request it
reads on stdin and answers at once, host arrays live in the driver's own mallocs of exactly their
size (so ASan sees one element too far), and at the end a sanitized driver must have printed no
sanitizer report.
"""
import dataclasses
import os
import re
import resource
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest


from tvm_extension.kit.quantization import channel_params, requantize

from uma_chocolate.codegen import KERNEL_DIR as CHOCOLATE, KIT_DIR as KIT
SANITIZE = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer", "-g"]
SANITIZER_ENV = {"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0:halt_on_error=1",
                 "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1"}
BUILDS = {"plain": ["-O2"], "sanitized": ["-O1", *SANITIZE],
          "interrupt": ["-O2", "-DCHOCOLATE_COMPLETION_INTERRUPT", *SANITIZE]}
REFERENCE = Path(__file__).parent / "reference"  # the plain reference kernel: tests only, not in the MLF
CFLAGS = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", f"-I{CHOCOLATE}", f"-I{KIT}", f"-I{REFERENCE}"]

DRIVER = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chocolate.h"
#include "chocolate_conv_ref.h"

enum { SLOTS = 32, MAX_INTS = 24, MAX_FLOATS = 4 };
static unsigned char* slot[SLOTS];
static int32_t slot_bytes[SLOTS];

static void get(void* p, size_t n) {
  if (n != 0 && fread(p, 1, n, stdin) != n) { fprintf(stderr, "driver: short read\n"); exit(2); }
}
static void put(const void* p, size_t n) { if (n != 0) fwrite(p, 1, n, stdout); }
static int32_t get_i32(void) { int32_t v; get(&v, sizeof v); return v; }
static void* host(int32_t s) { return s >= 0 && s < SLOTS ? slot[s] : NULL; }

/* Request: op, nints, ints, nfloats, floats [, data].  Reply: status, length, data; flushed. */
int main(void) {
  int32_t op;
  while (fread(&op, sizeof op, 1, stdin) == 1) {
    int32_t n[MAX_INTS] = {0}, ni = get_i32(), nf, status = 0, length = 0;
    float f[MAX_FLOATS] = {0};
    const void* data = NULL;
    chocolate_counters counters;
    if (ni < 0 || ni > MAX_INTS) return 3;
    get(n, (size_t)ni * sizeof n[0]);
    nf = get_i32();
    if (nf < 0 || nf > MAX_FLOATS) return 3;
    get(f, (size_t)nf * sizeof f[0]);
    switch (op) {
      case 0: status = chocolate_begin(n[0], n[1], n[2], n[3], n[4], n[5]); break;
      /* configure through the packing functions compiled code calls (chocolate.h) */
      case 1: status = chocolate_configure_s8_call(n[0], n[1], n[2], n[3], n[4], n[5], n[6], n[7], n[8], n[9], n[10],
                                                   n[11], n[12], n[13], (int32_t*)host(n[14]), n[15], n[16], n[17]);
        break;
      case 2: status = chocolate_configure_f32_call(n[0], n[1], n[2], n[3], n[4], n[5], n[6], n[7], n[8], n[9],
                                                    n[10], n[11], n[12], (float*)host(n[13]), f[0], f[1]);
        break;
      case 3: /* host slot n[0] of n[1] bytes, data follows */
        if (n[0] < 0 || n[0] >= SLOTS || n[1] < 1) return 3;
        free(slot[n[0]]);
        slot[n[0]] = (unsigned char*)malloc((size_t)n[1]);
        if (slot[n[0]] == NULL) return 4;
        slot_bytes[n[0]] = n[1];
        get(slot[n[0]], (size_t)n[1]);
        break;
      case 4: status = chocolate_dma_im2col(n[0], host(n[1]), n[2], n[3]); break;
      case 5: status = chocolate_dma_weights(n[0], host(n[1]), n[2], n[3]); break;
      case 6: status = chocolate_zero(n[0]); break;
      case 7: status = chocolate_matmul(n[0], n[1], n[2]); break;
      case 8: status = chocolate_store(host(n[0]), n[1], n[2], n[3]); break;
      case 9: /* read host slot n[0] */
        if (host(n[0]) == NULL) return 3;
        data = slot[n[0]];
        length = slot_bytes[n[0]];
        break;
      case 10:
        chocolate_get_counters(NULL); /* ignored */
        chocolate_get_counters(&counters);
        data = &counters;
        length = (int32_t)sizeof counters;
        break;
      case 11: data = chocolate_last_error(); length = (int32_t)strlen((const char*)data); break;
      case 12: chocolate_shutdown(); break;
      case 13: chocolate_report(); break;
      case 14: /* the typed entries compiled code calls: n[0] picks one */
        switch (n[0]) {
          case 0: status = chocolate_dma_im2col_s8(n[1], (int8_t*)host(n[2]), n[3], n[4]); break;
          case 1: status = chocolate_dma_weights_s8(n[1], (int8_t*)host(n[2]), n[3], n[4]); break;
          case 2: status = chocolate_store_s8((int8_t*)host(n[2]), n[1], n[3], n[4]); break;
          case 3: status = chocolate_dma_im2col_f32(n[1], (float*)host(n[2]), n[3], n[4]); break;
          case 4: status = chocolate_dma_weights_f32(n[1], (float*)host(n[2]), n[3], n[4]); break;
          case 5: status = chocolate_store_f32((float*)host(n[2]), n[1], n[3], n[4]); break;
          default: return 3;
        }
        break;
      case 15: { /* the struct entries: NULL structs (n[0] picks), separate per-channel arrays (n[1..3] slots) */
        const chocolate_conv_params conv = {n[4], n[5], n[6], {n[7], n[8], n[9]}, {n[10], n[11]}, {n[12], n[13]},
                                            {n[14], n[15]}, n[16]};
        const chocolate_quant_params quant = {n[17], n[18], n[19], n[20]};
        const chocolate_per_channel_quant_params per_channel = {(const int32_t*)host(n[1]), (const int32_t*)host(n[2]),
                                                                (const int32_t*)host(n[3])};
        const chocolate_f32_params stage = {NULL, -1.0f, 1.0f};
        switch (n[0]) {
          case 0: status = chocolate_configure_s8(&conv, &quant, &per_channel); break;
          case 1: status = chocolate_configure_s8(&conv, NULL, &per_channel); break;
          case 2: status = chocolate_configure_f32(NULL, &stage); break;
          default: return 3;
        }
        break;
      }
      case 16: case 17: { /* the plain reference (tests/reference): slots, then the geometry, then int8's quant */
        const int32_t* g = n + (op == 16 ? 6 : 4);
        const chocolate_conv_params conv = {g[0], g[1], g[2], {g[3], g[4], g[5]}, {g[6], g[7]}, {g[8], g[9]},
                                            {g[10], g[11]}, g[12]};
        if (op == 16) {
          const chocolate_quant_params quant = {g[13], g[14], g[15], g[16]};
          const chocolate_per_channel_quant_params per_channel = {
              (const int32_t*)host(n[2]), (const int32_t*)host(n[3]), (const int32_t*)host(n[4])};
          chocolate_conv_s8_ref(&conv, &quant, &per_channel, (const int8_t*)host(n[0]), (const int8_t*)host(n[1]),
                                (int8_t*)host(n[5]));
        } else {
          const chocolate_f32_params stage = {(const float*)host(n[2]), f[0], f[1]};
          chocolate_conv_f32_ref(&conv, &stage, (const float*)host(n[0]), (const float*)host(n[1]),
                                 (float*)host(n[3]));
        }
        break;
      }
      default: return 3;
    }
    put(&status, 4);
    put(&length, 4);
    put(data, (size_t)length);
    fflush(stdout);
  }
  for (int i = 0; i < SLOTS; ++i) free(slot[i]);
  return 0; /* no chocolate_shutdown: a report at exit (CHOCOLATE_REPORT) still has the counters */
}
"""

BEGIN, CONFIGURE_S8, CONFIGURE_F32, HOST, IM2COL, WEIGHTS, ZERO, MATMUL, STORE, READ, COUNTERS, LAST_ERROR, \
    SHUTDOWN, REPORT, TYPED = range(15)
TYPED_ENTRIES = ["chocolate_dma_im2col_s8", "chocolate_dma_weights_s8", "chocolate_store_s8",
                 "chocolate_dma_im2col_f32", "chocolate_dma_weights_f32", "chocolate_store_f32"]


def header_codes():
    text = (CHOCOLATE / "chocolate.h").read_text()
    return {name: int(value) for name, value in re.findall(r"\bCHOCOLATE_(E\w+|OK) = (\d+)", text)}


CODES = header_codes()
CONFIG_KEYS = ["spad_bytes", "tile_m", "tile_n", "tile_k", "dma_bytes_per_cycle", "dma_setup_cycles"]
COUNTERS_KEYS = ["layers", "configure_calls", "core_calls", "zero_calls", "macs_issued", "macs_useful", "dma_in_calls",
                 "dma_out_calls", "dma_in_bytes", "dma_out_bytes", "dma_cycles", "core_cycles", "spad_peak_bytes"]


def compile_driver(work, kind):
    (work / "driver.c").write_text(DRIVER)
    exe = work / "driver"
    done = subprocess.run(["gcc", *CFLAGS, *BUILDS[kind], "-o", str(exe), str(work / "driver.c"),
                           str(CHOCOLATE / "chocolate.c"), str(REFERENCE / "chocolate_conv_ref.c")],
                          capture_output=True, text=True)
    assert done.returncode == 0 and done.stderr == "", done.stderr  # no warning either
    return exe


@pytest.fixture(scope="module", params=list(BUILDS))
def driver_build(request, tmp_path_factory):
    return request.param, compile_driver(tmp_path_factory.mktemp(f"chocolate_{request.param}"), request.param)


class Device:
    """One driver process: each method is one call of the C API, answered at once."""

    def __init__(self, exe, stderr_path, env=None, preexec_fn=None):
        self.stderr_path = stderr_path
        self._err = open(stderr_path, "wb")
        self.proc = subprocess.Popen([str(exe)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err,
                                     env={**os.environ, **SANITIZER_ENV, **(env or {})}, preexec_fn=preexec_fn)
        self._slots = 0
        self.data = b""

    @staticmethod
    def _request(op, ints=(), floats=(), data=b""):
        ints, floats = [int(i) for i in ints], [float(f) for f in floats]
        return struct.pack(f"<ii{len(ints)}ii{len(floats)}f", op, len(ints), *ints, len(floats), *floats) + data

    def _reply(self):
        head = self.proc.stdout.read(8)
        if len(head) != 8:
            raise AssertionError(f"driver died: {self.stderr()}")
        status, length = struct.unpack("<ii", head)
        self.data = self.proc.stdout.read(length)
        return status

    def _call(self, op, ints=(), floats=(), data=b""):
        self.proc.stdin.write(self._request(op, ints, floats, data))
        self.proc.stdin.flush()
        return self._reply()

    def batch(self, calls, chunk=2000):
        """Many (op, ints[, floats]) calls, pipelined (replies are 8 bytes: a chunk fits the pipe)."""
        statuses = []
        for start in range(0, len(calls), chunk):
            part = calls[start:start + chunk]
            self.proc.stdin.write(b"".join(self._request(*call) for call in part))
            self.proc.stdin.flush()
            statuses += [self._reply() for _ in part]
        return statuses

    def begin(self, spad=4096, tile=(4, 4, 4), bpc=8, setup=32):
        return self._call(BEGIN, [spad, *tile, bpc, setup])

    def configure_s8(self, geometry, input_zp, table, output_zp=0, act=(-128, 127)):
        return self._call(CONFIGURE_S8, [*geometry, input_zp, table, output_zp, *act])

    def configure_f32(self, geometry, bias=-1, lo=-np.inf, hi=np.inf):
        return self._call(CONFIGURE_F32, [*geometry, bias], [lo, hi])

    def host(self, array, slot=None):
        """A host buffer holding ``array``'s bytes (exactly); returns its slot (-1 stands for NULL)."""
        raw = np.ascontiguousarray(array).tobytes()
        if slot is None:
            slot, self._slots = self._slots, self._slots + 1
        assert self._call(HOST, [slot, len(raw)], data=raw) == 0
        return slot

    def read(self, slot, dtype):
        assert self._call(READ, [slot]) == 0
        return np.frombuffer(self.data, dtype).copy()

    def im2col(self, a, src, m0, k0):
        return self._call(IM2COL, [a, src, m0, k0])

    def weights(self, b, src, k0, n0):
        return self._call(WEIGHTS, [b, src, k0, n0])

    def zero(self, acc):
        return self._call(ZERO, [acc])

    def matmul(self, a, b, acc):
        return self._call(MATMUL, [a, b, acc])

    def store(self, dst, acc, m0, n0):
        return self._call(STORE, [dst, acc, m0, n0])

    def counters(self):
        assert self._call(COUNTERS) == 0
        return dict(zip(COUNTERS_KEYS, struct.unpack(f"<{len(COUNTERS_KEYS)}q", self.data)))

    def last_error(self):
        assert self._call(LAST_ERROR) == 0
        return self.data.decode()

    def shutdown(self):
        return self._call(SHUTDOWN)

    def report(self):
        return self._call(REPORT)

    def close(self):
        self.proc.stdin.close()
        code = self.proc.wait(timeout=60)
        self.proc.stdout.close()
        self._err.close()
        return code

    def stderr(self):
        if not self._err.closed:
            self._err.flush()
        return self.stderr_path.read_text(errors="replace")


def check_clean(dev, code):
    text = dev.stderr()
    assert "Sanitizer" not in text and "runtime error" not in text, text
    assert code == 0, text


@pytest.fixture
def device(driver_build, tmp_path):
    dev = Device(driver_build[1], tmp_path / "stderr.txt")
    yield dev
    check_clean(dev, dev.close())


def fails(dev, status, code, *fragments):
    """status is `code`, and one stderr line names the entry, the problem and the code."""
    assert status == CODES[code], (status, dev.last_error())
    message = dev.last_error()
    assert message.startswith("chocolate: ") and message.endswith(f"(CHOCOLATE_{code})"), message
    for fragment in fragments:
        assert fragment in message, message
    assert message + "\n" in dev.stderr()
    return message


# ---------------------------------------------------------------------------------------------
# Layers, tile by tile, against numpy


@dataclasses.dataclass(frozen=True)
class Layer:
    """An NHWC conv (batch 1) with HWIO weights; pads (top, left, bottom, right)."""

    ih: int
    iw: int
    ic: int
    oc: int
    kh: int
    kw: int
    stride: tuple = (1, 1)
    pads: tuple = (0, 0, 0, 0)

    @property
    def oh(self):
        return (self.ih + self.pads[0] + self.pads[2] - self.kh) // self.stride[0] + 1

    @property
    def ow(self):
        return (self.iw + self.pads[1] + self.pads[3] - self.kw) // self.stride[1] + 1

    @property
    def gemm(self):
        return self.oh * self.ow, self.oc, self.kh * self.kw * self.ic

    @property
    def geometry(self):
        """rows, channels, depth, ih, iw, ic, kh, kw, stride_h, stride_w, pad_top, pad_left, ow"""
        return [*self.gemm, self.ih, self.iw, self.ic, self.kh, self.kw, *self.stride, *self.pads[:2], self.ow]

    def im2col(self, x, pad_value):
        """numpy: the [rows][depth] im2col matrix of x [ih][iw][ic], pad_value outside the image."""
        (sh, sw), (top, left) = self.stride, self.pads[:2]
        big = np.full((top + self.ih + self.kh + self.oh * sh, left + self.iw + self.kw + self.ow * sw, self.ic),
                      pad_value, x.dtype)
        big[top:top + self.ih, left:left + self.iw] = x
        return np.stack([big[y * sh:y * sh + self.kh, c * sw:c * sw + self.kw].reshape(-1)
                         for y in range(self.oh) for c in range(self.ow)])


# 42 pixels, 7 channels, depth 45: no multiple of any tile below; stride 2, padding top and left
RAGGED = Layer(ih=13, iw=11, ic=5, oc=7, kh=3, kw=3, stride=(2, 2), pads=(1, 2, 1, 0))
# asymmetric window and strides
WIDE = Layer(ih=6, iw=9, ic=3, oc=10, kh=2, kw=3, stride=(1, 2), pads=(1, 0, 0, 2))
LAYERS = {"ragged": RAGGED, "wide": WIDE}
TILES = [(4, 4, 4), (8, 16, 8), (5, 3, 7)]


SMALL = Layer(ih=5, iw=5, ic=2, oc=3, kh=3, kw=3, pads=(1, 1, 1, 1))  # rows 25, channels 3, depth 18


def small_layer(device, dtype="int8", begin=True, tile=(4, 4, 4)):
    """(A device powered up and) configured for SMALL; returns host slots input, weights, output."""
    if begin:
        assert device.begin(spad=4096, tile=tile) == 0
    if dtype == "int8":
        table = np.array([[0] * 3, [1 << 30] * 3, [1] * 3], np.int32)
        assert device.configure_s8(SMALL.geometry, 3, device.host(table)) == 0
    else:
        assert device.configure_f32(SMALL.geometry) == 0
    return (device.host(np.ones((5, 5, 2), dtype)), device.host(np.ones((18, 3), dtype)),
            device.host(np.full((25, 3), 7, dtype)))


def addresses(tile, elem):
    """a, b and accumulator tiles back to back (operand tiles rounded up to words)."""
    tm, tn, tk = tile
    b = -(-tm * tk * elem // 4) * 4
    acc = b + -(-tk * tn * elem // 4) * 4
    return 0, b, acc


def run_layer(dev, layer, tile, x, w2d, configure, out_dtype, bpc=8, setup=32):
    """The header's loop nest, one C call per step; returns the host output [rows][channels]."""
    rows, channels, depth = layer.gemm
    tm, tn, tk = tile
    a, b, acc = addresses(tile, x.dtype.itemsize)
    src, wts = dev.host(x), dev.host(w2d)
    out = dev.host(np.full((rows, channels), 99, out_dtype))
    assert dev.begin(spad=8192, tile=tile, bpc=bpc, setup=setup) == 0
    assert configure() == 0, dev.last_error()
    calls = []
    for m0 in range(0, rows, tm):
        for n0 in range(0, channels, tn):
            calls.append((ZERO, [acc]))
            for k0 in range(0, depth, tk):
                calls += [(IM2COL, [a, src, m0, k0]), (WEIGHTS, [b, wts, k0, n0]), (MATMUL, [a, b, acc])]
            calls.append((STORE, [out, acc, m0, n0]))
    statuses = dev.batch(calls)
    assert not any(statuses), dev.last_error()
    return dev.read(out, out_dtype).reshape(rows, channels)


def expected_counters(layer, tile, elem, bpc=8, setup=32):
    """What the loop nest of run_layer costs, counted from the GEMM's shape in Python."""
    rows, channels, depth = layer.gemm
    tm, tn, tk = tile
    inside = layer.im2col(np.ones((layer.ih, layer.iw, layer.ic), np.int64), 0)  # 1 where a host byte is read
    cycles = lambda nbytes: setup + -(-nbytes // bpc)
    c = dict.fromkeys(COUNTERS_KEYS, 0)
    for m0 in range(0, rows, tm):
        for n0 in range(0, channels, tn):
            c["zero_calls"] += 1
            for k0 in range(0, depth, tk):
                c["dma_in_bytes"] += elem * (int(inside[m0:m0 + tm, k0:k0 + tk].sum())
                                             + min(tk, depth - k0) * min(tn, channels - n0))
                c["dma_cycles"] += cycles(tm * tk * elem) + cycles(tk * tn * elem)
                c["core_calls"] += 1
            c["dma_out_bytes"] += elem * min(tm, rows - m0) * min(tn, channels - n0)
            c["dma_cycles"] += cycles(4 * tm * tn)
    c.update(layers=1, configure_calls=1, dma_in_calls=2 * c["core_calls"], dma_out_calls=c["zero_calls"],
             macs_issued=c["core_calls"] * tm * tn * tk, macs_useful=rows * channels * depth,
             core_cycles=c["core_calls"] * tk, spad_peak_bytes=tm * tk * elem + tk * tn * elem + 4 * tm * tn)
    return c


def wrap32(values):
    return (np.asarray(values, np.int64) + 2**31) % 2**32 - 2**31


def quantized_case(layer, seed):
    """int8 input, HWIO weights as [depth][channels], int32 bias, per-channel weight scales."""
    rng = np.random.default_rng(seed)
    rows, channels, depth = layer.gemm
    x = rng.integers(-128, 128, (layer.ih, layer.iw, layer.ic)).astype(np.int8)
    w2d = rng.integers(-128, 128, (layer.kh, layer.kw, layer.ic, channels)).astype(np.int8).reshape(depth, channels)
    bias = rng.integers(-20000, 20000, channels).astype(np.int32)
    weight_scales = rng.uniform(0.002, 0.01, channels)
    weight_scales[0] = 40.0  # a ratio above 1: a left shift, saturating
    return x, w2d, bias, weight_scales


@pytest.mark.parametrize("layer_name", list(LAYERS))
@pytest.mark.parametrize("tile", TILES, ids=["x".join(map(str, t)) for t in TILES])
def test_int8_layer_bit_exact(device, layer_name, tile):
    """A quantized conv (input zero point -7, padding, strides) as the compiler runs it: the raw
    input times the weights, with the input zero point folded into the bias; the numpy reference
    computes the conv the other way round, (input - zp) * weights + bias."""
    layer = LAYERS[layer_name]
    x, w2d, bias, weight_scales = quantized_case(layer, TILES.index(tile))
    input_zp, output_zp, act = -7, 5, (-100, 110)
    folded = wrap32(bias.astype(np.int64) - input_zp * w2d.astype(np.int64).sum(axis=0))
    table = channel_params(folded, 0.05 * weight_scales, 0.1, layer.oc)
    geometry = layer.geometry
    got = run_layer(device, layer, tile, x, w2d,
                    lambda: device.configure_s8(geometry, input_zp, device.host(table), output_zp, act), np.int8)

    acc = wrap32(layer.im2col(x.astype(np.int64) - input_zp, 0) @ w2d.astype(np.int64) + bias)
    expected = np.array([[requantize(int(v), int(table[1, n]), int(table[2, n])) for n, v in enumerate(row)]
                         for row in acc]) + output_zp
    expected = np.clip(expected, *act).astype(np.int8)
    assert len(np.unique(expected)) > 50 and (expected == act[0]).any() and (expected == act[1]).any()
    np.testing.assert_array_equal(got, expected)
    assert device.counters() == expected_counters(layer, tile, 1)


@pytest.mark.parametrize("dtype", ["int8", "float32"])
@pytest.mark.parametrize("layer_name", list(LAYERS))
@pytest.mark.parametrize("tile", TILES, ids=["x".join(map(str, t)) for t in TILES])
def test_tiled_layer_equals_the_plain_reference(device, layer_name, tile, dtype):
    """The device driven tile by tile (begin, configure, DMA, zero, matmul, store) gives the plain
    C reference's outputs (tests/reference/chocolate_conv_ref.c: straight loops, the bias not
    folded) bit for bit."""
    layer = LAYERS[layer_name]
    rows, channels, depth = layer.gemm
    g = layer.geometry
    if dtype == "int8":
        x, w2d, bias, weight_scales = quantized_case(layer, 11 + TILES.index(tile))
        input_zp, output_zp, act = -7, 5, (-100, 110)
        table = channel_params(wrap32(bias.astype(np.int64) - input_zp * w2d.astype(np.int64).sum(axis=0)),
                               0.05 * weight_scales, 0.1, layer.oc)
        got = run_layer(device, layer, tile, x, w2d,
                        lambda: device.configure_s8(g, input_zp, device.host(table), output_zp, act), np.int8)
        slots = [device.host(x), device.host(w2d), device.host(bias.astype(np.int32)),
                 device.host(np.ascontiguousarray(table[1])), device.host(np.ascontiguousarray(table[2])),
                 device.host(np.zeros((rows, channels), np.int8))]
        assert device._call(16, [*slots, *g, input_zp, output_zp, *act]) == 0
        assert len(np.unique(got)) > 50
    else:
        rng = np.random.default_rng(21 + TILES.index(tile))
        x = rng.standard_normal((layer.ih, layer.iw, layer.ic)).astype(np.float32)
        w2d = rng.standard_normal((depth, channels)).astype(np.float32)
        bias = rng.standard_normal(channels).astype(np.float32)
        got = run_layer(device, layer, tile, x, w2d,
                        lambda: device.configure_f32(g, device.host(bias), -2.5, 3.0), np.float32)
        slots = [device.host(x), device.host(w2d), device.host(bias), device.host(np.zeros((rows, channels), np.float32))]
        assert device._call(17, [*slots, *g], [-2.5, 3.0]) == 0
    np.testing.assert_array_equal(got, device.read(slots[-1], dtype).reshape(rows, channels))


def test_struct_entry_with_separate_per_channel_arrays(device):
    """chocolate_configure_s8 itself (the API a hardware team implements): bias, multiplier and
    shift as three separate arrays (CMSIS-NN's per-channel struct) give the packing function's
    [3][channels] table's outputs bit for bit; NULL structs are EINVAL."""
    layer, tile = LAYERS[list(LAYERS)[0]], TILES[0]
    x, w2d, bias, weight_scales = quantized_case(layer, 0)
    table = channel_params(bias, 0.05 * weight_scales, 0.1, layer.oc)
    packed = run_layer(device, layer, tile, x, w2d, lambda: device.configure_s8(layer.geometry, -7, device.host(table),
                                                                               5, (-100, 110)), np.int8)
    rows = [device.host(np.ascontiguousarray(row)) for row in table]
    g = layer.geometry  # rows, channels, depth, ih, iw, ic, kh, kw, stride (h, w), pad (top, left), ow
    structs = lambda which, arrays=rows: device._call(15, [which, *arrays, *g, -7, 5, -100, 110])
    np.testing.assert_array_equal(run_layer(device, layer, tile, x, w2d, lambda: structs(0), np.int8), packed)
    fails(device, structs(0, [rows[0], -1, rows[2]]), "EINVAL", "chocolate_configure_s8: bias, multiplier or shift")
    fails(device, structs(1), "EINVAL", "chocolate_configure_s8: conv, quant or per_channel is NULL")
    fails(device, structs(2), "EINVAL", "chocolate_configure_f32: conv or stage is NULL")


@pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("layer_name", list(LAYERS))
@pytest.mark.parametrize("tile", TILES, ids=["x".join(map(str, t)) for t in TILES])
def test_float_layer(device, layer_name, tile, with_bias):
    """Float operands: the float sum in k order, then bias and clamp; bit-exact with numpy doing
    the same float32 operations, and within 1e-5 of the float64 result."""
    layer = LAYERS[layer_name]
    rows, channels, depth = layer.gemm
    rng = np.random.default_rng(7 + TILES.index(tile))
    x = rng.standard_normal((layer.ih, layer.iw, layer.ic)).astype(np.float32)
    w2d = rng.standard_normal((depth, channels)).astype(np.float32)
    bias = rng.standard_normal(channels).astype(np.float32) if with_bias else None
    lo, hi = (-2.5, 3.0) if with_bias else (-np.inf, np.inf)

    def configure():
        return device.configure_f32(layer.geometry, device.host(bias) if with_bias else -1, lo, hi)

    got = run_layer(device, layer, tile, x, w2d, configure, np.float32)
    cols = layer.im2col(x, np.float32(0))
    acc = np.zeros((rows, channels), np.float32)
    for k in range(depth):
        acc = acc + cols[:, k:k + 1] * w2d[k:k + 1, :]
    if with_bias:
        acc = acc + bias
    np.testing.assert_array_equal(got, np.clip(acc, np.float32(lo), np.float32(hi)))
    exact = cols.astype(np.float64) @ w2d.astype(np.float64) + (bias if with_bias else 0)
    np.testing.assert_allclose(got, np.clip(exact, lo, hi), rtol=1e-5, atol=1e-5)
    assert device.counters() == expected_counters(layer, tile, 4)


# ---------------------------------------------------------------------------------------------
# Counters


ONE_BY_ONE = Layer(ih=1, iw=3, ic=3, oc=3, kh=1, kw=1)  # rows 3, channels 3, depth 3


@pytest.mark.parametrize("dtype", ["int8", "float32"])
def test_typed_entries_check_the_layer_type(device, dtype):
    """The entries compiled code calls take typed pointers (as TVM declares them) and refuse a
    layer of the other type; those of the layer's type do the untyped entries' work."""
    data, weights, out = small_layer(device, dtype)
    mine = [0, 1, 2] if dtype == "int8" else [3, 4, 5]
    theirs = [3, 4, 5] if dtype == "int8" else [0, 1, 2]
    a, b, acc = addresses((4, 4, 4), 1 if dtype == "int8" else 4)
    for which in theirs:
        slot = {0: data, 1: weights, 2: out}[which % 3]
        other = "int8" if dtype == "float32" else "float32"
        fails(device, device._call(TYPED, [which, [a, b, acc][which % 3], slot, 0, 0]), "EINVAL",
              TYPED_ENTRIES[which], f"the layer is configured for {dtype}")
        assert other not in device.last_error()
    assert device._call(TYPED, [mine[0], a, data, 0, 0]) == 0
    assert device._call(TYPED, [mine[1], b, weights, 0, 0]) == 0
    assert device.zero(acc) == 0 and device.matmul(a, b, acc) == 0
    assert device._call(TYPED, [mine[2], acc, out, 0, 0]) == 0
    assert device.counters()["core_calls"] == 1


@pytest.mark.parametrize("dtype", ["int8", "float32"])
def test_counters_of_a_small_layer(device, dtype):
    """2x2x2 tiles over a 3x3x3 GEMM (a 1x1 conv), 4 bytes per DMA cycle, 3 setup cycles, counted
    by hand.  4 output tiles, each: a zero, 2 depth tiles of (im2col, weights, matmul), a store.
    Host elements read: im2col 2 * (2*2 + 2*1 + 1*2 + 1*1) = 18, weights the same by symmetry:
    36; written: 9.  DMA cycles: 16 operand tiles of 2*2 elements, 4 accumulator tiles of 16 bytes."""
    elem = np.dtype(dtype).itemsize
    x = np.arange(9, dtype=dtype).reshape(1, 3, 3) - 4
    w2d = (np.arange(9, dtype=dtype).reshape(3, 3) % 4) - 1
    if dtype == "int8":
        table = np.array([[1, 2, 3], [1 << 30] * 3, [1] * 3], np.int32)  # requant(v) = v

        def configure():
            return device.configure_s8(ONE_BY_ONE.geometry, 0, device.host(table))
    else:
        def configure():
            return device.configure_f32(ONE_BY_ONE.geometry, device.host(np.float32([1, 2, 3])))
    tile = (2, 2, 2)
    got = run_layer(device, ONE_BY_ONE, tile, x, w2d, configure, dtype, bpc=4, setup=3)
    expected = x.reshape(3, 3).astype(np.int64) @ w2d.astype(np.int64) + [1, 2, 3]
    np.testing.assert_array_equal(got, expected.astype(dtype))
    by_hand = {"layers": 1, "configure_calls": 1, "core_calls": 8, "zero_calls": 4, "macs_issued": 64,
               "macs_useful": 27, "dma_in_calls": 16, "dma_out_calls": 4, "dma_in_bytes": 36 * elem,
               "dma_out_bytes": 9 * elem, "dma_cycles": 16 * (3 + -(-4 * elem // 4)) + 4 * (3 + 4),
               "core_cycles": 16, "spad_peak_bytes": 4 * elem + 4 * elem + 16}
    assert device.counters() == by_hand
    assert expected_counters(ONE_BY_ONE, tile, elem, bpc=4, setup=3) == by_hand


def test_peak_occupancy_counts_distinct_bytes_per_layer(device):
    """Occupancy: bytes written since the layer began, each once however often rewritten (a
    matmul rewrites its accumulators); the peak is the largest over layers."""
    x, w = np.zeros((5, 5, 2), np.int8), np.zeros((18, 3), np.int8)
    table = np.zeros((3, 3), np.int32)
    table_slot = device.host(table)
    assert device.begin(spad=4096) == 0
    assert device.configure_s8(SMALL.geometry, 0, table_slot) == 0
    src, wts = device.host(x), device.host(w)
    assert device.im2col(0, src, 0, 0) == 0 and device.im2col(0, src, 4, 0) == 0       # [0, 16) twice
    assert device.weights(8, wts, 0, 0) == 0                                            # [8, 24): 8 new
    assert device.zero(100) == 0 and device.zero(100) == 0                              # [100, 164)
    assert device.matmul(0, 8, 100) == 0
    assert device.counters()["spad_peak_bytes"] == 24 + 64
    assert device.begin(spad=4096) == 0  # a smaller layer
    assert device.configure_s8(SMALL.geometry, 0, table_slot) == 0
    assert device.zero(2000) == 0
    assert device.counters()["spad_peak_bytes"] == 88
    assert device.begin(spad=4096) == 0  # a larger one
    assert device.configure_s8(SMALL.geometry, 0, table_slot) == 0
    for addr in (0, 16, 32, 3000):
        assert device.im2col(addr, src, 0, 0) == 0
    assert device.zero(4032) == 0
    assert device.counters()["spad_peak_bytes"] == 4 * 16 + 64


def test_int32_accumulators_wrap(device):
    """The running sum over many core calls wraps around as a 32-bit adder does, and so does the
    bias: 1x1x256 tiles of -128 * -128 add 2^22 per call; requant(v) = round(v / 2^24)."""
    depth = 256
    layer = Layer(ih=1, iw=1, ic=depth, oc=1, kh=1, kw=1)
    assert device.begin(spad=1024, tile=(1, 1, depth)) == 0
    src = device.host(np.full((1, 1, depth), -128, np.int8))
    wts = device.host(np.full((depth, 1), -128, np.int8))
    out = device.host(np.zeros(1, np.int8))
    for bias, calls, expected in [(0, 511, 127), (0, 512, -128), (0, 516, -127), (2**31 - 1, 1, -128)]:
        table = np.array([[bias], [1 << 30], [-23]], np.int32)
        assert device.configure_s8(layer.geometry, 0, device.host(table, slot=3)) == 0
        steps = [(ZERO, [512]), (IM2COL, [0, src, 0, 0]), (WEIGHTS, [256, wts, 0, 0])]
        steps += [(MATMUL, [0, 256, 512])] * calls + [(STORE, [out, 512, 0, 0])]
        assert not any(device.batch(steps)), device.last_error()
        value = int(wrap32(calls * 2**22 + bias))
        assert expected == max(-128, min(127, requantize(value, 1 << 30, -23)))
        assert device.read(out, np.int8)[0] == expected, (bias, calls)


def test_configuration_registers_are_a_copy(device):
    """configure copies the table: the host's may change or go away (ASan would see a late read)."""
    layer = ONE_BY_ONE
    x = np.arange(9, dtype=np.int8).reshape(1, 3, 3)
    w2d = np.eye(3, dtype=np.int8)
    assert device.begin(spad=1024, tile=(4, 4, 4)) == 0
    table = device.host(np.array([[10, 20, 30], [1 << 30] * 3, [1] * 3], np.int32))
    assert device.configure_s8(layer.geometry, 0, table) == 0
    device.host(np.zeros(1, np.int8), slot=table)  # the table freed, a byte in its place
    src, wts, out = device.host(x), device.host(w2d), device.host(np.zeros((3, 3), np.int8))
    assert not any(device.batch([(ZERO, [64]), (IM2COL, [0, src, 0, 0]), (WEIGHTS, [16, wts, 0, 0]),
                                 (MATMUL, [0, 16, 64]), (STORE, [out, 64, 0, 0])]))
    np.testing.assert_array_equal(device.read(out, np.int8).reshape(3, 3), x.reshape(3, 3) + [10, 20, 30])
    bias = device.host(np.float32([0.5, 1.5, 2.5]))
    assert device.configure_f32(layer.geometry, bias) == 0
    device.host(np.zeros(1, np.int8), slot=bias)
    src, wts = device.host(x.astype(np.float32)), device.host(w2d.astype(np.float32))
    out = device.host(np.zeros((3, 3), np.float32))
    assert not any(device.batch([(ZERO, [128]), (IM2COL, [0, src, 0, 0]), (WEIGHTS, [64, wts, 0, 0]),
                                 (MATMUL, [0, 64, 128]), (STORE, [out, 128, 0, 0])]))
    np.testing.assert_array_equal(device.read(out, np.float32).reshape(3, 3), x.reshape(3, 3) + [0.5, 1.5, 2.5])


def report_lines(text):
    return [line for line in text.splitlines() if line.startswith("chocolate.")]


def test_report(device):
    assert device.begin(spad=2048, tile=(4, 8, 2), bpc=16, setup=5) == 0
    small_layer(device, begin=False)
    assert device.zero(512) == 0
    assert report_lines(device.stderr()) == []  # nothing printed unasked
    assert device.report() == 0
    lines = report_lines(device.stderr())
    assert [line.split(": ")[0] for line in lines] == [f"chocolate.{key}" for key in CONFIG_KEYS + COUNTERS_KEYS]
    values = {line.split(": ")[0][len("chocolate."):]: int(line.split(": ")[1]) for line in lines}
    assert values == {"spad_bytes": 2048, "tile_m": 4, "tile_n": 8, "tile_k": 2, "dma_bytes_per_cycle": 16,
                      "dma_setup_cycles": 5, **device.counters()}
    assert values["zero_calls"] == 1 and values["configure_calls"] == 1


@pytest.mark.parametrize("where", ["file", "stderr"])
def test_report_at_exit(driver_build, tmp_path, where):
    """CHOCOLATE_REPORT=path: the counters are appended to that file when the program exits;
    CHOCOLATE_REPORT=1: printed on stderr."""
    _, exe = driver_build
    report = tmp_path / "report.txt"
    report.write_text("an earlier run\n")
    dev = Device(exe, tmp_path / "stderr.txt", env={"CHOCOLATE_REPORT": str(report) if where == "file" else "1"})
    assert dev.begin(spad=4096, tile=(4, 4, 4)) == 0
    small_layer(dev, begin=False)
    assert dev.zero(0) == 0 and dev.zero(64) == 0
    assert report_lines(dev.stderr()) == []
    check_clean(dev, dev.close())
    text = report.read_text() if where == "file" else dev.stderr()
    if where == "file":
        assert text.startswith("an earlier run\n")
    values = dict(line.split(": ") for line in report_lines(text))
    assert len(values) == len(CONFIG_KEYS + COUNTERS_KEYS)
    assert values["chocolate.spad_bytes"] == "4096" and values["chocolate.tile_k"] == "4"
    assert values["chocolate.zero_calls"] == "2" and values["chocolate.layers"] == "1"


def test_shutdown_and_power_up_again(device):
    assert device.begin(spad=1024) == 0
    small_layer(device, begin=False)
    assert device.zero(0) == 0
    assert device.shutdown() == 0
    assert set(device.counters().values()) == {0}
    fails(device, device.zero(0), "ENOTREADY", "chocolate_zero")
    assert device.begin(spad=8192, tile=(8, 8, 8)) == 0  # another configuration: a new power-up
    assert device.counters()["layers"] == 1
    small_layer(device, begin=False)
    fails(device, device.store(device.host(np.zeros((25, 3), np.int8)), 0, 0, 0), "EUNWRITTEN")
    assert device.shutdown() == 0 and device.shutdown() == 0  # twice is harmless


def test_both_completion_paths_are_built(tmp_path):
    """Polling and interrupt completion are different code (and both build as C99 and C11: the MLF
    compiles the library with -std=c11)."""
    objects = []
    for std in ("-std=c99", "-std=c11"):
        for define in ([], ["-DCHOCOLATE_COMPLETION_INTERRUPT"]):
            obj = tmp_path / f"chocolate{std}{len(define)}.o"
            done = subprocess.run(["gcc", std, *CFLAGS[1:], "-O2", *define, "-c", "-o", str(obj),
                                   str(CHOCOLATE / "chocolate.c")], capture_output=True, text=True)
            assert done.returncode == 0 and done.stderr == "", done.stderr
            objects.append(obj.read_bytes())
    assert objects[0] != objects[1] and objects[2] != objects[3]


# ---------------------------------------------------------------------------------------------
# Misuse: one code per kind, a message, nothing changed


ENTRIES = {
    "chocolate_configure_s8": lambda d, s: d.configure_s8(SMALL.geometry, 0, s),
    "chocolate_configure_f32": lambda d, s: d.configure_f32(SMALL.geometry, s),
    "chocolate_dma_im2col": lambda d, s: d.im2col(0, s, 0, 0),
    "chocolate_dma_weights": lambda d, s: d.weights(0, s, 0, 0),
    "chocolate_zero": lambda d, s: d.zero(0),
    "chocolate_matmul": lambda d, s: d.matmul(0, 16, 64),
    "chocolate_store": lambda d, s: d.store(s, 0, 0, 0),
}


@pytest.mark.parametrize("entry", list(ENTRIES))
def test_not_ready_before_begin(device, entry):
    slot = device.host(np.zeros(1024, np.int8))
    fails(device, ENTRIES[entry](device, slot), "ENOTREADY", f"{entry}: the device is not powered up")
    assert set(device.counters().values()) == {0}
    np.testing.assert_array_equal(device.read(slot, np.int8), 0)


@pytest.mark.parametrize("entry", [e for e in ENTRIES if "configure" not in e])
def test_not_configured(device, entry):
    """Transfers and core calls need this layer's configure: not yet, and not since a new begin."""
    slot = device.host(np.zeros(1024, np.int8))
    assert device.begin() == 0
    fails(device, ENTRIES[entry](device, slot), "ENOTCONFIGURED", f"{entry}: no chocolate_configure_s8/_f32 since "
          "this layer began")
    small_layer(device, begin=False)
    assert device.zero(0) == 0
    assert device.begin() == 0
    before = device.counters()
    fails(device, ENTRIES[entry](device, slot), "ENOTCONFIGURED")
    assert device.counters() == before
    np.testing.assert_array_equal(device.read(slot, np.int8), 0)


@pytest.mark.parametrize("config,fragment", [
    ((6, (4, 4, 4), 8, 32), "scratchpad size 6 is not a multiple of 4 in [4, 1073741824]"),
    ((0, (4, 4, 4), 8, 32), "scratchpad size 0"),
    ((-4, (4, 4, 4), 8, 32), "scratchpad size -4"),
    (((1 << 30) + 4, (4, 4, 4), 8, 32), "scratchpad size 1073741828"),
    ((4096, (0, 4, 4), 8, 32), "tile sizes 0x4x4 are not in [1, 256]"),
    ((4096, (4, 257, 4), 8, 32), "tile sizes 4x257x4"),
    ((4096, (4, 4, -1), 8, 32), "tile sizes 4x4x-1"),
    ((4096, (4, 4, 4), 0, 32), "DMA bytes per cycle 0"),
    ((4096, (4, 4, 4), 8, -1), "DMA setup cycles -1"),
])
def test_bad_begin_values(device, config, fragment):
    spad, tile, bpc, setup = config
    fails(device, device.begin(spad, tile, bpc, setup), "ECONFIG", "chocolate_begin", fragment)
    assert set(device.counters().values()) == {0}
    fails(device, device.zero(0), "ENOTREADY")  # still off
    assert device.begin(4096, (256, 256, 256), 1, 0) == 0  # the extremes are fine


def test_begin_checks_the_configuration_and_starts_a_layer(device):
    assert device.begin(spad=4096, tile=(4, 4, 4), bpc=8, setup=32) == 0  # power-up with this configuration
    src, wts, _ = small_layer(device, begin=False)
    assert device.im2col(0, src, 0, 0) == 0 and device.weights(16, wts, 0, 0) == 0 and device.zero(64) == 0
    for kwargs, fragment in [(dict(spad=8192), "compiled for a 8192-byte scratchpad, 4x4x4 tiles"),
                             (dict(tile=(8, 4, 4)), "8x4x4 tiles"), (dict(bpc=16), "16 B/cycle DMA"),
                             (dict(setup=1), "1 setup cycles; the device has 4096, 4x4x4, 8, 32")]:
        fails(device, device.begin(**kwargs), "ECONFIG", "chocolate_begin", fragment)
    assert device.matmul(0, 16, 64) == 0  # a refused begin started no layer
    assert device.counters()["layers"] == 1
    assert device.begin() == 0  # a new layer: not configured, nothing written
    fails(device, device.matmul(0, 16, 64), "ENOTCONFIGURED")
    small_layer(device, begin=False)
    fails(device, device.matmul(0, 16, 64), "EUNWRITTEN", "reads a bytes [0, 16)")
    assert device.counters()["layers"] == 2


G = {name: i for i, name in enumerate(
    ["rows", "channels", "depth", "ih", "iw", "ic", "kh", "kw", "stride_h", "stride_w", "pad_top", "pad_left", "ow"])}
HUGE_INPUT = dict(rows=1, channels=1, depth=1 << 20, ih=1 << 21, iw=1 << 21, ic=1 << 20, kh=1, kw=1, pad_top=0,
                  pad_left=0, ow=1)
HUGE_WEIGHTS = dict(rows=1, channels=(1 << 31) - 1, depth=(1 << 31) - 1, ih=1, iw=1, ic=(1 << 31) - 1, kh=1, kw=1,
                    pad_top=0, pad_left=0, ow=1)


@pytest.mark.parametrize("dtype,changes,fragment", [
    ("int8", dict(rows=0), "rows is 0 (needs >= 1)"),
    ("int8", dict(channels=-1), "channels is -1"),
    ("int8", dict(ic=0, depth=0), "depth is 0"),
    ("float32", dict(ih=0), "ih is 0"),
    ("int8", dict(kw=0), "kw is 0"),
    ("int8", dict(ow=0), "ow is 0"),
    ("int8", dict(stride_w=0), "strides 1x0"),
    ("float32", dict(stride_h=-2), "strides -2x1"),
    ("int8", dict(pad_top=3), "padding top 3, left 1 (need strides >= 1, 0 <= pad < the 3x3 window)"),
    ("int8", dict(pad_left=-1), "left -1"),
    ("int8", dict(depth=17), "depth 17 is not kh*kw*ic = 18"),
    ("int8", dict(rows=24), "rows 24 are not whole output rows of ow 5"),
    ("int8", HUGE_INPUT, "a host tensor (input, weights or output) is too large to index"),
    ("float32", HUGE_WEIGHTS, "too large to index"),
    ("int8", dict(input_zp=128), "zero points 128 (input), 0 (output)"),
    ("int8", dict(output_zp=-129), "-129 (output)"),
    ("int8", dict(act=(10, 5)), "clamp [10, 5] (need zero points in [-128, 127], -128 <= act_min <= act_max <= 127)"),
    ("int8", dict(act=(-129, 0)), "clamp [-129, 0]"),
    ("int8", dict(act=(0, 128)), "clamp [0, 128]"),
    ("float32", dict(bounds=(1.0, -1.0)), "clamp bounds [1, -1] (need lo <= hi, neither NaN)"),
    ("float32", dict(bounds=(float("nan"), 1.0)), "clamp bounds [nan, 1]"),
    ("float32", dict(bounds=(0.0, float("nan"))), "clamp bounds [0, nan]"),
])
def test_bad_layer(device, dtype, changes, fragment):
    geometry = list(SMALL.geometry)
    for name, value in changes.items():
        if name in G:
            geometry[G[name]] = value
    assert device.begin() == 0
    before = device.counters()
    table = device.host(np.zeros((3, 3), np.int32))
    if dtype == "int8":
        status = device.configure_s8(geometry, changes.get("input_zp", 0), table, changes.get("output_zp", 0),
                                     changes.get("act", (-128, 127)))
        entry = "chocolate_configure_s8"
    else:
        status = device.configure_f32(geometry, table, *changes.get("bounds", (-1.0, 1.0)))
        entry = "chocolate_configure_f32"
    fails(device, status, "ELAYER", entry, fragment)
    assert device.counters() == before
    fails(device, device.zero(0), "ENOTCONFIGURED")


def test_a_refused_configure_keeps_the_layer(device):
    small_layer(device)
    fails(device, device.configure_s8(SMALL.geometry, 0, -1), "EINVAL", "chocolate_configure_s8: bias, multiplier "
          "or shift is NULL")
    fails(device, device.configure_f32([0] * 13), "ELAYER")
    assert device.counters()["configure_calls"] == 1
    assert device.configure_f32(SMALL.geometry, -1) == 0  # no bias is fine
    assert device.counters()["configure_calls"] == 2 and device.counters()["macs_useful"] == 2 * 25 * 3 * 18


def test_null_host_pointers(device):
    small_layer(device)
    fails(device, device.im2col(0, -1, 0, 0), "EINVAL", "chocolate_dma_im2col: input pointer is NULL")
    fails(device, device.weights(16, -1, 0, 0), "EINVAL", "chocolate_dma_weights: weights pointer is NULL")
    assert device.zero(64) == 0
    fails(device, device.store(-1, 64, 0, 0), "EINVAL", "chocolate_store: output pointer is NULL")
    assert device.counters()["dma_in_calls"] == device.counters()["dma_out_calls"] == 0


@pytest.mark.parametrize("call,origin,fragment", [
    ("im2col", (-1, 0), "tile origin (-1, 0) is outside the 25x18 im2col matrix"),
    ("im2col", (25, 0), "(25, 0)"),
    ("im2col", (0, 18), "(0, 18)"),
    ("im2col", (3, -4), "(3, -4)"),
    ("im2col", (24, 17), None),
    ("weights", (18, 0), "tile origin (18, 0) is outside the 18x3 weights matrix"),
    ("weights", (0, 3), "(0, 3)"),
    ("weights", (0, -1), "(0, -1)"),
    ("weights", (17, 2), None),
    ("store", (25, 0), "tile origin (25, 0) is outside the 25x3 output matrix"),
    ("store", (0, 3), "(0, 3)"),
    ("store", (-2, 0), "(-2, 0)"),
    ("store", (24, 2), None),
])
def test_tile_origins(device, call, origin, fragment):
    src, wts, out = small_layer(device)
    assert device.zero(64) == 0
    before = device.counters()
    status = {"im2col": lambda: device.im2col(0, src, *origin), "weights": lambda: device.weights(16, wts, *origin),
              "store": lambda: device.store(out, 64, *origin)}[call]()
    if fragment is None:
        assert status == 0
        return
    fails(device, status, "EBOUNDS", fragment)
    assert device.counters() == before
    np.testing.assert_array_equal(device.read(out, np.int8), 7)


@pytest.mark.parametrize("dtype,call,args,fragment", [
    ("int8", "im2col", (-1,), "chocolate_dma_im2col: a tile [-1, 15) is not in the 4096-byte scratchpad"),
    ("int8", "im2col", (4081,), "a tile [4081, 4097)"),
    ("int8", "im2col", (4080,), None),
    ("int8", "im2col", (3,), None),  # int8 operands need no alignment
    ("float32", "im2col", (2,), "chocolate_dma_im2col: a tile at 2 is not 4-byte aligned"),
    ("float32", "im2col", (4036,), "a tile [4036, 4100)"),
    ("float32", "weights", (6,), "chocolate_dma_weights: b tile at 6 is not 4-byte aligned"),
    ("int8", "weights", (4090,), "b tile [4090, 4106)"),
    ("int8", "zero", (6,), "chocolate_zero: accumulator tile at 6 is not 4-byte aligned"),
    ("float32", "zero", (4036,), "accumulator tile [4036, 4100)"),
    ("int8", "matmul", (-16, 16, 64), "chocolate_matmul: a tile [-16, 0)"),
    ("int8", "matmul", (0, 4090, 64), "b tile [4090, 4106)"),
    ("float32", "matmul", (0, 66, 128), "b tile at 66 is not 4-byte aligned"),
    ("int8", "matmul", (0, 16, 4034), "accumulator tile [4034, 4098)"),
    ("int8", "matmul", (0, 16, 65), "accumulator tile at 65 is not 4-byte aligned"),
    ("int8", "store", (-4,), "chocolate_store: accumulator tile [-4, 60)"),
    ("float32", "store", (66,), "accumulator tile at 66 is not 4-byte aligned"),
])
def test_scratchpad_addresses(device, dtype, call, args, fragment):
    src, wts, out = small_layer(device, dtype)
    before = device.counters()
    status = {"im2col": lambda: device.im2col(args[0], src, 0, 0),
              "weights": lambda: device.weights(args[0], wts, 0, 0), "zero": lambda: device.zero(args[0]), "matmul": lambda: device.matmul(*args),
              "store": lambda: device.store(out, args[0], 0, 0)}[call]()
    if fragment is None:
        assert status == 0
        assert device.counters()["spad_peak_bytes"] == 16
        return
    fails(device, status, "EADDR", fragment)
    assert device.counters() == before
    np.testing.assert_array_equal(device.read(out, dtype), 7)


def test_overlap(device):
    src, wts, _ = small_layer(device)
    assert device.im2col(0, src, 0, 0) == 0 and device.weights(16, wts, 0, 0) == 0  # a [0, 16), b [16, 32)
    assert device.zero(0) == 0 and device.zero(64) == 0  # written: only the overlap is wrong
    fails(device, device.matmul(0, 16, 8), "EOVERLAP", "chocolate_matmul: accumulator tile [8, 72) overlaps a tile "
          "[0, 16)")
    fails(device, device.matmul(100, 16, 0), "EOVERLAP", "accumulator tile [0, 64) overlaps b tile [16, 32)")
    assert device.counters()["core_calls"] == 0
    assert device.zero(32) == 0 and device.matmul(0, 16, 32) == 0  # adjacent is fine
    assert device.matmul(0, 0, 64) == 0  # operands may overlap each other


@pytest.mark.parametrize("missing,span", [("a", (0, 16)), ("b", (16, 32)), ("accumulator", (64, 128))])
def test_a_missing_transfer_is_caught(device, missing, span):
    src, wts, out = small_layer(device)
    if missing != "a":
        assert device.im2col(0, src, 0, 0) == 0
    if missing != "b":
        assert device.weights(16, wts, 0, 0) == 0
    if missing != "accumulator":
        assert device.zero(64) == 0
    before = device.counters()
    message = fails(device, device.matmul(0, 16, 64), "EUNWRITTEN")
    assert message == (f"chocolate: chocolate_matmul: reads {missing} bytes [{span[0]}, {span[1]}) of the scratchpad "
                       "that nothing has written since the layer began (a missing transfer?) (CHOCOLATE_EUNWRITTEN)")
    assert device.counters() == before


def test_unwritten_bytes_are_named_exactly(device):
    src, wts, out = small_layer(device)
    assert device.im2col(0, src, 0, 0) == 0 and device.weights(40, wts, 0, 0) == 0 and device.zero(64) == 0
    fails(device, device.matmul(4, 40, 64), "EUNWRITTEN", "reads a bytes [16, 20)")
    fails(device, device.matmul(0, 34, 64), "EUNWRITTEN", "reads b bytes [34, 40)")
    fails(device, device.store(out, 60, 0, 0), "EUNWRITTEN", "chocolate_store: reads accumulator bytes [60, 64)")
    fails(device, device.store(out, 512, 0, 0), "EUNWRITTEN", "reads accumulator bytes [512, 576)")
    np.testing.assert_array_equal(device.read(out, np.int8), 7)
    assert device.counters()["core_calls"] == device.counters()["dma_out_calls"] == 0
    fails(device, device.im2col(-1, src, 0, 0), "EADDR")  # a refused transfer writes nothing
    fails(device, device.matmul(0, 40, 128), "EUNWRITTEN", "accumulator bytes [128, 192)")


def test_first_listed_code_wins(device):
    """Several problems at once: the code listed first in the header comes back."""
    fails(device, device.im2col(-1, -1, -1, -1), "ENOTREADY")
    fails(device, device.configure_s8([0] * 13, 500, -1), "ENOTREADY")
    fails(device, device.begin(6, (0, 0, 0), 0, -1), "ECONFIG", "scratchpad size 6")
    assert device.begin() == 0
    fails(device, device.im2col(-1, -1, -1, -1), "EINVAL")
    fails(device, device.configure_s8([0] * 13, 500, -1), "EINVAL")
    fails(device, device.store(-1, -1, -1, -1), "EINVAL")
    fails(device, device.matmul(-1, -1, -1), "ENOTCONFIGURED")
    src, wts, out = small_layer(device, begin=False)
    fails(device, device.im2col(-1, src, -1, 0), "EBOUNDS")
    fails(device, device.store(out, -1, 0, 99), "EBOUNDS")
    fails(device, device.matmul(0, 4094, 1), "EADDR", "b tile")
    fails(device, device.matmul(8, 0, 1), "EADDR", "accumulator tile at 1")
    fails(device, device.matmul(0, 16, 8), "EOVERLAP")  # and nothing written
    fails(device, device.matmul(0, 16, 64), "EUNWRITTEN", "reads a bytes")


def test_out_of_memory(driver_build, tmp_path):
    """The scratchpad model or the configuration registers cannot be allocated (the address space
    limited, or ASan's largest allocation): ENOMEM, nothing changed, and the device still works."""
    kind, exe = driver_build
    if kind == "plain":
        env, limit = {}, lambda: resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
    else:
        env = {"ASAN_OPTIONS": SANITIZER_ENV["ASAN_OPTIONS"] + ":allocator_may_return_null=1:max_allocation_size_mb=512"}
        limit = None
    dev = Device(exe, tmp_path / "stderr.txt", env=env, preexec_fn=limit)
    fails(dev, dev.begin(spad=1 << 30), "ENOMEM",
          "chocolate_begin: cannot allocate a 1073741824-byte scratchpad model")
    assert set(dev.counters().values()) == {0}
    assert dev.begin(spad=4096) == 0
    table = dev.host(np.zeros((3, 3), np.int32))
    fails(dev, dev.configure_s8([1, 1 << 27, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1], 0, table), "ENOMEM",
          "cannot allocate 134217728 channels' configuration registers")
    fails(dev, dev.zero(0), "ENOTCONFIGURED")
    small_layer(dev, begin=False)
    assert dev.zero(0) == 0
    code = dev.close()
    text = "\n".join(line for line in dev.stderr().splitlines() if "AddressSanitizer failed to allocate" not in line)
    assert "Sanitizer" not in text and "runtime error" not in text and code == 0, text
