"""Chocolate's hardware model in C (uma_chocolate/c/chocolate_*.c): whole int8 and float layers driven
tile by tile as compiled code drives them, bit-exact with numpy and with the plain C reference; the
counters; and a distinct status code plus one stderr line for every kind of misuse.

The library is called in this process through ctypes (chocolate_c.py, on
``tvm_extension.testing.clib``), built twice: completion by polling (the default) and by
interrupt (``-DCHOCOLATE_COMPLETION_INTERRUPT``).  Host tensors are numpy arrays of exactly their
size; test_chocolate_sanitized.py runs these tests again against the libraries built with
AddressSanitizer and UndefinedBehaviorSanitizer.  The C's state is the process's: each test starts
with the device off.
"""
import dataclasses
import os
import subprocess

import numpy as np
import pytest

from tvm_extension.kit.quantization import channel_params, requantize
from tvm_extension.testing import clib

from chocolate_c import CHOCOLATE, CODES, COUNTERS_KEYS, KIT, Device, build, run_alone

FLAGS = {"polling": ["-O2"], "interrupt": ["-O2", "-DCHOCOLATE_COMPLETION_INTERRUPT"]}
CONFIG_KEYS = ["spad_bytes", "tile_m", "tile_n", "tile_k", "dma_bytes_per_cycle", "dma_setup_cycles"]
TYPED_ENTRIES = ["chocolate_dma_im2col_s8", "chocolate_dma_weights_s8", "chocolate_store_s8",
                 "chocolate_dma_im2col_f32", "chocolate_dma_weights_f32", "chocolate_store_f32"]


@pytest.fixture(scope="module", params=list(FLAGS))
def chocolate(request, tmp_path_factory):
    return build(tmp_path_factory.mktemp(f"chocolate_{request.param}"), FLAGS[request.param])


@pytest.fixture
def device(chocolate, capfd):
    """The device off (as before power-up) and nothing printed yet."""
    chocolate.chocolate_shutdown()
    dev = Device(chocolate, capfd)
    dev.printed()
    yield dev
    chocolate.chocolate_shutdown()


def fails(dev, status, code, *fragments):
    """status is `code`, and the call printed one stderr line naming the entry, the problem and the code."""
    assert status == CODES[code], (status, dev.last_error())
    message = dev.last_error()
    assert message.startswith("chocolate: ") and message.endswith(f"(CHOCOLATE_{code})"), message
    for fragment in fragments:
        assert fragment in message, message
    assert dev.printed() == message + "\n"
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
    """(A device powered up and) configured for SMALL; returns host input, weights, output."""
    if begin:
        assert device.begin(spad=4096, tile=tile) == 0
    if dtype == "int8":
        table = np.array([[0] * 3, [1 << 30] * 3, [1] * 3], np.int32)
        assert device.configure_s8(SMALL.geometry, 3, table) == 0
    else:
        assert device.configure_f32(SMALL.geometry) == 0
    return np.ones((5, 5, 2), dtype), np.ones((18, 3), dtype), np.full((25, 3), 7, dtype)


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
    out = np.full((rows, channels), 99, out_dtype)
    assert dev.begin(spad=8192, tile=tile, bpc=bpc, setup=setup) == 0
    assert configure() == 0, dev.last_error()
    statuses = []
    for m0 in range(0, rows, tm):
        for n0 in range(0, channels, tn):
            statuses.append(dev.zero(acc))
            for k0 in range(0, depth, tk):
                statuses += [dev.im2col(a, x, m0, k0), dev.weights(b, w2d, k0, n0), dev.matmul(a, b, acc)]
            statuses.append(dev.store(out, acc, m0, n0))
    assert not any(statuses), dev.last_error()
    return out


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
                    lambda: device.configure_s8(geometry, input_zp, table, output_zp, act), np.int8)

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
                        lambda: device.configure_s8(g, input_zp, table, output_zp, act), np.int8)
        reference = np.zeros((rows, channels), np.int8)
        device.reference_s8(g, (input_zp, output_zp, *act), bias, np.ascontiguousarray(table[1]),
                            np.ascontiguousarray(table[2]), x, w2d, reference)
        assert len(np.unique(got)) > 50
    else:
        rng = np.random.default_rng(21 + TILES.index(tile))
        x = rng.standard_normal((layer.ih, layer.iw, layer.ic)).astype(np.float32)
        w2d = rng.standard_normal((depth, channels)).astype(np.float32)
        bias = rng.standard_normal(channels).astype(np.float32)
        got = run_layer(device, layer, tile, x, w2d,
                        lambda: device.configure_f32(g, bias, -2.5, 3.0), np.float32)
        reference = np.zeros((rows, channels), np.float32)
        device.reference_f32(g, bias, -2.5, 3.0, x, w2d, reference)
    np.testing.assert_array_equal(got, reference)


