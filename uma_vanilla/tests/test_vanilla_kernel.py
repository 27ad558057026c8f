"""Vanilla's C library on its own: built with gcc, each entry compared with the plain reference
(tests/vanilla_reference.c, bit for bit) and with a numpy convolution; its buffer size with the
compiler's mirror (uma_vanilla.buffer_size)."""
import numpy as np
import pytest

from uma_vanilla.buffer_size import buffer_size as mirror
from vanilla_c import FLAGS, STATUS, build, buffer_size, conv


@pytest.fixture(scope="module", params=list(FLAGS))
def vanilla(request, tmp_path_factory):
    return build(tmp_path_factory.mktemp(request.param), FLAGS[request.param])


def both_layouts(lib, ifmap, weights, out_hw, **kwargs):
    """{layout: NCHW result} of the entry in each layout, each checked against the reference bit for bit."""
    results = {}
    for layout in ("nchw", "nhwc"):
        status, results[layout] = conv(lib, layout, ifmap, weights, out_hw, **kwargs)
        assert status == 0
        _, reference = conv(lib, layout, ifmap, weights, out_hw, reference=True, **kwargs)
        assert results[layout].tobytes() == reference.tobytes(), f"{layout} differs from the plain reference"
    assert results["nhwc"].tobytes() == results["nchw"].tobytes()
    return results["nchw"]


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


# (oc, ic, ih, iw, kh, kw, stride, pad): each engine and its whole and partial register blocks
STAGE_SHAPES = [
    (12, 5, 10, 32, 3, 3, (1, 1), (1, 1)),   # NCHW rows of 32: output channels in rows, pixels in lanes
    (40, 6, 9, 11, 3, 3, (1, 1), (1, 1)),    # output channels in lanes (16 + 16 + 8), zero-padded panel
    (21, 9, 12, 12, 1, 1, (1, 1), (0, 0)),   # 1x1: the input read in place
    (33, 40, 9, 10, 3, 3, (2, 1), (1, 1)),   # reductions in chunks, partial sums through the result
]


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




@pytest.mark.parametrize("oc,ic,ih,iw,kh,kw,stride,pad,pad_end", WINDOWS)
def test_window_matches_reference_and_numpy_in_both_layouts(vanilla, oc, ic, ih, iw, kh, kw, stride, pad, pad_end):
    rng = np.random.default_rng(oc * 31 + ic)
    ifmap = rng.standard_normal((ic, ih, iw)).astype(np.float32)
    weights = rng.standard_normal((oc, ic, kh, kw)).astype(np.float32)
    oh = (ih + pad[0] + pad_end[0] - kh) // stride[0] + 1
    ow = (iw + pad[1] + pad_end[1] - kw) // stride[1] + 1
    got = both_layouts(vanilla, ifmap, weights, (oh, ow), stride=stride, pad=pad)
    np.testing.assert_allclose(got, numpy_conv(ifmap, weights, oh, ow, stride, pad), rtol=1e-5, atol=5e-4)


@pytest.mark.parametrize("oc,ic,ih,iw,kh,kw", [
    (1, 1, 1, 1, 1, 1), (4, 3, 8, 8, 3, 3), (8, 5, 7, 11, 5, 3), (3, 2, 4, 6, 1, 7), (16, 16, 9, 9, 7, 7),
    (24, 96, 16, 16, 1, 1), (13, 64, 12, 70, 3, 5),
])
def test_same_padding_with_clamp(vanilla, oc, ic, ih, iw, kh, kw):
    """Stride 1, "same" padding (the UMA tutorial's case), bias and a clamp; reductions too long for one panel."""
    rng = np.random.default_rng(oc * 1000 + ih)
    ifmap = rng.standard_normal((ic, ih, iw)).astype(np.float32)
    weights = rng.standard_normal((oc, ic, kh, kw)).astype(np.float32)
    bias = rng.standard_normal(oc).astype(np.float32)
    pad = ((kh - 1) // 2, (kw - 1) // 2)
    got = both_layouts(vanilla, ifmap, weights, (ih, iw), pad=pad, bias=bias, lo=-0.5, hi=2.0)
    expected = numpy_conv(ifmap, weights, ih, iw, (1, 1), pad) + bias[:, None, None]
    np.testing.assert_allclose(got, np.clip(expected, -0.5, 2.0), rtol=1e-5, atol=5e-4)


@pytest.mark.parametrize("oc,ic,ih,iw,kh,kw,stride,pad", STAGE_SHAPES)
def test_whole_output_stage_agrees_in_both_layouts(vanilla, oc, ic, ih, iw, kh, kw, stride, pad):
    """Bias, residual, PReLU and clamp together on shapes whose blocks are whole and partial."""
    rng = np.random.default_rng(oc + ic)
    ifmap = rng.standard_normal((ic, ih, iw)).astype(np.float32)
    weights = rng.standard_normal((oc, ic, kh, kw)).astype(np.float32)
    oh, ow = (ih + 2 * pad[0] - kh) // stride[0] + 1, (iw + 2 * pad[1] - kw) // stride[1] + 1
    bias, slope = rng.standard_normal(oc).astype(np.float32), rng.uniform(0.05, 0.5, oc).astype(np.float32)
    residual = rng.standard_normal((oc, oh, ow)).astype(np.float32)
    got = both_layouts(vanilla, ifmap, weights, (oh, ow), stride=stride, pad=pad, bias=bias, residual=residual,
                       slope=slope, lo=-2.0, hi=3.0)
    v = numpy_conv(ifmap, weights, oh, ow, stride, pad) + bias[:, None, None] + residual
    expected = np.clip(np.where(v < 0, v * slope[:, None, None], v), -2.0, 3.0)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=5e-4)
    assert (got < 0).any() and (got == 3.0).any(), "the test must exercise both the slope and the clamp"


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
            ours, theirs = (conv(lib, layout, ifmap, weights, (oh, ow), stride, pad)[1] for lib in (vanilla, other))
            assert ours.tobytes() == theirs.tobytes(), (layout, oc, ic, ih, iw, kh, kw)
            ours, theirs = (conv(lib, layout, channels, weights[:, 0], (oh, ow), stride, pad, depthwise=True)[1]
                            for lib in (vanilla, other))
            assert ours.tobytes() == theirs.tobytes(), ("depthwise", layout, oc, ih, iw, kh, kw)


