"""Strawberry's hardware model in C (c_runtime/strawberry): DMA tiles with padding, the conv engine
on scratchpad addresses, counters, and a distinct status code plus one stderr line for every
kind of misuse.

The library (with the kit's conv engine, which it calls) is built as shipped (-O2) and called
through ctypes with the header's structs (strawberry_c.py, the way every backend's tests call
C); host tensors are numpy arrays of exactly their size.  test_strawberry_sanitized.py runs
these tests again against the library built with AddressSanitizer and UndefinedBehaviorSanitizer.
Results are compared with numpy.
"""
import ctypes
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tvm_extension.kit.limits import c_limits
from tvm_extension.testing import clib
from uma_strawberry.codegen import KIT_DIR as KIT

from strawberry_c import STATUS as CODES, ConvAddrs, ConvParams, Counters, Dims, HW, Tile, build


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    return build(tmp_path_factory.mktemp("strawberry"))


class Device:
    """The C library's device model: each method is one call of the C API.  Host tensors are
    float32 numpy arrays (``host``); None is a NULL host pointer."""

    def __init__(self, lib, capfd):
        self.lib, self._capfd, self._stderr = lib, capfd, ""

    def init(self, spad=4096, bpc=8, setup=10, macs=16):
        return self.lib.strawberry_init(spad, bpc, setup, macs)

    def begin(self, spad=4096, bpc=8, setup=10, macs=16):
        return self.lib.strawberry_begin(spad, bpc, setup, macs)

    @staticmethod
    def host(array):
        """A host buffer holding ``array`` (float32, flattened, its own copy)."""
        return np.array(array, np.float32).reshape(-1)

    @staticmethod
    def read(host):
        return host.copy()

    @staticmethod
    def _tile(ext, strides, start, n):
        return Tile(*((ctypes.c_int32 * 3)(*values) for values in (ext, strides, start, n)))

    def dma_in(self, addr, host, ext, strides, start, n):
        return self.lib.strawberry_dma_in(addr, clib.pointer(host), ctypes.byref(self._tile(ext, strides, start, n)))

    def dma_out(self, host, addr, ext, strides, start, n):
        return self.lib.strawberry_dma_out(clib.pointer(host), addr, ctypes.byref(self._tile(ext, strides, start, n)))

    def conv(self, layout, depthwise, addrs, sizes, lo=-3.4e38, hi=3.4e38, accumulate=0):
        """sizes: oc, iw, ih, ic, kh, kw, ow, oh, stride w, stride h (depthwise: no ic, it is oc)."""
        oc, iw, ih, *rest = sizes
        ic, (kh, kw, ow, oh, sw, sh) = (oc, rest) if depthwise else (rest[0], rest[1:])
        params = ConvParams(Dims(ih, iw, ic), Dims(oh, ow, oc), HW(kh, kw), HW(sh, sw), lo, hi, accumulate)
        entry = getattr(self.lib, f"strawberry_{'depthwise_' if depthwise else ''}conv2d_{layout}")
        return entry(ctypes.byref(ConvAddrs(*addrs)), ctypes.byref(params))

    def counters(self):
        counters = Counters()
        self.lib.strawberry_get_counters(ctypes.byref(counters))
        return counters.as_dict()

    def last_error(self):
        return self.lib.strawberry_last_error().decode()

    def shutdown(self):
        self.lib.strawberry_shutdown()
        return 0

    def spad_bytes(self):
        return self.lib.strawberry_spad_bytes()

    def stderr(self):
        """What the C has written on stderr (fd 2) so far in this test."""
        self._stderr += self._capfd.readouterr().err
        return self._stderr


@pytest.fixture
def device(library, capfd):
    library.strawberry_shutdown()  # the model is one static device: each test starts uninitialised
    yield Device(library, capfd)
    library.strawberry_shutdown()


def fails(dev, status, code, *fragments):
    """status is `code`, and one stderr line names the entry, the problem and the code."""
    assert status == CODES[code], (status, dev.last_error())
    message = dev.last_error()
    assert message.startswith("strawberry: ") and message.endswith(f"(STRAWBERRY_{code})"), message
    for fragment in fragments:
        assert fragment in message, message
    assert dev.stderr().splitlines()[-1] == message  # the line the failing call printed, whole
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


ACC_ADD, ACC_PARTIAL = 1, 2  # STRAWBERRY_ACC_*