def test_struct_entry_with_separate_per_channel_arrays(device):
    """chocolate_configure_s8 itself (the API a hardware team implements): bias, multiplier and
    shift as three separate arrays (CMSIS-NN's per-channel struct) give the packing function's
    [3][channels] table's outputs bit for bit; NULL structs are EINVAL."""
    layer, tile = LAYERS[list(LAYERS)[0]], TILES[0]
    x, w2d, bias, weight_scales = quantized_case(layer, 0)
    table = channel_params(bias, 0.05 * weight_scales, 0.1, layer.oc)
    g, quant = layer.geometry, (-7, 5, -100, 110)  # input_zp, output_zp, act_min, act_max
    packed = run_layer(device, layer, tile, x, w2d, lambda: device.configure_s8(g, -7, table, 5, (-100, 110)), np.int8)
    rows = [np.ascontiguousarray(row) for row in table]
    np.testing.assert_array_equal(
        run_layer(device, layer, tile, x, w2d, lambda: device.configure_s8_structs(g, quant, rows), np.int8), packed)
    fails(device, device.configure_s8_structs(g, quant, [rows[0], None, rows[2]]), "EINVAL",
          "chocolate_configure_s8: bias, multiplier or shift")
    fails(device, device.configure_s8_structs(g, None, rows), "EINVAL",
          "chocolate_configure_s8: conv, quant or per_channel is NULL")
    fails(device, device.configure_s8_structs(g, quant, None), "EINVAL", "conv, quant or per_channel is NULL")
    fails(device, device.configure_f32_structs(None, (None, -1.0, 1.0)), "EINVAL",
          "chocolate_configure_f32: conv or stage is NULL")
    fails(device, device.configure_f32_structs(g, None), "EINVAL", "conv or stage is NULL")


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
        return device.configure_f32(layer.geometry, bias, lo, hi)

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
# The input patch: input rows brought in once, A tiles gathered on chip


def band(layer, m0, tm):
    """The input rows [iy0, iy0 + rows) the output pixels [m0, m0 + tm) read (inside the image)."""
    rows = layer.gemm[0]
    y_lo, y_hi = m0 // layer.ow, (min(m0 + tm, rows) - 1) // layer.ow
    iy0 = max(0, y_lo * layer.stride[0] - layer.pads[0])
    return iy0, min(layer.ih, y_hi * layer.stride[0] - layer.pads[0] + layer.kh) - iy0


def run_layer_patched(dev, layer, tile, x, w2d, configure, out_dtype, per_panel, bpc=8, setup=32):
    """run_layer's loop nest with the A tiles gathered on chip from an input patch: the whole
    input once, or (per_panel) each row panel's band of input rows."""
    rows, channels, depth = layer.gemm
    tm, tn, tk = tile
    a, b, acc = addresses(tile, x.dtype.itemsize)
    p = acc + 4 * tm * tn
    out = np.full((rows, channels), 99, out_dtype)
    assert dev.begin(spad=8192, tile=tile, bpc=bpc, setup=setup) == 0
    assert configure() == 0, dev.last_error()
    statuses = [] if per_panel else [dev.patch(p, x, 0, layer.ih)]
    for m0 in range(0, rows, tm):
        if per_panel:
            statuses.append(dev.patch(p, x, *band(layer, m0, tm)))
        for n0 in range(0, channels, tn):
            statuses.append(dev.zero(acc))
            for k0 in range(0, depth, tk):
                statuses += [dev.im2col_patch(a, p, m0, k0), dev.weights(b, w2d, k0, n0), dev.matmul(a, b, acc)]
            statuses.append(dev.store(out, acc, m0, n0))
    assert not any(statuses), dev.last_error()
    return out