def test_rejects_bad_arguments_in_the_headers_order(vanilla):
    ifmap, weights = np.ones((1, 4, 4), np.float32), np.ones((1, 1, 3, 3), np.float32)
    Dims = __import__("vanilla_c").Dims
    for code, bad in [("ESTRIDE", dict(stride=(0, 1))), ("EPAD", dict(pad=(-1, 0))), ("ESIZE", dict(out_hw=(0, 2))),
                      ("ECLAMP", dict(lo=1.0, hi=0.0)), ("ERANGE", dict(out_hw=(3, 2), stride=(2**30, 1))),
                      ("ESIZE", dict(dims=(Dims(2, 4, 4, 1), Dims(1, 3, 3, 1), Dims(1, 2, 2, 1)))),  # a batch of 2
                      ("ESIZE", dict(dims=(Dims(1, 4, 4, 1), Dims(2, 3, 3, 1), Dims(1, 2, 2, 1)))),  # filter n != oc
                      ("ESIZE", dict(dims=(Dims(1, 4, 4, 1), Dims(1, 3, 3, 1), Dims(0, 2, 2, 1)), stride=(0, 1))),
                      ("EBUFFER", dict(scratch=0)), ("EBUFFER", dict(out_hw=(2, 2), scratch=10)),
                      ("ESTRIDE", dict(stride=(0, 1), scratch=0))]:  # (the buffer is checked last)
        for layout in ("nchw", "nhwc"):
            status, result = conv(vanilla, layout, ifmap, weights, **{"out_hw": (2, 2), **bad})
            assert status == STATUS[code], (layout, bad)
            assert np.isnan(result).all(), "result must be untouched on error"
    status, _ = conv(vanilla, "nchw", None, weights, (2, 2), dims=(Dims(1, 4, 4, 1), Dims(1, 3, 3, 1), Dims(1, 2, 2, 1)))
    assert status == STATUS["EINVAL"]  # a NULL input


def test_status_codes_keep_their_numbers():
    assert STATUS == {"OK": 0, "EINVAL": 1, "ESIZE": 2, "ESTRIDE": 3, "EPAD": 4, "ECLAMP": 5, "EEVEN": 6,
                      "ETAPS": 7, "ERANGE": 8, "EBUFFER": 9}




@pytest.mark.parametrize("channels,ih,iw,kh,kw,stride,pad,pad_end", DEPTHWISE)
def test_depthwise_matches_reference_and_numpy_in_both_layouts(vanilla, channels, ih, iw, kh, kw, stride, pad,
                                                               pad_end):
    rng = np.random.default_rng(channels + iw)
    ifmap = rng.standard_normal((channels, ih, iw)).astype(np.float32)
    weights = rng.standard_normal((channels, kh, kw)).astype(np.float32)
    bias = rng.standard_normal(channels).astype(np.float32)
    oh = (ih + pad[0] + pad_end[0] - kh) // stride[0] + 1
    ow = (iw + pad[1] + pad_end[1] - kw) // stride[1] + 1
    got = both_layouts(vanilla, ifmap, weights, (oh, ow), stride=stride, pad=pad, bias=bias, lo=-1.0, hi=2.0,
                       depthwise=True)
    expected = np.stack([numpy_conv(ifmap[c:c + 1], weights[c][None, None], oh, ow, stride, pad)[0]
                         for c in range(channels)]) + bias[:, None, None]
    np.testing.assert_allclose(got, np.clip(expected, -1.0, 2.0), rtol=1e-5, atol=1e-5)


