"""The Vanilla C kernel on its own: built with gcc, compared with a numpy convolution."""
import ctypes
import re
import subprocess

import numpy as np
import pytest



from uma_vanilla.codegen import KERNEL_DIR, KIT_DIR

KERNEL = KERNEL_DIR / "vanilla_accelerator.c"
ENGINE = KIT_DIR / "kit_conv_f32.c"  # the kit's conv engine the entries wrap
# The header's status codes: {"OK": 0, "EINVAL": ..., ...}
STATUS = {m.group(1): int(m.group(2)) for m in re.finditer(
    r"^#define VANILLA_(\w+) (\d+)", KERNEL.with_suffix(".h").read_text(), re.MULTILINE)}


# The library as the host build compiles it (-O2: SSE2, a multiply then an add), with the host's
# vector units and FMA (-O3 -march=native: fmaf, 8 x 16 register blocks on AVX-512), and with odd
# register blocks (3 x 6, half-width kernel of 3 lanes) that leave partial blocks everywhere.
FLAGS = {"O2": ["-O2"], "native": ["-O3", "-march=native"],
         "odd_blocks": ["-O2", "-DKIT_CONV_F32_MR=3", "-DKIT_CONV_F32_NR=6"]}


def build(directory, flags):
    library = directory / "libvanilla.so"
    subprocess.run(["gcc", *flags, "-std=c11", "-shared", "-fPIC", f"-I{KIT_DIR}", "-o", str(library), str(KERNEL),
                    str(ENGINE)], check=True)
    lib = ctypes.CDLL(str(library))
    lib.build_flags = flags
    for layout in ("nchw", "nhwc"):
        for stage in ("", "_bias_clamp", "_clamp"):
            getattr(lib, f"vanilla_conv2d{layout}{stage}").restype = ctypes.c_int32
        getattr(lib, f"vanilla_conv2d{layout}_general").restype = ctypes.c_int32
    return lib


@pytest.fixture(scope="module", params=list(FLAGS))
def vanilla(request, tmp_path_factory):
    return build(tmp_path_factory.mktemp(request.param), FLAGS[request.param])


def _call(lib, ifmap, weights, result):
    pointer = lambda a: a.ctypes.data_as(ctypes.POINTER(ctypes.c_float)) if a is not None else None
    oc, ic, kh, kw = weights.shape if weights is not None else (1, 1, 1, 1)
    ih, iw = ifmap.shape[1:] if ifmap is not None else (1, 1)
    return lib.vanilla_conv2dnchw(pointer(ifmap), pointer(weights), pointer(result), oc, iw, ih, ic, kh, kw)


def numpy_conv_same(ifmap, weights):
    oc, ic, kh, kw = weights.shape
    ph, pw = (kh - 1) // 2, (kw - 1) // 2
    padded = np.pad(ifmap.astype(np.float64), ((0, 0), (ph, ph), (pw, pw)))
    ih, iw = ifmap.shape[1:]
    out = np.zeros((oc, ih, iw))
    for y in range(kh):
        for x in range(kw):
            out += np.einsum("oc,chw->ohw", weights[:, :, y, x], padded[:, y:y + ih, x:x + iw])
    return out


@pytest.mark.parametrize("oc,ic,ih,iw,kh,kw", [
    (1, 1, 1, 1, 1, 1), (4, 3, 8, 8, 3, 3), (8, 5, 7, 11, 5, 3), (3, 2, 4, 6, 1, 7), (16, 16, 9, 9, 7, 7),
])
def test_matches_numpy(vanilla, oc, ic, ih, iw, kh, kw):
    rng = np.random.default_rng(oc * 1000 + ih)
    ifmap = rng.standard_normal((ic, ih, iw)).astype(np.float32)
    weights = rng.standard_normal((oc, ic, kh, kw)).astype(np.float32)
    result = np.full((oc, ih, iw), np.nan, dtype=np.float32)
    assert _call(vanilla, ifmap, weights, result) == 0
    # float32 accumulation of up to 784 products of N(0,1) values vs a float64 reference
    np.testing.assert_allclose(result, numpy_conv_same(ifmap, weights), rtol=1e-5, atol=2e-4)