def expected_patched_counters(layer, tile, elem, per_panel, bpc=8, setup=32):
    """run_layer's counters with the im2col DMA replaced: the patches' bytes and transfers in,
    one on-chip gather per A tile (the same cycles as the DMA of that tile)."""
    c = expected_counters(layer, tile, elem, bpc, setup)
    rows, channels, depth = layer.gemm
    tm, tn, tk = tile
    inside = layer.im2col(np.ones((layer.ih, layer.iw, layer.ic), np.int64), 0)
    a_tiles = c["core_calls"]
    patches = [band(layer, m0, tm)[1] for m0 in range(0, rows, tm)] if per_panel else [layer.ih]
    patch_bytes = [r * layer.iw * layer.ic * elem for r in patches]
    c["dma_in_bytes"] += sum(patch_bytes) - elem * -(-channels // tn) * int(inside.sum())
    c["dma_in_calls"] += len(patches) - a_tiles
    c["dma_local_calls"] = a_tiles
    c["dma_cycles"] += sum(setup + -(-n // bpc) for n in patch_bytes)
    c["spad_peak_bytes"] += max(patch_bytes)
    return c


@pytest.mark.parametrize("per_panel", [False, True], ids=["whole", "bands"])
@pytest.mark.parametrize("dtype", ["int8", "float32"])
@pytest.mark.parametrize("layer_name", list(LAYERS))
@pytest.mark.parametrize("tile", TILES, ids=["x".join(map(str, t)) for t in TILES])
def test_patched_layer_equals_the_im2col_dma(device, layer_name, tile, dtype, per_panel):
    """A tiles gathered on chip from the input patch (the whole input, or a band of rows per row
    panel) are the im2col DMA's tiles: the same outputs bit for bit; only the patches' bytes
    cross from the host."""
    layer = LAYERS[layer_name]
    g, elem = layer.geometry, np.dtype(dtype).itemsize
    if dtype == "int8":
        x, w2d, bias, weight_scales = quantized_case(layer, 3 + TILES.index(tile))
        table = channel_params(bias, 0.05 * weight_scales, 0.1, layer.oc)
        configure, out_dtype = (lambda: device.configure_s8(g, -7, table, 5, (-100, 110))), np.int8
    else:
        rng = np.random.default_rng(31 + TILES.index(tile))
        x = rng.standard_normal((layer.ih, layer.iw, layer.ic)).astype(np.float32)
        w2d = rng.standard_normal((layer.gemm[2], layer.oc)).astype(np.float32)
        bias = rng.standard_normal(layer.oc).astype(np.float32)
        configure, out_dtype = (lambda: device.configure_f32(g, bias, -2.5, 3.0)), np.float32
    expected = run_layer(device, layer, tile, x, w2d, configure, out_dtype)
    got = run_layer_patched(device, layer, tile, x, w2d, configure, out_dtype, per_panel)
    np.testing.assert_array_equal(got, expected)
    assert len(np.unique(got)) > 20
    device.shutdown()
    run_layer_patched(device, layer, tile, x, w2d, configure, out_dtype, per_panel)
    assert device.counters() == expected_patched_counters(layer, tile, elem, per_panel)


def test_patch_misuse(device, capfd):
    """Each misuse of the patch entries: its code, one line, nothing changed."""
    src, wts, out = small_layer(device)  # SMALL: 5x5x2 int8 input, 3x3 window, padding 1
    fails(device, device.im2col_patch(0, 64, 0, 0), "EPATCH", "chocolate_im2col_patch: no input patch at 64 since "
          "the layer was configured (chocolate_dma_patch first)")
    fails(device, device.patch(64, None, 0, 1), "EINVAL", "chocolate_dma_patch: input pointer is NULL")
    fails(device, device.patch(64, src, -1, 2), "EBOUNDS", "chocolate_dma_patch: input rows [-1, 1) are not inside "
          "the 5 rows of the input")
    fails(device, device.patch(64, src, 4, 2), "EBOUNDS", "input rows [4, 6)")
    fails(device, device.patch(64, src, 0, 0), "EBOUNDS", "input rows [0, 0)")
    fails(device, device.patch(4090, src, 0, 1), "EADDR", "chocolate_dma_patch: patch tile [4090, 4100) is not in "
          "the 4096-byte scratchpad")
    assert device.counters()["dma_in_calls"] == 0 and device.counters()["spad_peak_bytes"] == 0
    assert device.patch(64, src, 0, 2) == 0  # rows 0 and 1: the first output row's windows
    assert device.counters()["dma_in_bytes"] == 2 * 5 * 2 and device.counters()["dma_in_calls"] == 1
    fails(device, device.im2col_patch(0, 65, 0, 0), "EPATCH", "no input patch at 65")
    fails(device, device.im2col_patch(60, 64, 0, 0), "EOVERLAP", "chocolate_im2col_patch: a tile [60, 76) overlaps "
          "patch tile [64, 84)")
    # pixel 5 is output row 1, column 0; depth 14 its window's row 2, column 1: input row 2
    fails(device, device.im2col_patch(0, 64, 4, 12), "EPATCH", "chocolate_im2col_patch: im2col element (5, 14) reads "
          "input row 2, outside the patch's rows [0, 2)")
    fails(device, device.im2col_patch(0, 64, 25, 0), "EBOUNDS", "tile origin (25, 0) is outside the 25x18 im2col")
    fails(device, device.im2col_patch(4090, 64, 0, 0), "EADDR", "a tile [4090, 4106)")
    assert device.counters()["dma_local_calls"] == 0
    assert device.im2col_patch(0, 64, 0, 0) == 0  # pixels 0..3 of output row 0
    assert device.counters()["dma_local_calls"] == 1 and device.counters()["dma_in_calls"] == 1
    fails(device, device.typed("chocolate_dma_patch_f32", 64, src.astype(np.float32), 0, 1), "EINVAL",
          "chocolate_dma_patch_f32: the layer is configured for int8")
    assert device.typed("chocolate_dma_patch_s8", 64, src, 0, 3) == 0
    assert device.im2col_patch(0, 64, 4, 12) == 0
    small_layer(device, begin=False)  # a new configure forgets the patch
    fails(device, device.im2col_patch(0, 64, 0, 0), "EPATCH", "no input patch at 64")
    assert device.patch(64, src, 0, 5) == 0 and device.begin() == 0  # and so does a new layer
    small_layer(device, begin=False)
    fails(device, device.im2col_patch(0, 64, 0, 0), "EPATCH", "no input patch at 64")


# ---------------------------------------------------------------------------------------------
# Counters


ONE_BY_ONE = Layer(ih=1, iw=3, ic=3, oc=3, kh=1, kw=1)  # rows 3, channels 3, depth 3


@pytest.mark.parametrize("dtype", ["int8", "float32"])
def test_typed_entries_check_the_layer_type(device, dtype):
    """The entries compiled code calls take typed pointers (as TVM declares them) and refuse a
    layer of the other type; those of the layer's type do the untyped entries' work."""
    data, weights, out = small_layer(device, dtype)
    mine, theirs = (TYPED_ENTRIES[:3], TYPED_ENTRIES[3:]) if dtype == "int8" else (TYPED_ENTRIES[3:], TYPED_ENTRIES[:3])
    a, b, acc = addresses((4, 4, 4), 1 if dtype == "int8" else 4)
    other = "int8" if dtype == "float32" else "float32"
    for entry, address, array in zip(theirs, [a, b, acc], [data, weights, out]):
        fails(device, device.typed(entry, address, array, 0, 0), "EINVAL", entry,
              f"the layer is configured for {dtype}")
        assert other not in device.last_error()
    assert device.typed(mine[0], a, data, 0, 0) == 0
    assert device.typed(mine[1], b, weights, 0, 0) == 0
    assert device.zero(acc) == 0 and device.matmul(a, b, acc) == 0
    assert device.typed(mine[2], acc, out, 0, 0) == 0
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
            return device.configure_s8(ONE_BY_ONE.geometry, 0, table)
    else:
        def configure():
            return device.configure_f32(ONE_BY_ONE.geometry, np.float32([1, 2, 3]))
    tile = (2, 2, 2)
    got = run_layer(device, ONE_BY_ONE, tile, x, w2d, configure, dtype, bpc=4, setup=3)
    expected = x.reshape(3, 3).astype(np.int64) @ w2d.astype(np.int64) + [1, 2, 3]
    np.testing.assert_array_equal(got, expected.astype(dtype))
    by_hand = {"layers": 1, "configure_calls": 1, "core_calls": 8, "zero_calls": 4, "macs_issued": 64,
               "macs_useful": 27, "dma_in_calls": 16, "dma_out_calls": 4, "dma_in_bytes": 36 * elem,
               "dma_out_bytes": 9 * elem, "dma_cycles": 16 * (3 + -(-4 * elem // 4)) + 4 * (3 + 4),
               "core_cycles": 16, "spad_peak_bytes": 4 * elem + 4 * elem + 16, "dma_local_calls": 0}
    assert device.counters() == by_hand
    assert expected_counters(ONE_BY_ONE, tile, elem, bpc=4, setup=3) == by_hand


def test_peak_occupancy_counts_distinct_bytes_per_layer(device):
    """Occupancy: bytes written since the layer began, each once however often rewritten (a
    matmul rewrites its accumulators); the peak is the largest over layers."""
    x, w = np.zeros((5, 5, 2), np.int8), np.zeros((18, 3), np.int8)
    table = np.zeros((3, 3), np.int32)
    assert device.begin(spad=4096) == 0
    assert device.configure_s8(SMALL.geometry, 0, table) == 0
    src, wts = x, w
    assert device.im2col(0, src, 0, 0) == 0 and device.im2col(0, src, 4, 0) == 0       # [0, 16) twice
    assert device.weights(8, wts, 0, 0) == 0                                            # [8, 24): 8 new
    assert device.zero(100) == 0 and device.zero(100) == 0                              # [100, 164)
    assert device.matmul(0, 8, 100) == 0
    assert device.counters()["spad_peak_bytes"] == 24 + 64
    assert device.begin(spad=4096) == 0  # a smaller layer
    assert device.configure_s8(SMALL.geometry, 0, table) == 0
    assert device.zero(2000) == 0
    assert device.counters()["spad_peak_bytes"] == 88
    assert device.begin(spad=4096) == 0  # a larger one
    assert device.configure_s8(SMALL.geometry, 0, table) == 0
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
    src = np.full((1, 1, depth), -128, np.int8)
    wts = np.full((depth, 1), -128, np.int8)
    out = np.zeros(1, np.int8)
    for bias, calls, expected in [(0, 511, 127), (0, 512, -128), (0, 516, -127), (2**31 - 1, 1, -128)]:
        table = np.array([[bias], [1 << 30], [-23]], np.int32)
        assert device.configure_s8(layer.geometry, 0, table) == 0
        statuses = [device.zero(512), device.im2col(0, src, 0, 0), device.weights(256, wts, 0, 0)]
        statuses += [device.matmul(0, 256, 512) for _ in range(calls)] + [device.store(out, 512, 0, 0)]
        assert not any(statuses), device.last_error()
        value = int(wrap32(calls * 2**22 + bias))
        assert expected == max(-128, min(127, requantize(value, 1 << 30, -23)))
        assert out[0] == expected, (bias, calls)


def test_configuration_registers_are_a_copy(device):
    """configure copies the table: the host's may change or go away afterwards."""
    layer = ONE_BY_ONE
    x = np.arange(9, dtype=np.int8).reshape(1, 3, 3)
    w2d = np.eye(3, dtype=np.int8)

    def run(a, b, acc, dtype):
        out = np.zeros((3, 3), dtype)
        statuses = [device.zero(acc), device.im2col(a, x.astype(dtype), 0, 0),
                    device.weights(b, w2d.astype(dtype), 0, 0), device.matmul(a, b, acc), device.store(out, acc, 0, 0)]
        assert not any(statuses), device.last_error()
        return out

    assert device.begin(spad=1024, tile=(4, 4, 4)) == 0
    table = np.array([[10, 20, 30], [1 << 30] * 3, [1] * 3], np.int32)
    assert device.configure_s8(layer.geometry, 0, table) == 0
    table[0], table[2] = -100, 3  # the host's table changed, then freed
    del table
    np.testing.assert_array_equal(run(0, 16, 64, np.int8), x.reshape(3, 3) + [10, 20, 30])
    bias = np.float32([0.5, 1.5, 2.5])
    assert device.configure_f32(layer.geometry, bias) == 0
    bias[:] = 100.0
    del bias
    np.testing.assert_array_equal(run(0, 64, 128, np.float32), x.reshape(3, 3) + [0.5, 1.5, 2.5])


def report_lines(text):
    return [line for line in text.splitlines() if line.startswith("chocolate.")]


def test_report(device):
    assert device.begin(spad=2048, tile=(4, 8, 2), bpc=16, setup=5) == 0
    small_layer(device, begin=False)
    assert device.zero(512) == 0
    assert device.printed() == ""  # nothing printed unasked
    device.report()
    printed = device.printed()
    lines = report_lines(printed)
    assert len(lines) == len(printed.splitlines())
    assert [line.split(": ")[0] for line in lines] == [f"chocolate.{key}" for key in CONFIG_KEYS + COUNTERS_KEYS]
    values = {line.split(": ")[0][len("chocolate."):]: int(line.split(": ")[1]) for line in lines}
    assert values == {"spad_bytes": 2048, "tile_m": 4, "tile_n": 8, "tile_k": 2, "dma_bytes_per_cycle": 16,
                      "dma_setup_cycles": 5, **device.counters()}
    assert values["zero_calls"] == 1 and values["configure_calls"] == 1


def assert_alone_clean(done, allowed=()):
    """A run_alone Python passed and no sanitizer said anything (but in lines with an ``allowed``
    fragment); returns its stderr without those."""
    text = "".join(line for line in done.stderr.splitlines(True) if not any(a in line for a in allowed))
    assert done.returncode == 0 and "Sanitizer" not in text and "runtime error" not in text, done.stderr[-6000:]
    return text


# a layer and two zeros, no shutdown: the report at exit has the counters
REPORT_AT_EXIT = f"""
assert dev.begin(spad=4096, tile=(4, 4, 4)) == 0
assert dev.configure_f32({SMALL.geometry}) == 0
assert dev.zero(0) == 0 and dev.zero(64) == 0
print("exiting", file=sys.stderr, flush=True)
"""


@pytest.mark.parametrize("where", ["file", "stderr"])
def test_report_at_exit(chocolate, tmp_path, where):
    """CHOCOLATE_REPORT=path: the counters are appended to that file when the program exits;
    CHOCOLATE_REPORT=1: printed on stderr (a Python of its own: the report comes at its exit)."""
    report = tmp_path / "report.txt"
    report.write_text("an earlier run\n")
    done = run_alone(chocolate, REPORT_AT_EXIT, {"CHOCOLATE_REPORT": str(report) if where == "file" else "1"})
    before, exiting, after = assert_alone_clean(done).partition("exiting\n")
    assert exiting and before == ""  # nothing printed before the exit
    if where == "file":
        assert after == ""
        text = report.read_text()
        assert text.startswith("an earlier run\n")
    else:
        text = after
        assert report.read_text() == "an earlier run\n"
    values = dict(line.split(": ") for line in report_lines(text))
    assert len(values) == len(CONFIG_KEYS + COUNTERS_KEYS)
    assert values["chocolate.spad_bytes"] == "4096" and values["chocolate.tile_k"] == "4"
    assert values["chocolate.zero_calls"] == "2" and values["chocolate.layers"] == "1"


def test_shutdown_and_power_up_again(device):
    assert device.begin(spad=1024) == 0
    small_layer(device, begin=False)
    assert device.zero(0) == 0
    device.shutdown()
    assert set(device.counters().values()) == {0}
    fails(device, device.zero(0), "ENOTREADY", "chocolate_zero")
    assert device.begin(spad=8192, tile=(8, 8, 8)) == 0  # another configuration: a new power-up
    assert device.counters()["layers"] == 1
    small_layer(device, begin=False)
    fails(device, device.store(np.zeros((25, 3), np.int8), 0, 0, 0), "EUNWRITTEN")
    device.shutdown()
    device.shutdown()  # twice is harmless
    fails(device, device.zero(0), "ENOTREADY")


def test_both_completion_paths_are_built(tmp_path):
    """Polling and interrupt completion are different code in the core's file (and both build as
    C99 and C11: the MLF compiles the library with -std=c11; every file: test_board.py)."""
    objects = []
    for std in ("-std=c99", "-std=c11"):
        for define in ([], ["-DCHOCOLATE_COMPLETION_INTERRUPT"]):
            obj = tmp_path / f"chocolate{std}{len(define)}.o"
            done = subprocess.run(["gcc", std, "-Wall", "-Wextra", "-Werror", "-pedantic", f"-I{CHOCOLATE}", f"-I{KIT}",
                                   "-O2", *define, "-c", "-o", str(obj), str(CHOCOLATE / "chocolate_core.c")],
                                  capture_output=True, text=True)
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
    "chocolate_dma_patch": lambda d, s: d.patch(64, s, 0, 1),
    "chocolate_im2col_patch": lambda d, s: d.im2col_patch(0, 64, 0, 0),
}


@pytest.mark.parametrize("entry", list(ENTRIES))
def test_not_ready_before_begin(device, entry):
    host = np.zeros(1024, np.int8)
    fails(device, ENTRIES[entry](device, host), "ENOTREADY", f"{entry}: the device is not powered up")
    assert set(device.counters().values()) == {0}
    np.testing.assert_array_equal(host, 0)


@pytest.mark.parametrize("entry", [e for e in ENTRIES if "configure" not in e])
def test_not_configured(device, entry):
    """Transfers and core calls need this layer's configure: not yet, and not since a new begin."""
    host = np.zeros(1024, np.int8)
    assert device.begin() == 0
    fails(device, ENTRIES[entry](device, host), "ENOTCONFIGURED", f"{entry}: no chocolate_configure_s8/_f32 since "
          "this layer began")
    small_layer(device, begin=False)
    assert device.zero(0) == 0
    assert device.begin() == 0
    before = device.counters()
    fails(device, ENTRIES[entry](device, host), "ENOTCONFIGURED")
    assert device.counters() == before
    np.testing.assert_array_equal(host, 0)


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
    table = np.zeros((3, 3), np.int32)
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
    fails(device, device.configure_s8(SMALL.geometry, 0, None), "EINVAL", "chocolate_configure_s8: bias, multiplier "
          "or shift is NULL")
    fails(device, device.configure_f32([0] * 13), "ELAYER")
    assert device.counters()["configure_calls"] == 1
    assert device.configure_f32(SMALL.geometry, None) == 0  # no bias is fine
    assert device.counters()["configure_calls"] == 2 and device.counters()["macs_useful"] == 2 * 25 * 3 * 18


def test_null_host_pointers(device):
    small_layer(device)
    fails(device, device.im2col(0, None, 0, 0), "EINVAL", "chocolate_dma_im2col: input pointer is NULL")
    fails(device, device.weights(16, None, 0, 0), "EINVAL", "chocolate_dma_weights: weights pointer is NULL")
    assert device.zero(64) == 0
    fails(device, device.store(None, 64, 0, 0), "EINVAL", "chocolate_store: output pointer is NULL")
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
    np.testing.assert_array_equal(out, 7)


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
    np.testing.assert_array_equal(out, 7)


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
    np.testing.assert_array_equal(out, 7)
    assert device.counters()["core_calls"] == device.counters()["dma_out_calls"] == 0
    fails(device, device.im2col(-1, src, 0, 0), "EADDR")  # a refused transfer writes nothing
    fails(device, device.matmul(0, 40, 128), "EUNWRITTEN", "accumulator bytes [128, 192)")


def test_first_listed_code_wins(device):
    """Several problems at once: the code listed first in the header comes back."""
    fails(device, device.im2col(-1, None, -1, -1), "ENOTREADY")
    fails(device, device.configure_s8([0] * 13, 500, None), "ENOTREADY")
    fails(device, device.begin(6, (0, 0, 0), 0, -1), "ECONFIG", "scratchpad size 6")
    assert device.begin() == 0
    fails(device, device.im2col(-1, None, -1, -1), "EINVAL")
    fails(device, device.configure_s8([0] * 13, 500, None), "EINVAL")
    fails(device, device.store(None, -1, -1, -1), "EINVAL")
    fails(device, device.matmul(-1, -1, -1), "ENOTCONFIGURED")
    src, wts, out = small_layer(device, begin=False)
    fails(device, device.im2col(-1, src, -1, 0), "EBOUNDS")
    fails(device, device.store(out, -1, 0, 99), "EBOUNDS")
    fails(device, device.matmul(0, 4094, 1), "EADDR", "b tile")
    fails(device, device.matmul(8, 0, 1), "EADDR", "accumulator tile at 1")
    fails(device, device.matmul(0, 16, 8), "EOVERLAP")  # and nothing written
    fails(device, device.matmul(0, 16, 64), "EUNWRITTEN", "reads a bytes")


# the device refuses the allocations it cannot make, changes nothing, and still works
OUT_OF_MEMORY = f"""
import resource
if not clib.sanitized():  # the address space: what is mapped now and 512 MiB more
    mapped = next(int(line.split()[1]) << 10 for line in open("/proc/self/status") if line.startswith("VmSize:"))
    resource.setrlimit(resource.RLIMIT_AS, (mapped + (512 << 20),) * 2)
assert dev.begin(spad=1 << 30) == CODES["ENOMEM"]
assert set(dev.counters().values()) == {{0}}
assert dev.begin(spad=4096) == 0
huge = [1, 1 << 27, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1]  # 2^27 channels
assert dev.configure_s8(huge, 0, np.zeros((3, 3), np.int32)) == CODES["ENOMEM"]
assert dev.zero(0) == CODES["ENOTCONFIGURED"]
assert dev.configure_f32({SMALL.geometry}) == 0 and dev.zero(0) == 0
"""


def test_out_of_memory(chocolate):
    """The scratchpad model or the configuration registers cannot be allocated (the address space
    limited, or under the sanitizers ASan's largest allocation): ENOMEM, nothing changed, and the
    device still works.  A Python of its own: the limit is the process's."""
    env = {}
    if clib.sanitized():
        env["ASAN_OPTIONS"] = os.environ["ASAN_OPTIONS"] + ":allocator_may_return_null=1:max_allocation_size_mb=512"
    printed = assert_alone_clean(run_alone(chocolate, OUT_OF_MEMORY, env), ["AddressSanitizer failed to allocate"])
    assert printed.splitlines() == [
        "chocolate: chocolate_begin: cannot allocate a 1073741824-byte scratchpad model (CHOCOLATE_ENOMEM)",
        "chocolate: chocolate_configure_s8: cannot allocate 134217728 channels' configuration registers "
        "(CHOCOLATE_ENOMEM)",
        "chocolate: chocolate_zero: no chocolate_configure_s8/_f32 since this layer began (CHOCOLATE_ENOTCONFIGURED)"]