@pytest.mark.parametrize("case", [c for c in CASES if not c[1]], ids=lambda c: f"{c[0]}-{c[6][0]}x{c[6][1]}")
@pytest.mark.parametrize("chunk", [1, 2])
def test_conv_in_input_channel_chunks(device, case, chunk):
    """A dense conv whose input channels come in chunks: each chunk's input and weights in their
    own regions, partial sums kept in the ofmap region, the output stage applied after the last
    chunk; partial sums cannot leave the scratchpad before it."""
    layout, _, ic, oc, h, w, (kh, kw), stride, pad, has_bias, has_res, has_slope, lo, hi = case
    rng = np.random.default_rng(CASES.index(case))
    x = rng.standard_normal((ic, h, w)).astype(np.float32)
    weights = rng.standard_normal((oc, ic, kh, kw)).astype(np.float32)
    ph, pw = h + pad[0] + pad[2], w + pad[1] + pad[3]
    oh, ow = (ph - kh) // stride[0] + 1, (pw - kw) // stride[1] + 1
    bias = rng.standard_normal(oc).astype(np.float32) if has_bias else None
    residual = rng.standard_normal((oc, oh, ow)).astype(np.float32) if has_res else None
    slope = rng.standard_normal(oc).astype(np.float32) * 0.3 if has_slope else None
    expected = reference_conv(x, weights, bias, residual, slope, stride, pad, False, lo, hi)
    to = (lambda a: np.transpose(a, (1, 2, 0))) if layout == "nhwc" else (lambda a: a)
    rows, cols = (oh - 1) * stride[0] + kh, (ow - 1) * stride[1] + kw

    assert device.begin(spad=65536) == 0
    flat = lambda slot, count, at: device.dma_in(at, slot, (1, 1, count), (0, 0, 1), (0, 0, 0), (1, 1, count))
    addrs = [-1, -1, -1, -1, -1, 49152]
    for role, value, at in (("bias", bias, 28672), ("residual", residual, 36864), ("slope", slope, 29696)):
        if value is not None:
            assert flat(device.host(to(value) if role == "residual" else value), value.size, at) == 0
            addrs[("bias", "residual", "slope").index(role) + 2] = at
    xs, ws = device.host(to(x)), device.host(weights)
    firsts = list(range(0, ic, chunk))
    out = device.host(np.zeros(expected.size, np.float32))
    whole = (1, 1, expected.size), (0, 0, 1), (0, 0, 0), (1, 1, expected.size)
    for n, i0 in enumerate(firsts):
        ni = min(chunk, ic - i0)
        at_x, at_w = 4096 * n, 16384 + 1024 * n  # each chunk in a region of its own
        if layout == "nchw":
            assert device.dma_in(at_x, xs, (ic, h, w), (h * w, w, 1), (i0, -pad[0], -pad[1]), (ni, rows, cols)) == 0
        else:
            assert device.dma_in(at_x, xs, (h, w, ic), (w * ic, ic, 1), (-pad[0], -pad[1], i0), (rows, cols, ni)) == 0
        assert device.dma_in(at_w, ws, (oc, ic, kh * kw), (ic * kh * kw, kh * kw, 1), (0, i0, 0), (oc, ni, kh * kw)) == 0
        flags = (ACC_ADD if n > 0 else 0) | (ACC_PARTIAL if n < len(firsts) - 1 else 0)
        sizes = [oc, cols, rows, ni, kh, kw, ow, oh, stride[1], stride[0]]
        addrs[:2] = at_x, at_w
        assert device.conv(layout, False, addrs, sizes, lo, hi, flags) == 0, device.last_error()
        if flags & ACC_PARTIAL:
            fails(device, device.dma_out(out, 49152, *whole), "EPARTIAL", "strawberry_dma_out",
                  "reads source bytes of the scratchpad from 49152 that hold partial sums")
    assert device.dma_out(out, 49152, *whole) == 0
    np.testing.assert_allclose(device.read(out).reshape(to(expected).shape), to(expected), rtol=1e-5, atol=1e-5)
    counters = device.counters()
    assert counters["macs"] == oc * oh * ow * kh * kw * ic and counters["compute_calls"] == len(firsts)


