"""Vanilla's C library through the calls generated code makes (the flat entries of
vanilla_accelerator.c) against numpy: windows outside the image on every side, every output
stage, pads as large as an int, a scratch of exactly _get_buffer_size bytes, and each bad argument
with its code.  Each call gets arrays of exactly their size: under ``clib.run_sanitized``
(test_vanilla_sanitized.py) a read or write one element past any of them is reported."""
import numpy as np
import pytest

from vanilla_c import FLAGS, FLT_MAX, STATUS, build, buffer_size, flat, flat_conv

INT_MAX, INT_MIN = 2**31 - 1, -2**31
NAN = float("nan")


@pytest.fixture(scope="module", params=list(FLAGS))
def vanilla(request, tmp_path_factory):
    return build(tmp_path_factory.mktemp(request.param), FLAGS[request.param])


def numpy_conv(ifmap, weights, oh, ow, stride, pad):
    """float64 [oc][oh][ow]: output (y, x) reads input (y*sh - pt + ky, x*sw - pl + kx), zero outside."""
    (sh, sw), (pt, pl) = stride, pad
    oc, ic, kh, kw = weights.shape
    ih, iw = ifmap.shape[1:]
    padded = np.zeros((ic, pt + max(ih, (oh - 1) * sh + kh), pl + max(iw, (ow - 1) * sw + kw)))
    padded[:, pt:pt + ih, pl:pl + iw] = ifmap
    out = np.zeros((oc, oh, ow))
    for y in range(kh):
        for x in range(kw):
            window = padded[:, y:y + (oh - 1) * sh + 1:sh, x:x + (ow - 1) * sw + 1:sw]
            out += np.einsum("oc,chw->ohw", weights[:, :, y, x].astype(np.float64), window)
    return out


def numpy_depthwise(ifmap, weights, oh, ow, stride, pad):
    return np.stack([numpy_conv(ifmap[c:c + 1], weights[c][None, None], oh, ow, stride, pad)[0]
                     for c in range(weights.shape[0])])


def numpy_stage(conv, bias=None, residual=None, slope=None, lo=-FLT_MAX, hi=FLT_MAX):
    v = conv + (0 if bias is None else bias[:, None, None]) + (0 if residual is None else residual)
    if slope is not None:
        v = np.where(v < 0, v * slope[:, None, None], v)
    return np.clip(v, lo, hi)


def output_size(size, kernel, stride, pad, pad_end):
    return (size + pad + pad_end - kernel) // stride + 1


def assert_computed(call, expected):
    """``call`` = (status, result) computed ``expected``."""
    status, got = call
    assert status == STATUS["OK"]
    scale = max(1.0, float(np.max(np.abs(expected))))
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=2e-5 * scale)


