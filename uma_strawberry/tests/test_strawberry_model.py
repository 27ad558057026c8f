"""Strawberry's hardware model in C (c_runtime/strawberry): DMA tiles with padding, the conv engine
on scratchpad addresses, counters, and a distinct status code plus one stderr line for every
kind of misuse.

The library (with the kit's conv engine, which it calls) is linked into a small driver twice: as
shipped (-O2) and with ``-fsanitize=address,undefined -fno-sanitize-recover=all``.  Every test
runs against both builds: the driver executes one call per request it reads on stdin and
answers at once, host arrays live in the driver's own mallocs of exactly their size (so ASan
sees one element too far), and at the end the sanitized driver must have printed no sanitizer
report.  Results are compared with numpy.
"""
import os
import re
import struct
import subprocess

import numpy as np
import pytest



from tvm_extension.kit.limits import c_limits
from uma_strawberry.codegen import KERNEL_DIR as STRAWBERRY, KIT_DIR as KIT
SANITIZE = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer", "-g"]
SANITIZER_ENV = {"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0:halt_on_error=1",
                 "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1"}

DRIVER = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strawberry.h"

enum { SLOTS = 16, MAX_INTS = 24, MAX_FLOATS = 4 };
static float* slot[SLOTS];
static int64_t slot_count[SLOTS];

static void get(void* p, size_t n) {
  if (n != 0 && fread(p, 1, n, stdin) != n) { fprintf(stderr, "driver: short read\n"); exit(2); }
}
static void put(const void* p, size_t n) { if (n != 0) fwrite(p, 1, n, stdout); }
static int32_t get_i32(void) { int32_t v; get(&v, sizeof v); return v; }
static float* host(int32_t s) { return s >= 0 && s < SLOTS ? slot[s] : NULL; }
static strawberry_tile tile_of(const int32_t* n) { /* extents, strides, starts, sizes */
  const strawberry_tile t = {{n[0], n[1], n[2]}, {n[3], n[4], n[5]}, {n[6], n[7], n[8]}, {n[9], n[10], n[11]}};
  return t;
}
/* n: addresses (ifmap, weights, bias, residual, slope, ofmap), then oc, iw, ih, ic, kh, kw, ow, oh,
 * stride w, h (depthwise: channels, iw, ih, kh, ...: ic = oc). */
static strawberry_status conv(strawberry_status (*entry)(const strawberry_conv_addrs*, const strawberry_conv_params*),
                              const int32_t* n, int depthwise, const float* f) {
  const int32_t* s = n + 6;
  const int32_t ic = depthwise ? s[0] : s[3], *w = depthwise ? s + 3 : s + 4; /* w: kh, kw, ow, oh, sw, sh */
  const strawberry_conv_addrs addrs = {n[0], n[1], n[2], n[3], n[4], n[5]};
  const strawberry_conv_params params = {{s[2], s[1], ic}, {w[3], w[2], s[0]}, {w[0], w[1]}, {w[5], w[4]}, f[0], f[1]};
  return entry(&addrs, &params);
}