def test_is_deterministic(vanilla):
    rng = np.random.default_rng(7)
    ifmap = rng.standard_normal((6, 10, 10)).astype(np.float32)
    weights = rng.standard_normal((5, 6, 3, 3)).astype(np.float32)
    first, second = np.empty((5, 10, 10), np.float32), np.empty((5, 10, 10), np.float32)
    _call(vanilla, ifmap, weights, first)
    _call(vanilla, ifmap, weights, second)
    assert first.tobytes() == second.tobytes()


@pytest.mark.parametrize("bias,lo,hi", [(True, 0.0, 6.0), (True, -3.4e38, 3.4e38), (False, 0.0, 3.4e38), (False, -1.0, 0.5)])
def test_output_stage(vanilla, bias, lo, hi):
    rng = np.random.default_rng(5)
    ifmap = rng.standard_normal((3, 6, 5)).astype(np.float32)
    weights = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    result = np.empty((4, 6, 5), np.float32)
    f = lambda a: a.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
    sizes = (4, 5, 6, 3, 3, 3)
    bounds = (ctypes.c_float(lo), ctypes.c_float(hi))
    if bias:
        status = vanilla.vanilla_conv2dnchw_bias_clamp(f(ifmap), f(weights), f(b), f(result), *sizes, *bounds)
    else:
        status = vanilla.vanilla_conv2dnchw_clamp(f(ifmap), f(weights), f(result), *sizes, *bounds)
    assert status == 0
    expected = numpy_conv_same(ifmap, weights) + (b[:, None, None] if bias else 0)
    np.testing.assert_allclose(result, np.clip(expected, lo, hi), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("oc,ic,ih,iw,kh,kw", [
    (1, 1, 1, 1, 1, 1), (6, 3, 5, 9, 3, 3), (24, 96, 16, 16, 1, 1), (13, 64, 12, 70, 3, 5), (5, 7, 4, 3, 7, 1),
])
@pytest.mark.parametrize("stage", ["", "_bias_clamp", "_clamp"])
def test_nhwc_equals_nchw_bit_for_bit(vanilla, oc, ic, ih, iw, kh, kw, stage):
    """The NHWC entries compute exactly what the NCHW ones do on transposed feature maps; the
    shapes cover channel and column tails and reductions too long for one panel (ic*kh*W > 2048)."""
    rng = np.random.default_rng(oc + ic + kh)
    ifmap = rng.standard_normal((ic, ih, iw)).astype(np.float32)
    weights = rng.standard_normal((oc, ic, kh, kw)).astype(np.float32)
    bias = rng.standard_normal(oc).astype(np.float32)
    f = lambda a: a.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
    extra = {"": (), "_bias_clamp": (ctypes.c_float(-0.5), ctypes.c_float(2.0)),
             "_clamp": (ctypes.c_float(0.0), ctypes.c_float(3.4e38))}[stage]
    results = {}
    for layout, data in (("nchw", ifmap), ("nhwc", np.ascontiguousarray(ifmap.transpose(1, 2, 0)))):
        result = np.full((oc, ih, iw) if layout == "nchw" else (ih, iw, oc), np.nan, np.float32)
        args = [f(data), f(weights)] + ([f(bias)] if stage == "_bias_clamp" else []) + [f(result)]
        assert getattr(vanilla, f"vanilla_conv2d{layout}{stage}")(*args, oc, iw, ih, ic, kh, kw, *extra) == 0
        results[layout] = result
    assert results["nhwc"].transpose(2, 0, 1).tobytes() == results["nchw"].tobytes()
    if stage == "":
        np.testing.assert_allclose(results["nchw"], numpy_conv_same(ifmap, weights), rtol=1e-5, atol=5e-4)


def test_rejects_what_it_cannot_compute(vanilla):
    ifmap = np.ones((1, 4, 4), np.float32)
    result = np.full((1, 4, 4), 5.0, np.float32)
    assert _call(vanilla, ifmap, np.ones((1, 1, 2, 2), np.float32), result) == STATUS["EEVEN"]
    assert _call(vanilla, None, np.ones((1, 1, 3, 3), np.float32), result) == STATUS["EINVAL"]  # NULL ifmap
    f = lambda a: a.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
    w = np.ones((1, 1, 3, 3), np.float32)
    bounds = (ctypes.c_float(1.0), ctypes.c_float(0.0))  # lo > hi
    assert vanilla.vanilla_conv2dnchw_clamp(f(ifmap), f(w), f(result), 1, 4, 4, 1, 3, 3, *bounds) == STATUS["ECLAMP"]
    no_bias = vanilla.vanilla_conv2dnchw_bias_clamp(f(ifmap), f(w), None, f(result), 1, 4, 4, 1, 3, 3,
                                                   ctypes.c_float(0.0), ctypes.c_float(1.0))
    assert no_bias == STATUS["EINVAL"]
    assert vanilla.vanilla_conv2dnhwc(f(ifmap), f(w), None, 1, 4, 4, 1, 3, 3) == STATUS["EINVAL"]  # NULL result
    assert np.all(result == 5.0), "result must be untouched on error"


def numpy_conv(ifmap, weights, oh, ow, stride, pad):
    """float64 convolution; output (y, x) reads input rows y*sh - pt + ky, zero outside."""
    (sh, sw), (pt, pl) = stride, pad
    oc, ic, kh, kw = weights.shape
    ih, iw = ifmap.shape[1:]
    bottom, right = max(0, (oh - 1) * sh + kh - pt - ih), max(0, (ow - 1) * sw + kw - pl - iw)
    padded = np.pad(ifmap.astype(np.float64), ((0, 0), (pt, bottom), (pl, right)))
    out = np.zeros((oc, oh, ow))
    for y in range(kh):
        for x in range(kw):
            window = padded[:, y:y + (oh - 1) * sh + 1:sh, x:x + (ow - 1) * sw + 1:sw]
            out += np.einsum("oc,chw->ohw", weights[:, :, y, x], window)
    return out


def general(lib, layout, ifmap, weights, out_hw, stride=(1, 1), pad=(0, 0), bias=None, residual=None,
            slope=None, lo=-3.4e38, hi=3.4e38):
    """Calls vanilla_conv2d<layout>_general on NCHW-shaped numpy arrays; returns (status, NCHW result)."""
    to_layout = (lambda a: np.ascontiguousarray(a.transpose(1, 2, 0))) if layout == "nhwc" else (lambda a: a)
    f = lambda a: None if a is None else a.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
    oc, ic, kh, kw = weights.shape
    (ih, iw), (oh, ow) = ifmap.shape[1:], out_hw
    data, skip = to_layout(ifmap), None if residual is None else to_layout(residual)
    result = to_layout(np.full((oc, oh, ow), np.nan, np.float32))
    status = getattr(lib, f"vanilla_conv2d{layout}_general")(
        f(data), f(weights), f(bias), f(skip), f(slope), f(result), oc, iw, ih, ic, kh, kw, ow, oh,
        stride[1], stride[0], pad[1], pad[0], ctypes.c_float(lo), ctypes.c_float(hi))
    return status, result.transpose(2, 0, 1) if layout == "nhwc" else result


# (oc, ic, ih, iw, kh, kw, stride, pad top/left, pad bottom/right): MTCNN's "valid" 3x3,
# ONNX/TFLite's asymmetric "same" of stride 2, 1x1 stride 2, wide kernels, pads beyond the kernel.
WINDOWS = [
    (10, 3, 12, 12, 3, 3, (1, 1), (0, 0), (0, 0)),
    (16, 10, 11, 11, 3, 3, (1, 1), (0, 0), (0, 0)),
    (8, 4, 9, 10, 3, 3, (2, 2), (0, 0), (1, 1)),
    (8, 4, 9, 10, 3, 3, (2, 2), (1, 1), (1, 1)),
    (24, 16, 16, 16, 1, 1, (2, 2), (0, 0), (0, 0)),
    (5, 7, 13, 40, 10, 4, (2, 1), (4, 1), (5, 2)),
    (6, 2, 7, 9, 2, 2, (1, 3), (0, 1), (1, 0)),
    (3, 5, 5, 6, 3, 3, (1, 1), (3, 4), (3, 4)),
    (33, 40, 20, 21, 5, 5, (3, 3), (2, 2), (2, 2)),
    (12, 40, 49, 1, 9, 1, (2, 1), (3, 0), (4, 0)),  # one column, as keyword spotting's audio
    # NCHW rows that fill the lanes (a multiple of 16, or 64 and more), at stride 1 and 2
    (10, 6, 12, 32, 3, 3, (1, 1), (1, 1), (1, 1)),
    (9, 5, 11, 64, 3, 3, (2, 2), (1, 1), (1, 1)),
    # output channel tails: 8 (the half-width kernel), 12, 24 (a whole block and a half), 40
    (8, 7, 6, 6, 3, 3, (1, 1), (1, 1), (1, 1)),
    (12, 5, 5, 7, 3, 3, (1, 1), (1, 1), (1, 1)),
    (24, 6, 7, 5, 3, 3, (1, 1), (0, 0), (0, 0)),
    (40, 3, 4, 9, 1, 1, (1, 1), (0, 0), (0, 0)),
    # many channels on a wide row: the input window of a whole row does not fit, tiles of columns
    (20, 40, 5, 300, 3, 3, (1, 1), (1, 1), (1, 1)),
    # strides wider than the kernel (each pixel's window on its own), with padding
    (6, 4, 9, 10, 1, 1, (2, 2), (1, 1), (1, 1)),
    (7, 3, 13, 17, 3, 3, (4, 4), (1, 2), (1, 1)),
]


@pytest.mark.parametrize("oc,ic,ih,iw,kh,kw,stride,pad,pad_end", WINDOWS)
def test_general_window_matches_numpy_in_both_layouts(vanilla, oc, ic, ih, iw, kh, kw, stride, pad, pad_end):
    rng = np.random.default_rng(oc * 31 + ic)
    ifmap = rng.standard_normal((ic, ih, iw)).astype(np.float32)
    weights = rng.standard_normal((oc, ic, kh, kw)).astype(np.float32)
    oh = (ih + pad[0] + pad_end[0] - kh) // stride[0] + 1
    ow = (iw + pad[1] + pad_end[1] - kw) // stride[1] + 1
    results = {}
    for layout in ("nchw", "nhwc"):
        status, results[layout] = general(vanilla, layout, ifmap, weights, (oh, ow), stride, pad)
        assert status == 0
    assert results["nhwc"].tobytes() == results["nchw"].tobytes()
    np.testing.assert_allclose(results["nchw"], numpy_conv(ifmap, weights, oh, ow, stride, pad), rtol=1e-5, atol=5e-4)


# (oc, ic, ih, iw, kh, kw, stride, pad): each engine and its whole and partial register blocks
STAGE_SHAPES = [
    (12, 5, 10, 32, 3, 3, (1, 1), (1, 1)),   # NCHW rows of 32: output channels in rows, pixels in lanes
    (40, 6, 9, 11, 3, 3, (1, 1), (1, 1)),    # output channels in lanes (16 + 16 + 8), zero-padded panel
    (21, 9, 12, 12, 1, 1, (1, 1), (0, 0)),   # 1x1: the input read in place
    (33, 40, 9, 10, 3, 3, (2, 1), (1, 1)),   # reductions in chunks, partial sums through the result
]


@pytest.mark.parametrize("oc,ic,ih,iw,kh,kw,stride,pad", STAGE_SHAPES)
def test_whole_output_stage_agrees_in_both_layouts(vanilla, oc, ic, ih, iw, kh, kw, stride, pad):
    """Bias, residual, PReLU and clamp together on shapes whose blocks are whole and partial."""
    rng = np.random.default_rng(oc + ic)
    ifmap = rng.standard_normal((ic, ih, iw)).astype(np.float32)
    weights = rng.standard_normal((oc, ic, kh, kw)).astype(np.float32)
    oh, ow = (ih + 2 * pad[0] - kh) // stride[0] + 1, (iw + 2 * pad[1] - kw) // stride[1] + 1
    bias, slope = rng.standard_normal(oc).astype(np.float32), rng.uniform(0.05, 0.5, oc).astype(np.float32)
    residual = rng.standard_normal((oc, oh, ow)).astype(np.float32)
    results = {}
    for layout in ("nchw", "nhwc"):
        status, results[layout] = general(vanilla, layout, ifmap, weights, (oh, ow), stride, pad, bias=bias,
                                          residual=residual, slope=slope, lo=-2.0, hi=3.0)
        assert status == 0
    assert results["nhwc"].tobytes() == results["nchw"].tobytes()
    v = numpy_conv(ifmap, weights, oh, ow, stride, pad) + bias[:, None, None] + residual
    expected = np.clip(np.where(v < 0, v * slope[:, None, None], v), -2.0, 3.0)
    np.testing.assert_allclose(results["nchw"], expected, rtol=1e-5, atol=5e-4)


def test_results_do_not_depend_on_the_register_blocks(vanilla, tmp_path):
    """Every output sums its products in one order whatever the tiling: the library built with
    other register blocks (and so other tiles and chunks) gives the same bits."""
    other = build(tmp_path, [f for f in vanilla.build_flags if not f.startswith("-D")] + ["-DKIT_CONV_F32_MR=5",
                                                                                          "-DKIT_CONV_F32_NR=10"])
    rng = np.random.default_rng(2)
    for oc, ic, ih, iw, kh, kw, stride, pad in STAGE_SHAPES + [(16, 24, 13, 40, 5, 5, (1, 1), (2, 2))]:
        ifmap = rng.standard_normal((ic, ih, iw)).astype(np.float32)
        weights = rng.standard_normal((oc, ic, kh, kw)).astype(np.float32)
        oh, ow = (ih + 2 * pad[0] - kh) // stride[0] + 1, (iw + 2 * pad[1] - kw) // stride[1] + 1
        channels = rng.standard_normal((oc, ih, iw)).astype(np.float32)  # a depthwise conv's input
        for layout in ("nchw", "nhwc"):
            ours, theirs = (general(lib, layout, ifmap, weights, (oh, ow), stride, pad)[1] for lib in (vanilla, other))
            assert ours.tobytes() == theirs.tobytes(), (layout, oc, ic, ih, iw, kh, kw)
            ours, theirs = (depthwise(lib, layout, channels, weights[:, 0], (oh, ow), stride, pad)[1]
                            for lib in (vanilla, other))
            assert ours.tobytes() == theirs.tobytes(), ("depthwise", layout, oc, ih, iw, kh, kw)


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_general_output_stage_with_prelu(vanilla, layout):
    rng = np.random.default_rng(11)
    ifmap = rng.standard_normal((6, 9, 9)).astype(np.float32)
    weights = rng.standard_normal((5, 6, 3, 3)).astype(np.float32)
    bias, slope = rng.standard_normal(5).astype(np.float32), rng.uniform(0.05, 0.5, 5).astype(np.float32)
    residual = rng.standard_normal((5, 7, 7)).astype(np.float32)
    conv = numpy_conv(ifmap, weights, 7, 7, (1, 1), (0, 0)) + bias[:, None, None] + residual
    prelu = np.where(conv < 0, conv * slope[:, None, None], conv)
    status, got = general(vanilla, layout, ifmap, weights, (7, 7), bias=bias, residual=residual, slope=slope, hi=4.0)
    assert status == 0
    np.testing.assert_allclose(got, np.minimum(prelu, 4.0), rtol=1e-5, atol=5e-4)
    assert (got < 0).any() and (got == 4.0).any(), "the test must exercise both the slope and the clamp"


def test_general_rejects_bad_windows(vanilla):
    ifmap, weights = np.ones((1, 4, 4), np.float32), np.ones((1, 1, 3, 3), np.float32)
    for code, bad in [("ESTRIDE", dict(stride=(0, 1))), ("EPAD", dict(pad=(-1, 0))), ("ESIZE", dict(out_hw=(0, 2))),
                      ("ECLAMP", dict(lo=1.0, hi=0.0)), ("ERANGE", dict(out_hw=(3, 2), stride=(2**30, 1)))]:
        args = {"out_hw": (2, 2), **bad}
        status, result = general(vanilla, "nchw", ifmap, weights, **args)
        assert status == STATUS[code], bad
        assert np.isnan(result).all(), "result must be untouched on error"


def depthwise(lib, layout, ifmap, weights, out_hw, stride=(1, 1), pad=(0, 0), bias=None, lo=-3.4e38, hi=3.4e38):
    """Calls vanilla_depthwise_conv2d<layout> on NCHW-shaped arrays (weights [c][kh][kw]); returns (status, NCHW result)."""
    to_layout = (lambda a: np.ascontiguousarray(a.transpose(1, 2, 0))) if layout == "nhwc" else (lambda a: a)
    f = lambda a: None if a is None else a.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
    channels, kh, kw = weights.shape
    (ih, iw), (oh, ow) = ifmap.shape[1:], out_hw
    data, result = to_layout(ifmap), to_layout(np.full((channels, oh, ow), np.nan, np.float32))
    entry = getattr(lib, f"vanilla_depthwise_conv2d{layout}")
    entry.restype = ctypes.c_int32
    status = entry(f(data), f(weights), f(bias), None, None, f(result), channels, iw, ih, kh, kw, ow, oh,
                   stride[1], stride[0], pad[1], pad[0], ctypes.c_float(lo), ctypes.c_float(hi))
    return status, result.transpose(2, 0, 1) if layout == "nhwc" else result


# (channels, ih, iw, kh, kw, stride, pad top/left, pad bottom/right): BlazeFace's 3x3 "same" and
# stride-2 (pads 0/1) shapes, channel tails (< 8, not a multiple of 8, > one 64-channel chunk), 5x5, 7x7.
DEPTHWISE = [
    (24, 16, 16, 3, 3, (1, 1), (1, 1), (1, 1)),
    (28, 16, 16, 3, 3, (2, 2), (0, 0), (1, 1)),
    (3, 9, 11, 5, 5, (1, 1), (2, 2), (2, 2)),
    (150, 8, 7, 3, 3, (1, 1), (0, 0), (0, 0)),
    (16, 20, 50, 7, 7, (2, 3), (3, 2), (3, 4)),
    (9, 4, 70, 1, 3, (1, 1), (0, 1), (0, 1)),
    # stride 2 with a left pad (a row's two phases start on an odd column), 5x5 of stride 2
    (28, 17, 17, 3, 3, (2, 2), (1, 1), (1, 1)),
    (20, 9, 31, 5, 5, (2, 2), (2, 2), (2, 2)),
    # strides wider than the kernel, and a 1x1 of stride 2
    (12, 10, 13, 3, 3, (3, 4), (1, 1), (1, 1)),
    (10, 9, 9, 1, 1, (2, 2), (0, 0), (0, 0)),
    # 40 channels (16 + 16 + 8), too many channels for one panel (groups), a row wider than a panel
    (40, 6, 7, 3, 3, (1, 1), (1, 1), (1, 1)),
    (300, 5, 6, 3, 3, (1, 1), (1, 1), (1, 1)),
    (16, 4, 300, 3, 3, (1, 1), (1, 1), (1, 1)),
    (5, 3, 200, 3, 3, (1, 2), (1, 1), (1, 1)),
    # one column, as keyword spotting's audio (read as one row), at stride 1 and 2
    (24, 49, 1, 9, 1, (1, 1), (4, 0), (4, 0)),
    (20, 98, 1, 9, 1, (2, 1), (3, 0), (4, 0)),
]


@pytest.mark.parametrize("channels,ih,iw,kh,kw,stride,pad,pad_end", DEPTHWISE)
def test_depthwise_matches_numpy_in_both_layouts(vanilla, channels, ih, iw, kh, kw, stride, pad, pad_end):
    rng = np.random.default_rng(channels + iw)
    ifmap = rng.standard_normal((channels, ih, iw)).astype(np.float32)
    weights = rng.standard_normal((channels, kh, kw)).astype(np.float32)
    bias = rng.standard_normal(channels).astype(np.float32)
    oh = (ih + pad[0] + pad_end[0] - kh) // stride[0] + 1
    ow = (iw + pad[1] + pad_end[1] - kw) // stride[1] + 1
    results = {}
    for layout in ("nchw", "nhwc"):
        status, results[layout] = depthwise(vanilla, layout, ifmap, weights, (oh, ow), stride, pad, bias, lo=-1.0, hi=2.0)
        assert status == 0
    assert results["nhwc"].tobytes() == results["nchw"].tobytes()
    expected = np.stack([numpy_conv(ifmap[c:c + 1], weights[c][None, None], oh, ow, stride, pad)[0]
                         for c in range(channels)]) + bias[:, None, None]
    np.testing.assert_allclose(results["nchw"], np.clip(expected, -1.0, 2.0), rtol=1e-5, atol=1e-5)


def test_depthwise_rejects_kernels_above_its_window_buffer(vanilla):
    ifmap, weights = np.ones((2, 12, 12), np.float32), np.ones((2, 9, 9), np.float32)  # 81 taps > 64
    status, result = depthwise(vanilla, "nhwc", ifmap, weights, (4, 4))
    assert status == STATUS["ETAPS"] and np.isnan(result).all()