def test_depthwise_rejects_kernels_above_its_window_buffer(vanilla):
    ifmap, weights = np.ones((2, 12, 12), np.float32), np.ones((2, 9, 9), np.float32)  # 81 taps > 64
    status, result = conv(vanilla, "nhwc", ifmap, weights, (4, 4), depthwise=True)
    assert status == STATUS["ETAPS"] and np.isnan(result).all()


# Geometries for the buffer size: each engine (rows, pixels, generic, both depthwise ones), a
# column read as a row, 1x1 planes read as one row, and refused ones (0).
SIZES = [dict(ic=ic, ih=ih, iw=iw, oc=oc, oh=oh, ow=ow, kh=kh, kw=kw, stride_h=sh, stride_w=sw, pad_top=pt, pad_left=pl)
         for ic, ih, iw, oc, oh, ow, kh, kw, sh, sw, pt, pl in [
             (3, 16, 16, 8, 16, 16, 3, 3, 1, 1, 1, 1), (16, 9, 9, 40, 7, 7, 3, 3, 1, 1, 0, 0),
             (4, 40, 40, 6, 2, 2, 17, 17, 16, 16, 0, 0), (40, 49, 1, 12, 21, 1, 9, 1, 2, 1, 3, 0),
             (24, 16, 16, 12, 16, 16, 1, 1, 1, 1, 0, 0), (24, 5, 6, 40, 5, 6, 1, 1, 1, 1, 0, 0),
             (10, 12, 32, 3, 12, 32, 3, 3, 1, 1, 1, 1), (8, 7, 9, 16, 7, 9, 1, 1, 1, 1, 0, 0),
             (33, 20, 21, 33, 6, 7, 5, 5, 3, 3, 2, 2), (1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0)]]


def test_buffer_size_mirror_equals_the_c(vanilla):
    """uma_vanilla.buffer_size (what the compiler allocates) is the C's _get_buffer_size for
    this build's register blocks, on every engine; the C says 0 for a geometry it refuses."""
    mr, nr = {"O2": (4, 16), "odd_blocks": (3, 6)}.get(
        next(k for k, v in FLAGS.items() if v == vanilla.build_flags), (8 if _avx512() else 4, 16))
    sizes = set()
    for g in SIZES:
        for depthwise in (False, True):
            geometry = dict(g, ic=g["oc"]) if depthwise else g
            if depthwise and geometry["kh"] * geometry["kw"] > 64:
                assert buffer_size(vanilla, "nchw", geometry, depthwise) == 0  # ETAPS
                continue
            for layout in ("nchw", "nhwc"):
                size = buffer_size(vanilla, layout, geometry, depthwise)
                assert size == mirror(depthwise, layout, geometry, mr, nr), (layout, depthwise, geometry)
                sizes.add(size)
    assert len(sizes) >= 4, sizes  # the engines need different amounts
    assert buffer_size(vanilla, "nchw", dict(SIZES[0], stride_h=0)) == 0


def _avx512() -> bool:
    import subprocess
    flags = subprocess.run(["gcc", "-march=native", "-dM", "-E", "-"], input="", capture_output=True, text=True).stdout
    return "__AVX512F__" in flags


def test_readme_c_example_compiles_and_prints_its_comment(tmp_path):
    """The C example of the README's C API section, built as its gcc line says, prints the
    numbers its comment gives."""
    import re
    import subprocess
    from pathlib import Path

    from vanilla_c import KERNEL_DIR, KIT_DIR, SOURCES
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    block = re.search(r"\n((?:    #include <float\.h>\n)(?:    .*\n|\n)*?    }\n)", readme).group(1)
    source = tmp_path / "main.c"
    source.write_text("\n".join(line[4:] for line in block.splitlines()) + "\n")
    program = tmp_path / "main"
    subprocess.run(["gcc", "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", f"-I{KERNEL_DIR}", f"-I{KIT_DIR}",
                    str(source), *map(str, SOURCES), "-lm", "-o", str(program)], check=True)
    printed = subprocess.run([str(program)], capture_output=True, text=True, check=True).stdout
    assert printed.split() == re.search(r"/\* ([\d. ]+) \*/", block).group(1).split()