/* Request: op, nints, ints, nfloats, floats [, data].  Reply: status [, data], flushed. */
int main(void) {
  int32_t op;
  while (fread(&op, sizeof op, 1, stdin) == 1) {
    int32_t n[MAX_INTS] = {0}, ni = get_i32(), nf;
    float f[MAX_FLOATS] = {0};
    if (ni < 0 || ni > MAX_INTS) return 3;
    get(n, (size_t)ni * sizeof n[0]);
    nf = get_i32();
    if (nf < 0 || nf > MAX_FLOATS) return 3;
    get(f, (size_t)nf * sizeof f[0]);
    int32_t status = 0;
    switch (op) {
      case 0: status = strawberry_init(n[0], n[1], n[2], n[3]); put(&status, 4); break;
      case 1: status = strawberry_begin(n[0], n[1], n[2], n[3]); put(&status, 4); break;
      case 2: { /* host slot n[0] of n[1] floats, data follows */
        if (n[0] < 0 || n[0] >= SLOTS || n[1] < 1) return 3;
        free(slot[n[0]]);
        slot[n[0]] = (float*)malloc((size_t)n[1] * sizeof(float));
        if (slot[n[0]] == NULL) return 4;
        slot_count[n[0]] = n[1];
        get(slot[n[0]], (size_t)n[1] * sizeof(float));
        put(&status, 4);
        break;
      }
      case 3: { const strawberry_tile tile = tile_of(n + 2); status = strawberry_dma_in(n[0], host(n[1]), &tile); }
        put(&status, 4); break;
      case 4: { const strawberry_tile tile = tile_of(n + 2); status = strawberry_dma_out(host(n[0]), n[1], &tile); }
        put(&status, 4); break;
      case 5: status = conv(strawberry_conv2d_nchw, n, 0, f); put(&status, 4); break;
      case 6: status = conv(strawberry_conv2d_nhwc, n, 0, f); put(&status, 4); break;
      case 7: status = conv(strawberry_depthwise_conv2d_nchw, n, 1, f); put(&status, 4); break;
      case 8: status = conv(strawberry_depthwise_conv2d_nhwc, n, 1, f); put(&status, 4); break;
      case 9: { /* read host slot n[0] */
        if (n[0] < 0 || n[0] >= SLOTS || slot[n[0]] == NULL) return 3;
        put(&status, 4); put(&slot_count[n[0]], 8); put(slot[n[0]], (size_t)slot_count[n[0]] * sizeof(float));
        break;
      }
      case 10: {
        strawberry_counters c;
        strawberry_get_counters(&c);
        put(&status, 4); put(&c, sizeof c);
        break;
      }
      case 11: {
        const char* e = strawberry_last_error();
        const int32_t len = (int32_t)strlen(e);
        put(&status, 4); put(&len, 4); put(e, (size_t)len);
        break;
      }
      case 12: strawberry_shutdown(); put(&status, 4); break;
      case 13: status = strawberry_spad_bytes(); put(&status, 4); break;
      case 14: strawberry_report(); put(&status, 4); break;
      case 15: { /* the packing function of a depthwise conv: the struct's (h, w) order, ic and oc apart */
        status = strawberry_depthwise_conv2d_nchw_call(n[0], n[1], n[2], n[3], n[4], n[5], n[6], n[7], n[8], n[9],
                                                       n[10], n[11], n[12], n[13], n[14], n[15], f[0], f[1]);
        put(&status, 4); break;
      }
      case 16: { /* NULL structs */
        const strawberry_conv_addrs addrs = {0, 0, 0, 0, 0, 0};
        status = n[0] ? strawberry_conv2d_nchw(&addrs, NULL) : strawberry_dma_in(0, slot[0], NULL);
        put(&status, 4); break;
      }
      default: return 3;
    }
    fflush(stdout);
  }
  for (int i = 0; i < SLOTS; ++i) free(slot[i]);
  return 0; /* no strawberry_shutdown: a report at exit (STRAWBERRY_REPORT) still has the counters */
}
"""


def header_codes():
    text = (STRAWBERRY / "strawberry.h").read_text()
    return {name: int(value) for name, value in re.findall(r"\bSTRAWBERRY_(E\w+|OK) = (\d+)", text)}


CODES = header_codes()
COUNTERS = ["layers", "dma_in_calls", "dma_out_calls", "dma_in_bytes", "dma_pad_bytes", "dma_out_bytes", "dma_cycles",
            "compute_calls", "macs", "compute_cycles", "spad_high_water", "spad_peak_bytes"]


@pytest.fixture(scope="module", params=["plain", "sanitized"])
def driver_build(request, tmp_path_factory):
    work = tmp_path_factory.mktemp(f"strawberry_{request.param}")
    (work / "driver.c").write_text(DRIVER)
    flags = ["-O2"] if request.param == "plain" else ["-O1", *SANITIZE]
    exe = work / "driver"
    done = subprocess.run(
        ["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", *flags, f"-I{STRAWBERRY}", f"-I{KIT}",
         "-o", str(exe), str(work / "driver.c"), str(STRAWBERRY / "strawberry.c"), str(KIT / "kit_conv_f32.c"),
         "-lm"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return request.param, exe


class Device:
    """One driver process: each method is one call of the C API, answered at once."""

    def __init__(self, exe, stderr_path, env=None):
        self.stderr_path = stderr_path
        self._err = open(stderr_path, "wb")
        self.proc = subprocess.Popen([str(exe)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err,
                                     env={**os.environ, **SANITIZER_ENV, **(env or {})})
        self._slots = 0

    def _call(self, op, ints=(), floats=(), data=b""):
        ints, floats = [int(i) for i in ints], [float(f) for f in floats]
        request = struct.pack(f"<ii{len(ints)}ii{len(floats)}f", op, len(ints), *ints, len(floats), *floats) + data
        self.proc.stdin.write(request)
        self.proc.stdin.flush()
        return self._read("<i")[0]

    def _read(self, fmt):
        size = struct.calcsize(fmt)
        raw = self.proc.stdout.read(size)
        if len(raw) != size:
            raise AssertionError(f"driver died: {self.stderr()}")
        return struct.unpack(fmt, raw)

    def init(self, spad=4096, bpc=8, setup=10, macs=16):
        return self._call(0, [spad, bpc, setup, macs])

    def begin(self, spad=4096, bpc=8, setup=10, macs=16):
        return self._call(1, [spad, bpc, setup, macs])

    def host(self, array):
        """A host buffer holding ``array`` (float32, flattened); returns its slot."""
        array = np.ascontiguousarray(array, np.float32).reshape(-1)
        slot, self._slots = self._slots, self._slots + 1
        assert self._call(2, [slot, array.size], data=array.tobytes()) == 0
        return slot

    def read(self, slot):
        assert self._call(9, [slot]) == 0
        (count,) = self._read("<q")
        return np.frombuffer(self.proc.stdout.read(4 * count), np.float32).copy()

    def dma_in(self, addr, slot, ext, strides, start, n):
        return self._call(3, [addr, slot, *ext, *strides, *start, *n])

    def dma_out(self, slot, addr, ext, strides, start, n):
        return self._call(4, [slot, addr, *ext, *strides, *start, *n])

    def conv(self, layout, depthwise, addrs, sizes, lo=-3.4e38, hi=3.4e38):
        op = {("nchw", False): 5, ("nhwc", False): 6, ("nchw", True): 7, ("nhwc", True): 8}[(layout, depthwise)]
        return self._call(op, [*addrs, *sizes], [lo, hi])

    def counters(self):
        assert self._call(10) == 0
        return dict(zip(COUNTERS, self._read(f"<{len(COUNTERS)}q")))

    def last_error(self):
        assert self._call(11) == 0
        (length,) = self._read("<i")
        return self.proc.stdout.read(length).decode()

    def shutdown(self):
        return self._call(12)

    def spad_bytes(self):
        return self._call(13)

    def close(self):
        self.proc.stdin.close()
        code = self.proc.wait(timeout=60)
        self._err.close()
        return code

    def stderr(self):
        if not self._err.closed:
            self._err.flush()
        return self.stderr_path.read_text(errors="replace")


@pytest.fixture
def device(driver_build, tmp_path):
    kind, exe = driver_build
    dev = Device(exe, tmp_path / "stderr.txt")
    yield dev
    code = dev.close()
    text = dev.stderr()
    assert "Sanitizer" not in text and "runtime error" not in text, text
    assert code == 0, text


def fails(dev, status, code, *fragments):
    """status is `code`, and one stderr line names the entry, the problem and the code."""
    assert status == CODES[code], (status, dev.last_error())
    message = dev.last_error()
    assert message.startswith("strawberry: ") and message.endswith(f"(STRAWBERRY_{code})"), message
    for fragment in fragments:
        assert fragment in message, message
    assert message in dev.stderr()
    return message


# ---------------------------------------------------------------------------------------------
# DMA


def padded_tile(host, start, n):
    """numpy: the n-box of `host` at `start`, zeros outside."""
    out = np.zeros(n, np.float32)
    src = tuple(slice(max(s, 0), min(s + k, e)) for s, k, e in zip(start, n, host.shape))
    dst = tuple(slice(sl.start - s, sl.stop - s) for sl, s in zip(src, start))
    if all(sl.stop > sl.start for sl in src):
        out[dst] = host[src]
    return out


@pytest.mark.parametrize("start,n", [
    ((0, 0, 0), (3, 5, 7)),             # the whole tensor
    ((-1, -2, -3), (5, 9, 13)),         # padded on every side
    ((1, 3, 4), (2, 2, 3)),             # an inner box
    ((2, 4, 6), (3, 4, 5)),             # past the far corner
    ((-4, 0, 0), (2, 5, 7)),            # entirely padding
])
def test_dma_in_copies_a_padded_tile(device, start, n):
    rng = np.random.default_rng(1)
    host = rng.standard_normal((3, 5, 7)).astype(np.float32)
    assert device.init(spad=8192) == 0
    slot = device.host(host)
    assert device.dma_in(64, slot, host.shape, (35, 7, 1), start, n) == 0
    out = device.host(np.full(n, np.nan, np.float32))
    assert device.dma_out(out, 64, n, (n[1] * n[2], n[2], 1), (0, 0, 0), n) == 0
    np.testing.assert_array_equal(device.read(out).reshape(n), padded_tile(host, start, n))
    counters = device.counters()
    inside = int(np.prod([max(0, min(s + k, e) - max(s, 0)) for s, k, e in zip(start, n, host.shape)]))
    assert counters["dma_in_bytes"] == 4 * inside
    assert counters["dma_pad_bytes"] == 4 * (int(np.prod(n)) - inside)
    assert counters["dma_out_bytes"] == 4 * int(np.prod(n))
    assert counters["dma_in_calls"] == counters["dma_out_calls"] == 1
    tile = 4 * int(np.prod(n))
    assert counters["dma_cycles"] == 2 * (10 + -(-tile // 8))
    assert counters["spad_high_water"] == 64 + tile
    assert counters["spad_peak_bytes"] == tile  # the out transfer read it; nothing else was written


def test_dma_strided_tiles_of_an_nhwc_tensor(device):
    """An NHWC channel slice in (innermost stride 1, a row of all channels apart) and a tile written
    back into a larger tensor with a non-unit innermost stride (NCHW seen as [h][w][c])."""
    rng = np.random.default_rng(2)
    nhwc = rng.standard_normal((6, 5, 8)).astype(np.float32)
    assert device.init() == 0
    src = device.host(nhwc)
    # rows 1..4, columns -1..5 (one column of padding each side), channels 2..5
    assert device.dma_in(0, src, (6, 5, 8), (40, 8, 1), (1, -1, 2), (4, 7, 4)) == 0
    nchw = np.zeros((8, 6, 5), np.float32)
    dst = device.host(nchw)
    # the same box, unpadded, written into NCHW: h stride 5, w stride 1, c stride 30; spad rows start at column 1
    for row in range(4):
        assert device.dma_out(dst, 4 * (row * 28 + 4), (6, 5, 8), (5, 1, 30), (1 + row, 0, 2), (1, 5, 4)) == 0
    expected = np.zeros_like(nchw)
    expected[2:6, 1:5, :] = np.transpose(nhwc[1:5, :, 2:6], (2, 0, 1))
    np.testing.assert_array_equal(device.read(dst).reshape(nchw.shape), expected)


# ---------------------------------------------------------------------------------------------
# The conv engine on scratchpad tiles


def reference_conv(x, w, bias, residual, slope, stride, pad, depthwise, lo, hi):
    """NCHW numpy reference: x [c][h][w] unpadded, w [oc][ic|1][kh][kw], pad (top, left, bottom, right)."""
    x = np.pad(x.astype(np.float64), ((0, 0), (pad[0], pad[2]), (pad[1], pad[3])))
    oc, _, kh, kw = w.shape
    oh = (x.shape[1] - kh) // stride[0] + 1
    ow = (x.shape[2] - kw) // stride[1] + 1
    out = np.zeros((oc, oh, ow))
    for y in range(oh):
        for xx in range(ow):
            window = x[:, y * stride[0]:y * stride[0] + kh, xx * stride[1]:xx * stride[1] + kw]
            if depthwise:
                out[:, y, xx] = np.einsum("chw,chw->c", window, w[:, 0])
            else:
                out[:, y, xx] = np.einsum("ihw,oihw->o", window, w)
    if bias is not None:
        out += bias[:, None, None]
    if residual is not None:
        out += residual
    if slope is not None:
        out = np.where(out < 0, slope[:, None, None] * out, out)
    return np.clip(out, lo, hi).astype(np.float32)


CASES = [
    # layout, depthwise, ic, oc, h, w, k, stride, pad (t, l, b, r), bias, residual, slope, lo, hi
    ("nchw", False, 3, 5, 9, 8, (3, 3), (1, 1), (1, 1, 1, 1), True, False, False, 0.0, 3.4e38),
    ("nhwc", False, 4, 6, 7, 9, (3, 2), (2, 1), (0, 1, 1, 0), True, True, False, -3.4e38, 3.4e38),
    ("nchw", False, 2, 3, 6, 6, (1, 1), (1, 1), (0, 0, 0, 0), False, True, True, -3.4e38, 3.4e38),
    ("nhwc", False, 5, 4, 8, 7, (5, 5), (2, 2), (2, 2, 2, 2), True, False, True, -1.0, 6.0),
    ("nchw", True, 4, 4, 9, 7, (3, 3), (2, 2), (1, 1, 1, 1), True, True, False, 0.0, 6.0),
    ("nhwc", True, 6, 6, 8, 8, (3, 3), (1, 1), (1, 1, 1, 1), True, False, True, -3.4e38, 3.4e38),
]


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{'dw' if c[1] else 'dense'}-{c[6][0]}x{c[6][1]}" for c in CASES])
def test_conv_layer_through_the_scratchpad(device, case):
    """A whole layer as compiled code runs it: DMA in (padding the input), compute, DMA out."""
    layout, dw, ic, oc, h, w, (kh, kw), stride, pad, has_bias, has_res, has_slope, lo, hi = case
    rng = np.random.default_rng(CASES.index(case))
    x = rng.standard_normal((ic, h, w)).astype(np.float32)
    weights = rng.standard_normal((oc, 1 if dw else ic, kh, kw)).astype(np.float32)
    ph, pw = h + pad[0] + pad[2], w + pad[1] + pad[3]
    oh, ow = (ph - kh) // stride[0] + 1, (pw - kw) // stride[1] + 1
    bias = rng.standard_normal(oc).astype(np.float32) if has_bias else None
    residual = rng.standard_normal((oc, oh, ow)).astype(np.float32) if has_res else None
    slope = rng.standard_normal(oc).astype(np.float32) * 0.3 if has_slope else None
    expected = reference_conv(x, weights, bias, residual, slope, stride, pad, dw, lo, hi)
    to = (lambda a: np.transpose(a, (1, 2, 0))) if layout == "nhwc" else (lambda a: a)
    rows, cols = (oh - 1) * stride[0] + kh, (ow - 1) * stride[1] + kw  # the input tile

    assert device.begin(spad=65536) == 0
    addr = {"ifmap": 0, "weights": 16384, "bias": 28672, "slope": 29696, "residual": 36864, "ofmap": 49152}
    xs = device.host(to(x))
    if layout == "nchw":
        assert device.dma_in(addr["ifmap"], xs, (ic, h, w), (h * w, w, 1), (0, -pad[0], -pad[1]), (ic, rows, cols)) == 0
    else:
        assert device.dma_in(addr["ifmap"], xs, (h, w, ic), (w * ic, ic, 1), (-pad[0], -pad[1], 0), (rows, cols, ic)) == 0
    flat = lambda slot, count, at: device.dma_in(at, slot, (1, 1, count), (0, 0, 1), (0, 0, 0), (1, 1, count))
    assert flat(device.host(weights), weights.size, addr["weights"]) == 0
    absent = -1
    addrs = [addr["ifmap"], addr["weights"], absent, absent, absent, addr["ofmap"]]
    if bias is not None:
        assert flat(device.host(bias), oc, addr["bias"]) == 0
        addrs[2] = addr["bias"]
    if residual is not None:
        assert flat(device.host(to(residual)), residual.size, addr["residual"]) == 0
        addrs[3] = addr["residual"]
    if slope is not None:
        assert flat(device.host(slope), oc, addr["slope"]) == 0
        addrs[4] = addr["slope"]
    sizes = [oc, cols, rows] + ([] if dw else [ic]) + [kh, kw, ow, oh, stride[1], stride[0]]
    assert device.conv(layout, dw, addrs, sizes, lo, hi) == 0, device.last_error()
    out = device.host(np.zeros(expected.size, np.float32))
    assert device.dma_out(out, addr["ofmap"], (1, 1, expected.size), (0, 0, 1), (0, 0, 0), (1, 1, expected.size)) == 0
    got = device.read(out).reshape(to(expected).shape)
    np.testing.assert_allclose(got, to(expected), rtol=1e-5, atol=1e-5)
    counters = device.counters()
    macs = oc * oh * ow * kh * kw * (1 if dw else ic)
    assert counters["macs"] == macs and counters["compute_calls"] == 1
    assert counters["compute_cycles"] == -(-macs // 16)
    assert counters["layers"] == 1


# ---------------------------------------------------------------------------------------------
# Misuse: one code per kind, a message, nothing changed


def test_not_ready_before_init(device):
    slot = device.host(np.ones(4))
    fails(device, device.dma_in(0, slot, (1, 1, 4), (0, 0, 1), (0, 0, 0), (1, 1, 4)), "ENOTREADY", "strawberry_dma_in")
    fails(device, device.conv("nchw", False, [0, 16, -1, -1, -1, 32], [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]), "ENOTREADY")
    assert device.spad_bytes() == 0


@pytest.mark.parametrize("config,fragment", [
    ((6, 8, 10, 16), "scratchpad size 6"),
    ((0, 8, 10, 16), "scratchpad size 0"),
    ((-4, 8, 10, 16), "scratchpad size -4"),
    (((1 << 30) + 4, 8, 10, 16), "scratchpad size"),
    ((4096, 0, 10, 16), "DMA bytes per cycle 0"),
    ((4096, 8, -1, 16), "DMA setup cycles -1"),
    ((4096, 8, 10, 0), "MACs per cycle 0"),
])
def test_bad_configuration(device, config, fragment):
    fails(device, device.init(*config), "ECONFIG", "strawberry_init", fragment)
    assert device.spad_bytes() == 0


def test_begin_checks_the_configuration_and_forgets_the_scratchpad(device):
    assert device.begin(spad=4096) == 0 and device.spad_bytes() == 4096  # power-on with this configuration
    fails(device, device.begin(spad=8192), "ECONFIG", "compiled for a 8192-byte scratchpad", "the device has 4096")
    fails(device, device.begin(macs=32), "ECONFIG", "32 MACs/cycle")
    slot = device.host(np.arange(8, dtype=np.float32))
    assert device.dma_in(0, slot, (1, 1, 8), (0, 0, 1), (0, 0, 0), (1, 1, 8)) == 0
    out = device.host(np.zeros(8))
    assert device.dma_out(out, 0, (1, 1, 8), (0, 0, 1), (0, 0, 0), (1, 1, 8)) == 0
    assert device.begin(spad=4096) == 0  # a new layer: nothing written any more
    fails(device, device.dma_out(out, 0, (1, 1, 8), (0, 0, 1), (0, 0, 0), (1, 1, 8)), "EUNWRITTEN",
          "strawberry_dma_out", "reads source bytes [0, 32)", "missing transfer")
    assert device.counters()["layers"] == 2


def test_peak_occupancy_counts_distinct_bytes_per_layer(device):
    """Occupancy: bytes written since the layer began, each once however often rewritten; the
    peak is the largest over layers, whatever the addresses."""
    assert device.begin(spad=4096) == 0
    slot = device.host(np.arange(16, dtype=np.float32))
    whole = dict(ext=(1, 1, 16), strides=(0, 0, 1), start=(0, 0, 0))
    assert device.dma_in(0, slot, n=(1, 1, 16), **whole) == 0      # [0, 64)
    assert device.dma_in(32, slot, n=(1, 1, 16), **whole) == 0     # [32, 96): 32 new bytes
    assert device.dma_in(32, slot, n=(1, 1, 8), **whole) == 0      # rewritten: nothing new
    assert device.counters()["spad_peak_bytes"] == 96
    assert device.begin(spad=4096) == 0                                     # a smaller layer
    assert device.dma_in(2048, slot, n=(1, 1, 16), **whole) == 0
    counters = device.counters()
    assert counters["spad_peak_bytes"] == 96 and counters["spad_high_water"] == 2048 + 64
    assert device.begin(spad=4096) == 0                                     # a larger one
    for addr in (1024, 3072, 4032):
        assert device.dma_in(addr, slot, n=(1, 1, 16), **whole) == 0
    assert device.counters()["spad_peak_bytes"] == 192


def tile_args(**changes):
    args = dict(ext=(2, 3, 4), strides=(12, 4, 1), start=(0, 0, 0), n=(2, 3, 4))
    args.update(changes)
    return args


@pytest.mark.parametrize("direction", ["in", "out"])
@pytest.mark.parametrize("changes,addr,code,fragment", [
    (dict(), 0, None, None),
    (dict(n=(2, 0, 4)), 0, "ESIZE", "of the tile (0)"),
    (dict(ext=(2, 3, 0)), 0, "ESIZE", "host tensor (0)"),
    (dict(strides=(12, -4, 1)), 0, "ESTRIDE", "host stride 1 is -4"),
    (dict(strides=(1 << 30, 1 << 30, 1 << 30), ext=(1 << 30, 4, 4)), 0, "EHOST", "too large to index"),
    (dict(), 4096 - 92, "EADDR", "[4004, 4100) is not in the 4096-byte scratchpad"),
    (dict(), -4, "EADDR", "[-4, 92)"),
    (dict(), 2, "EADDR", "not a multiple of 4"),
    (dict(n=(1 << 20, 1 << 20, 1 << 20), ext=(1 << 20, 1 << 20, 1 << 20)), 0, "EADDR", "larger than the 4096-byte"),
])
def test_dma_misuse(device, direction, changes, addr, code, fragment):
    assert device.init() == 0
    data = np.arange(24, dtype=np.float32)
    slot = device.host(data)
    args = tile_args(**changes)
    if direction == "out":  # a written source
        assert device.dma_in(0, device.host(np.zeros(1024)), (1, 1, 1024), (0, 0, 1), (0, 0, 0), (1, 1, 1024)) == 0
    before = device.counters()
    call = device.dma_in if direction == "in" else device.dma_out
    status = call(addr, slot, **args) if direction == "in" else call(slot, addr, **args)
    if code is None:
        assert status == 0
        return
    fails(device, status, code, f"strawberry_dma_{direction}", fragment)
    assert device.counters() == before
    np.testing.assert_array_equal(device.read(slot), data)


def test_dma_null_and_outside_host(device):
    assert device.init() == 0
    fails(device, device.dma_in(0, -1, **tile_args()), "EINVAL", "host pointer is NULL")
    slot = device.host(np.zeros(24))
    assert device.dma_in(0, slot, **tile_args(start=(-1, 0, 0))) == 0  # padding is fine on the way in
    fails(device, device.dma_out(slot, 0, **tile_args(start=(0, 1, 0))), "EHOST",
          "tile [1, 4) along dimension 1 is not inside the host tensor's 3")
    fails(device, device.dma_out(slot, 0, **tile_args(start=(-1, 0, 0))), "EHOST", "[-1, 1) along dimension 0")


def conv_setup(device):
    """A written ifmap [2][4][4] at 0, weights [3][2][3][3] at 128, bias at 344; ofmap would go to 512."""
    assert device.init(spad=2048) == 0
    for addr, count in ((0, 32), (128, 54), (344, 3)):
        slot = device.host(np.ones(count))
        assert device.dma_in(addr, slot, (1, 1, count), (0, 0, 1), (0, 0, 0), (1, 1, count)) == 0
    #       ifmap weights bias res slope ofmap  oc iw ih ic kh kw ow oh sw sh
    return [0, 128, 344, -1, -1, 512], [3, 4, 4, 2, 3, 3, 2, 2, 1, 1]


@pytest.mark.parametrize("addr_changes,size_changes,bounds,code,fragment", [
    ({}, {}, (-1.0, 1.0), None, None),
    ({}, {0: 0}, (-1.0, 1.0), "ESIZE", "oc is 0"),
    ({}, {5: -2}, (-1.0, 1.0), "ESIZE", "kw is -2"),
    ({}, {9: 0}, (-1.0, 1.0), "ESTRIDE", "strides 0 x 1"),
    ({}, {7: 3}, (-1.0, 1.0), "EWINDOW", "read 5x4 inputs, the tile has 4x4"),
    ({}, {}, (1.0, -1.0), "ECLAMP", "clamp bounds [1, -1]"),
    ({}, {}, (float("nan"), 1.0), "ECLAMP", "nan"),
    ({0: -1}, {}, (-1.0, 1.0), "EADDR", "ifmap region [-1, 127)"),
    ({5: 2008}, {}, (-1.0, 1.0), "EADDR", "ofmap region [2008, 2056) is not in the 2048-byte"),
    ({1: 6}, {}, (-1.0, 1.0), "EADDR", "weights region [6, 222) is not in the 2048-byte scratchpad (address not"),
    ({3: 600}, {}, (-1.0, 1.0), "EUNWRITTEN", "reads residual bytes [600, 648)"),
    ({4: 356}, {}, (-1.0, 1.0), "EUNWRITTEN", "reads slope bytes [356, 368)"),
    ({5: 16}, {}, (-1.0, 1.0), "EOVERLAP", "ofmap [16, 64) overlaps ifmap [0, 128)"),
    ({5: 340}, {}, (-1.0, 1.0), "EOVERLAP", "overlaps weights [128, 344)"),
])
def test_conv_misuse(device, addr_changes, size_changes, bounds, code, fragment):
    addrs, sizes = conv_setup(device)
    for i, value in addr_changes.items():
        addrs[i] = value
    for i, value in size_changes.items():
        sizes[i] = value
    before = device.counters()
    status = device.conv("nchw", False, addrs, sizes, *bounds)
    if code is None:
        assert status == 0
        out = device.host(np.zeros(12))
        assert device.dma_out(out, 512, (1, 1, 12), (0, 0, 1), (0, 0, 0), (1, 1, 12)) == 0
        np.testing.assert_array_equal(device.read(out), np.ones(12))  # 18 + 1 clamped to 1
        return
    fails(device, status, code, "strawberry_conv2d_nchw", fragment)
    assert device.counters() == before


def test_conv_engine_refusal(device):
    """The kit engine's depthwise window holds 64 taps: a 9x9 depthwise conv is refused by the engine."""
    assert device.init(spad=8192) == 0
    slot = device.host(np.ones(81))
    for addr in (0, 400):
        assert device.dma_in(addr, slot, (1, 1, 81), (0, 0, 1), (0, 0, 0), (1, 1, 81)) == 0
    etaps = c_limits(KIT / "kit_conv_f32.h", "KIT_CONV_F32_")["ETAPS"]
    fails(device, device.conv("nchw", True, [0, 400, -1, -1, -1, 800], [1, 9, 9, 9, 9, 1, 1, 1, 1]), "EENGINE",
          "strawberry_depthwise_conv2d_nchw", f"kit status {etaps}")