# (oc, ic, ih, iw, kh, kw, stride, pad top/left, pad bottom/right)
WINDOWS = [
    (1, 1, 1, 1, 1, 1, (1, 1), (0, 0), (0, 0)),
    (4, 3, 8, 8, 3, 3, (1, 1), (1, 1), (1, 1)),             # "same"
    (3, 5, 5, 6, 3, 3, (1, 1), (4, 5), (4, 5)),             # pads beyond the kernel on every side
    (2, 3, 4, 5, 3, 3, (1, 1), (1, 100), (1, 3)),           # a left pad far beyond the tile: rows all zero
    (2, 3, 4, 5, 3, 3, (2, 3), (100, 37), (2, 40)),         # the same, strided; whole rows outside above
    (6, 2, 7, 150, 3, 5, (1, 1), (2, 2), (2, 2)),           # several column tiles with padding at both ends
    (5, 3, 9, 150, 2, 5, (2, 3), (1, 4), (0, 6)),           # the same, strided
    (8, 4, 9, 10, 3, 3, (2, 2), (0, 0), (1, 1)),            # asymmetric "same" of stride 2
    (5, 7, 13, 40, 10, 4, (2, 1), (4, 1), (5, 2)),
    (6, 2, 7, 9, 2, 2, (1, 3), (0, 1), (1, 0)),
    (33, 40, 20, 21, 5, 5, (3, 3), (2, 2), (2, 2)),         # reductions longer than one panel
    (12, 40, 49, 1, 9, 1, (2, 1), (3, 0), (4, 0)),          # one column (audio)
    (3, 2, 30, 1, 3, 1, (1, 1), (5, 0), (6, 0)),            # one column, padding beyond the kernel
    (24, 16, 16, 16, 1, 1, (1, 1), (0, 0), (0, 0)),         # 1x1: one long row (NCHW), matrix product (NHWC)
    (13, 70, 5, 7, 1, 1, (1, 1), (0, 0), (0, 0)),           # 1x1 with channel tails
    (9, 5, 6, 7, 1, 1, (1, 1), (2, 1), (2, 3)),             # 1x1 with padding: border outputs read only zeros
    (24, 16, 16, 16, 1, 1, (2, 2), (0, 0), (0, 0)),
    (2, 2, 2, 2100, 1, 2000, (1, 1), (0, 3), (0, 3)),       # kernel wider than a panel: column chunks
    (10, 6, 12, 32, 3, 3, (1, 1), (1, 1), (1, 1)),          # NCHW rows that fill the lanes, stride 1 and 2
    (9, 5, 11, 64, 3, 3, (2, 2), (1, 1), (1, 1)),
    (8, 7, 6, 6, 3, 3, (1, 1), (1, 1), (1, 1)),             # output channel tails: the half-width kernel,
    (12, 5, 5, 7, 3, 3, (1, 1), (1, 1), (1, 1)),            # a padded one, a whole block and a half
    (24, 6, 7, 5, 3, 3, (1, 1), (0, 0), (0, 0)),
    (40, 30, 4, 9, 3, 3, (1, 1), (1, 1), (1, 1)),           # ... with the reduction in chunks
    (20, 40, 5, 300, 3, 3, (1, 1), (1, 1), (1, 1)),         # a row's window too large: tiles of columns
    (6, 4, 9, 10, 1, 1, (2, 2), (1, 1), (1, 1)),            # strides wider than the kernel, padded
    (7, 3, 13, 17, 3, 3, (4, 4), (1, 2), (1, 1)),
    (3, 2, 5, 4, 3, 300, (1, 1), (1, 150), (1, 150)),       # a window wider than the kernels' reduction
]


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_windows_outside_the_image(vanilla, layout):
    """Rows and columns outside the input on every side, strides, tiles, 1x1 and one-column paths."""
    for i, (oc, ic, ih, iw, kh, kw, stride, pad, pad_end) in enumerate(WINDOWS):
        rng = np.random.default_rng(i)
        ifmap = rng.standard_normal((ic, ih, iw)).astype(np.float32)
        weights = rng.standard_normal((oc, ic, kh, kw)).astype(np.float32)
        oh, ow = (output_size(*a) for a in zip((ih, iw), (kh, kw), stride, pad, pad_end))
        assert_computed(flat_conv(vanilla, layout, ifmap, weights, (oh, ow), stride, pad),
                        numpy_conv(ifmap, weights, oh, ow, stride, pad))


STAGES = [dict(), dict(bias=True), dict(residual=True), dict(slope=True), dict(lo=0.0, hi=6.0),
          dict(bias=True, residual=True, slope=True, lo=-1.0, hi=2.0), dict(bias=True, slope=True, lo=-0.5)]


@pytest.mark.parametrize("shape", [(10, 7, 9, 3, (2, 1), (1, 2)), (40, 11, 32, 3, (1, 1), (1, 1))],
                         ids=["small", "blocks"])