@pytest.mark.parametrize("depthwise,flags,ofmap,code,fragment", [
    (False, 4, "none", "EPARTIAL", "accumulate is 4 (0 or STRAWBERRY_ACC_ADD | STRAWBERRY_ACC_PARTIAL)"),
    (False, -1, "none", "EPARTIAL", "accumulate is -1"),
    (True, ACC_PARTIAL, "none", "EPARTIAL", "accumulate 2 on a depthwise conv"),
    (False, ACC_ADD, "none", "EUNWRITTEN", "reads ofmap bytes [512, 560)"),
    (False, ACC_ADD, "final", "EPARTIAL", "adds to ofmap bytes of the scratchpad from 512 that hold no partial sums"),
    (False, ACC_ADD | ACC_PARTIAL, "final", "EPARTIAL", "that hold no partial sums"),
    (False, ACC_ADD, "partial", None, None),
    (False, 0, "partial", None, None),  # a fresh reduction may overwrite partial sums
])
def test_partial_sums_misuse(device, depthwise, flags, ofmap, code, fragment):
    addrs, sizes = conv_setup(device)
    if depthwise:
        sizes = [2, 4, 4, 3, 3, 2, 2, 1, 1]
    if ofmap != "none":
        assert device.conv("nchw", False, addrs, [3, 4, 4, 2, 3, 3, 2, 2, 1, 1], -1.0, 1.0,
                           ACC_PARTIAL if ofmap == "partial" else 0) == 0
    before = device.counters()
    status = device.conv("nchw", depthwise, addrs, sizes, -1.0, 1.0, flags)
    if code is None:
        assert status == 0, device.last_error()
        out = device.host(np.zeros(12))
        assert device.dma_out(out, 512, (1, 1, 12), (0, 0, 1), (0, 0, 0), (1, 1, 12)) == 0
        np.testing.assert_array_equal(device.read(out), np.ones(12))  # 18 (+ 18) + 1 clamped to 1
        return
    fails(device, status, code, f"strawberry_{'depthwise_' if depthwise else ''}conv2d_nchw", fragment)
    assert device.counters() == before


def test_partial_sums_are_not_an_input(device):
    """Partial sums read as an input of a computation (here as the next layer's ifmap): EPARTIAL."""
    addrs, sizes = conv_setup(device)
    assert device.conv("nchw", False, addrs, sizes, -1.0, 1.0, ACC_PARTIAL) == 0
    # the 3x2x2 partial sums at 512 as a [3][2][2] input of a 1x1 conv
    slot = device.host(np.ones(3))
    assert device.dma_in(1024, slot, (1, 1, 3), (0, 0, 1), (0, 0, 0), (1, 1, 3)) == 0
    fails(device, device.conv("nchw", False, [512, 1024, -1, -1, -1, 1536], [1, 2, 2, 3, 1, 1, 2, 2, 1, 1]),
          "EPARTIAL", "strawberry_conv2d_nchw", "reads ifmap bytes of the scratchpad from 512 that hold partial sums")


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
    fails(device, device.dma_in(0, None, **tile_args()), "EINVAL", "host pointer is NULL")
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
    packed = device.lib.test_depthwise_conv2d_nchw_call
    fails(device, packed(*addrs, 4, 4, 2, 2, 2, 3, 3, 3, 1, 1, -1.0, 1.0, 0), "ESIZE",
          "strawberry_depthwise_conv2d_nchw", "a depthwise conv with 2 input and 3 output channels")
    assert packed(*addrs, 4, 4, 2, 2, 2, 2, 3, 3, 1, 1, -1.0, 1.0, 0) == 0
    out = device.host(np.zeros(8))
    assert device.dma_out(out, 512, (1, 1, 8), (0, 0, 1), (0, 0, 0), (1, 1, 8)) == 0
    np.testing.assert_array_equal(device.read(out), np.ones(8))  # 9 + 1 clamped to 1
    fails(device, device.lib.strawberry_conv2d_nchw(ctypes.byref(ConvAddrs()), None), "EINVAL",
          "strawberry_conv2d_nchw: addrs or params is NULL")
    fails(device, device.lib.strawberry_dma_in(0, clib.pointer(device.host(np.ones(4))), None), "EINVAL",
          "strawberry_dma_in: tile is NULL")


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


# A process that uses the library and exits: STRAWBERRY_REPORT's report is written at its exit.
REPORTING = textwrap.dedent("""
    import ctypes, sys
    import numpy as np
    from tvm_extension.testing import clib
    from strawberry_c import Tile, prototypes

    lib = prototypes(ctypes.CDLL(sys.argv[1]))
    assert lib.strawberry_init(4096, 8, 10, 16) == 0
    host = np.ones(10, np.float32)
    tile = Tile(*((ctypes.c_int32 * 3)(*v) for v in ((1, 1, 10), (0, 0, 1), (0, 0, -2), (1, 1, 12))))
    assert lib.strawberry_dma_in(0, clib.pointer(host), ctypes.byref(tile)) == 0
""")  # no strawberry_shutdown: the report at exit still has the counters


def test_report_at_exit(library, tmp_path):
    """STRAWBERRY_REPORT=path: the counters are appended to that file when the program exits."""
    report = tmp_path / "report.txt"
    done = subprocess.run([sys.executable, "-c", REPORTING, library._name], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).parent, env={**os.environ, "STRAWBERRY_REPORT": str(report)})
    assert done.returncode == 0, done.stderr
    values = dict(line.split(": ") for line in report.read_text().splitlines())
    assert values["strawberry.spad_bytes"] == "4096"
    assert values["strawberry.dma_in_calls"] == "1"
    assert values["strawberry.dma_in_bytes"] == "40" and values["strawberry.dma_pad_bytes"] == "8"