def test_depthwise_channels_and_null_structs(device):
    """The struct entries: a depthwise conv's input and output channels must agree (ESIZE); NULL
    structs are EINVAL; the packing function passes its (h, w)-ordered integers through."""
    addrs, _ = conv_setup(device)
    #                 ih iw ic oh ow oc kh kw sh sw   (ifmap [2][4][4] written, weights [2][3][3] at 128)
    fails(device, device._call(15, [*addrs, 4, 4, 2, 2, 2, 3, 3, 3, 1, 1], [-1.0, 1.0]), "ESIZE",
          "strawberry_depthwise_conv2d_nchw", "a depthwise conv with 2 input and 3 output channels")
    assert device._call(15, [*addrs, 4, 4, 2, 2, 2, 2, 3, 3, 1, 1], [-1.0, 1.0]) == 0
    out = device.host(np.zeros(8))
    assert device.dma_out(out, 512, (1, 1, 8), (0, 0, 1), (0, 0, 0), (1, 1, 8)) == 0
    np.testing.assert_array_equal(device.read(out), np.ones(8))  # 9 + 1 clamped to 1
    fails(device, device._call(16, [1]), "EINVAL", "strawberry_conv2d_nchw: addrs or params is NULL")
    fails(device, device._call(16, [0]), "EINVAL", "strawberry_dma_in: tile is NULL")