@pytest.mark.parametrize("depthwise", [False, True], ids=["conv", "depthwise"])
@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_every_output_stage(vanilla, layout, depthwise, shape):
    """Bias, residual and PReLU slope each present or NULL, with and without a clamp, on a small
    map and on one of whole and partial register blocks."""
    rng = np.random.default_rng(3)
    c, ih, iw, k, stride, pad = shape
    ifmap = rng.standard_normal((c, ih, iw)).astype(np.float32)
    weights = rng.standard_normal((c, k, k) if depthwise else (c, c, k, k)).astype(np.float32)
    oh, ow = output_size(ih, k, stride[0], pad[0], pad[0]), output_size(iw, k, stride[1], pad[1], pad[1])
    conv = (numpy_depthwise if depthwise else numpy_conv)(ifmap, weights, oh, ow, stride, pad)
    for stage in STAGES:
        parts = dict(bias=rng.standard_normal(c).astype(np.float32) if stage.get("bias") else None,
                     residual=rng.standard_normal((c, oh, ow)).astype(np.float32) if stage.get("residual") else None,
                     slope=rng.uniform(0.05, 0.5, c).astype(np.float32) if stage.get("slope") else None,
                     lo=stage.get("lo", -FLT_MAX), hi=stage.get("hi", FLT_MAX))
        assert_computed(flat_conv(vanilla, layout, ifmap, weights, (oh, ow), stride, pad, depthwise=depthwise, **parts),
                        numpy_stage(conv, **parts))


# (channels, ih, iw, kh, kw, stride, pad top/left, pad bottom/right)
DEPTHWISE = [
    (24, 16, 16, 3, 3, (1, 1), (1, 1), (1, 1)),
    (28, 16, 16, 3, 3, (2, 2), (0, 0), (1, 1)),
    (3, 9, 11, 5, 5, (1, 1), (6, 7), (6, 7)),               # pads beyond the kernel
    (150, 8, 7, 3, 3, (1, 1), (0, 0), (0, 0)),              # channel blocks with a tail
    (16, 20, 50, 7, 7, (2, 3), (3, 2), (3, 4)),
    (9, 4, 70, 1, 3, (1, 1), (0, 100), (0, 1)),             # a left pad far beyond the tile
    (5, 6, 6, 8, 8, (1, 1), (7, 7), (7, 7)),                # 64 taps, the window buffer's limit
    (4, 3, 80, 1, 64, (1, 2), (0, 30), (0, 30)),
    (4, 80, 3, 64, 1, (3, 1), (40, 0), (2, 0)),
    (28, 17, 17, 3, 3, (2, 2), (1, 1), (1, 1)),             # stride 2, a row's phases starting on odd columns
    (20, 9, 31, 5, 5, (2, 2), (2, 2), (2, 2)),
    (12, 10, 13, 3, 3, (3, 4), (1, 1), (1, 1)),             # strides wider than the kernel
    (10, 9, 9, 1, 1, (2, 2), (0, 0), (0, 0)),
    (40, 6, 7, 3, 3, (1, 1), (1, 1), (1, 1)),               # channel blocks of 16 + 16 + 8
    (300, 5, 6, 3, 3, (1, 1), (1, 1), (1, 1)),              # too many channels for one panel: groups
    (16, 4, 300, 3, 3, (1, 1), (1, 1), (1, 1)),             # a row too wide for one panel: tiles
    (5, 3, 200, 3, 3, (1, 2), (1, 1), (1, 1)),
    (24, 49, 1, 9, 1, (1, 1), (4, 0), (4, 0)),              # one column (audio), read as one row
    (20, 98, 1, 9, 1, (2, 1), (3, 0), (4, 0)),
    (3, 30, 1, 5, 1, (1, 1), (6, 0), (7, 0)),
]


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_depthwise_windows_outside_the_image(vanilla, layout):
    for i, (c, ih, iw, kh, kw, stride, pad, pad_end) in enumerate(DEPTHWISE):
        rng = np.random.default_rng(100 + i)
        ifmap = rng.standard_normal((c, ih, iw)).astype(np.float32)
        weights = rng.standard_normal((c, kh, kw)).astype(np.float32)
        bias = rng.standard_normal(c).astype(np.float32)
        oh, ow = (output_size(*a) for a in zip((ih, iw), (kh, kw), stride, pad, pad_end))
        assert_computed(flat_conv(vanilla, layout, ifmap, weights, (oh, ow), stride, pad, bias, lo=-1.0, hi=2.0,
                                  depthwise=True),
                        numpy_stage(numpy_depthwise(ifmap, weights, oh, ow, stride, pad), bias, lo=-1.0, hi=2.0))