def test_first_listed_code_wins(device):
    """Several problems: the code listed first in the header comes back."""
    addrs, sizes = conv_setup(device)
    sizes[0], sizes[8] = 0, 0  # ESIZE and ESTRIDE
    addrs[0] = -1  # and EADDR
    fails(device, device.conv("nchw", False, addrs, sizes), "ESIZE")


def test_shutdown_and_reinit(device):
    assert device.init(spad=1024) == 0
    slot = device.host(np.ones(4))
    assert device.dma_in(0, slot, (1, 1, 4), (0, 0, 1), (0, 0, 0), (1, 1, 4)) == 0
    assert device.shutdown() == 0 and device.spad_bytes() == 0
    assert device.counters()["dma_in_calls"] == 0
    fails(device, device.dma_in(0, slot, (1, 1, 4), (0, 0, 1), (0, 0, 0), (1, 1, 4)), "ENOTREADY")
    assert device.init(spad=2048) == 0 and device.spad_bytes() == 2048


def test_report_at_exit(driver_build, tmp_path):
    """STRAWBERRY_REPORT=path: the counters are appended to that file when the program exits."""
    _, exe = driver_build
    report = tmp_path / "report.txt"
    dev = Device(exe, tmp_path / "stderr.txt", env={"STRAWBERRY_REPORT": str(report)})
    assert dev.init(spad=4096) == 0
    slot = dev.host(np.ones(10))
    assert dev.dma_in(0, slot, (1, 1, 10), (0, 0, 1), (0, 0, -2), (1, 1, 12)) == 0
    assert dev.close() == 0
    values = dict(line.split(": ") for line in report.read_text().splitlines())
    assert values["strawberry.spad_bytes"] == "4096"
    assert values["strawberry.dma_in_calls"] == "1"
    assert values["strawberry.dma_in_bytes"] == "40" and values["strawberry.dma_pad_bytes"] == "8"