@pytest.mark.parametrize("depthwise", [False, True], ids=["conv", "depthwise"])
@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_pads_as_large_as_an_int(vanilla, layout, depthwise):
    """Every window entirely in the padding (left, top, or right/bottom far past the image): the
    output is the output stage of zero, and no index or pointer leaves its tensor."""
    rng = np.random.default_rng(8)
    c, ih, iw, k = 3, 4, 5, 3
    ifmap = rng.standard_normal((c, ih, iw)).astype(np.float32)
    weights = rng.standard_normal((c, k, k) if depthwise else (c, c, k, k)).astype(np.float32)
    bias = rng.standard_normal(c).astype(np.float32)
    windows = [((2, 3), (1, 1), (0, INT_MAX)), ((3, 2), (2, 1), (INT_MAX, 0)), ((2, 2), (3, 5), (INT_MAX, INT_MAX)),
               ((70, 1), (1, 1), (INT_MAX - 5, 0)),
               ((2, 2), (2**29, 2**29), (0, 0))]  # no padding, but the second row and column are 2^29 away
    first = (numpy_depthwise if depthwise else numpy_conv)(ifmap, weights, 1, 1, (1, 1), (0, 0))[:, 0, 0]
    for out_hw, stride, pad in windows:
        expected = np.broadcast_to(bias[:, None, None], (c, *out_hw)).copy()
        if pad == (0, 0):  # only the first output reads the image
            expected[:, 0, 0] += first
        assert_computed(flat_conv(vanilla, layout, ifmap, weights, out_hw, stride, pad, bias, depthwise=depthwise),
                        expected)


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_scratch_of_exactly_get_buffer_size(vanilla, layout):
    """Each call with a scratch of exactly its entry's _get_buffer_size (the sanitized run sees any
    byte beyond it) computes; one byte less is VANILLA_EBUFFER, the output untouched."""
    shapes = [(*window[:-1], depthwise) for window in WINDOWS[::3] for depthwise in (False, True)
              if not depthwise or window[4] * window[5] <= 64]
    sizes = set()
    for i, (oc, ic, ih, iw, kh, kw, stride, pad, depthwise) in enumerate(shapes):
        rng = np.random.default_rng(200 + i)
        ifmap = rng.standard_normal((oc if depthwise else ic, ih, iw)).astype(np.float32)
        weights = rng.standard_normal((oc, kh, kw) if depthwise else (oc, ic, kh, kw)).astype(np.float32)
        oh, ow = (output_size(*a) for a in zip((ih, iw), (kh, kw), stride, pad, pad))
        g = dict(ic=ifmap.shape[0], ih=ih, iw=iw, oc=oc, oh=oh, ow=ow, kh=kh, kw=kw, stride_h=stride[0],
                 stride_w=stride[1], pad_top=pad[0], pad_left=pad[1])
        size = buffer_size(vanilla, layout, g, depthwise)
        sizes.add(size)
        assert_computed(flat_conv(vanilla, layout, ifmap, weights, (oh, ow), stride, pad, depthwise=depthwise,
                                  scratch=size),
                        (numpy_depthwise if depthwise else numpy_conv)(ifmap, weights, oh, ow, stride, pad))
        status, result = flat_conv(vanilla, layout, ifmap, weights, (oh, ow), stride, pad, depthwise=depthwise,
                                   scratch=size - 1)
        assert status == STATUS["EBUFFER"] and np.isnan(result).all()
    assert min(sizes) > 0 and len(sizes) > 1, sizes


def one():
    """A one-element array: a call rejected before it reads or writes must leave it alone (the
    sanitized run reports any access past it)."""
    return np.full(1, np.nan, np.float32)


def vanilla_errors(lib):
    """(expected code name, layout, depthwise, arrays, ints, (lo, hi), scratch bytes) for each kind
    of bad argument of every flat entry, on a geometry whose scratch is ``lib``'s _get_buffer_size."""
    base = dict(oc=2, iw=4, ih=4, ic=3, kh=3, kw=3, ow=2, oh=2, sw=1, sh=1, pl=0, pt=0)
    cases = []

    def add(code, family, arrays=None, floats=(-FLT_MAX, FLT_MAX), scratch=None, **changed):
        g = dict(base, **changed)
        pointers = dict(ifmap=one(), weights=one(), bias=None, residual=None, slope=None, result=one())
        pointers.update(arrays or {})
        depthwise = family == "depthwise"
        sizes = ["oc", "ih", "iw"] if depthwise else ["ic", "ih", "iw", "oc"]
        names = sizes + ["oh", "ow", "kh", "kw", "sh", "sw", "pt", "pl"]
        valid = dict(base, ic=base["oc"] if depthwise else base["ic"], stride_h=1, stride_w=1, pad_top=0, pad_left=0)
        for layout in ("nchw", "nhwc"):
            need = buffer_size(lib, layout, valid, depthwise)
            cases.append((code, layout, depthwise, list(pointers.values()), [g[k] for k in names], floats,
                          need if scratch is None else scratch(need)))

    for family in ("general", "depthwise"):
        for role in ("ifmap", "weights", "result"):
            add("EINVAL", family, {role: None})
        for size in ("oc", "iw", "ih", "kh", "kw", "ow", "oh") + (("ic",) if family == "general" else ()):
            add("ESIZE", family, **{size: 0})
            add("ESIZE", family, **{size: INT_MIN})
        add("ESTRIDE", family, sw=0)
        add("ESTRIDE", family, sh=-1)
        add("EPAD", family, pl=-1)
        add("EPAD", family, pt=INT_MIN)
        add("ECLAMP", family, floats=(1.0, 0.0))
        add("ECLAMP", family, floats=(NAN, 1.0))
        add("ECLAMP", family, floats=(0.0, NAN))
        add("ERANGE", family, oh=3, sh=2**30)              # (oh-1)*sh + kh overflows int arithmetic
        add("ERANGE", family, ow=2**30, kw=3)
        add("ERANGE", family, ow=2, sw=INT_MAX)
        add("ERANGE", family, ih=INT_MAX, iw=INT_MAX, ic=INT_MAX, oc=INT_MAX)  # tensors beyond any address space
    add("ERANGE", "general", kh=50000, kw=50000, ih=4, iw=4, oh=1, ow=1)  # kh*kw overflows int
    add("ETAPS", "depthwise", kh=9, kw=9)
    add("ETAPS", "depthwise", kh=65, kw=1)
    add("ETAPS", "depthwise", kh=65536, kw=65536)           # kh*kw overflows int
    for family in ("general", "depthwise"):
        add("EBUFFER", family, scratch=lambda need: 0)  # no scratch (NULL)
        add("EBUFFER", family, scratch=lambda need: need - 1)  # too little
        add("ESTRIDE", family, scratch=lambda need: 0, sw=0)  # the scratch is checked last
    # Several problems at once: the first in the order of the header's list.
    add("EINVAL", "general", {"ifmap": None}, oc=0, sw=0)
    add("ESIZE", "general", oc=0, sw=0, pl=-1)
    add("ESTRIDE", "depthwise", sw=0, pl=-1, kh=9, kw=9)
    add("EPAD", "general", floats=(1.0, 0.0), pl=-1)
    return cases


def test_vanilla_rejects_each_bad_argument_with_its_code(vanilla):
    for code, layout, depthwise, arrays, ints, (lo, hi), scratch in vanilla_errors(vanilla):
        before = [None if a is None else a.copy() for a in arrays]
        status = flat(vanilla, layout, depthwise, arrays, ints, lo, hi, scratch)
        assert status == STATUS[code], (code, layout, depthwise, ints, lo, hi, scratch)
        for a, b in zip(before, arrays):
            assert a is None or a.tobytes() == b.tobytes(), "an array changed on error"
