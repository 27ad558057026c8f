"""The scratch bytes Vanilla's C entries ask for (their ``_get_buffer_size``), computed as the C
computes them, so the compiler can allocate the scratch around each call.  Plain Python: every
engine (Relay's TIR pass, the Relax engine) uses it, and a test checks it equals the C."""

# The kit's conv engine's constants (tvm_extension/kit/c/kit_conv_f32.c) that size its scratch.
KMAX, MAX_TAPS, ALIGN, SLOT, FLOAT = 256, 64, 64, 8, 4
INT_MAX = 2**31 - 1
# The register blocks the engine picks by itself: 8 x 16 with AVX-512 (e.g. cflags=-march=native),
# 4 x 16 otherwise; the compiler plans for the larger.
MR, NR = 8, 16


def _engine(depthwise: bool, nhwc: bool, g: dict, nr: int) -> str:
    """Which engine of kit_conv_f32.c computes this geometry (its prepared() and engine_of())."""
    if depthwise:
        return "dw_pixels" if nhwc else "dw_rows"
    if g["kh"] * g["kw"] > KMAX:
        return "generic" if nhwc else "rows"
    if nhwc:
        return "pixels"
    ih, iw, oh, ow, kh, kw = (g[k] for k in ("ih", "iw", "oh", "ow", "kh", "kw"))
    sh, sw, pt, pl = g["stride_h"], g["stride_w"], g["pad_top"], g["pad_left"]
    if iw == 1 and ow == 1 and kw == 1 and pl == 0:  # one column: read as one row
        ih, iw, oh, ow, kh, kw, sh, sw, pt, pl = 1, ih, 1, oh, 1, kh, 1, sh, 0, pt
    if (kh, kw, sh, sw, pt, pl) == (1, 1, 1, 1, 0, 0) and (oh, ow) == (ih, iw) and ih * iw <= INT_MAX // 2:
        ow = ih * iw  # a 1x1: the whole plane as one row
    return "rows" if ow >= 2 * nr or 2 * g["oc"] <= nr // 2 else "pixels"


def buffer_size(depthwise: bool, layout: str, g: dict, mr: int = MR, nr: int = NR) -> int:
    """The bytes of scratch ``vanilla_*_get_buffer_size`` returns for a valid geometry ``g``
    (ic, ih, iw, oc, oh, ow, kh, kw, stride_h, stride_w, pad_top, pad_left), for a build with
    register blocks of mr x nr (the kit's carve(): its arrays, each on a cache line, plus room
    to align the first)."""
    engine = _engine(depthwise, layout == "nhwc", g, nr)
    region = lambda count, size: (count * size + ALIGN - 1) // ALIGN * ALIGN
    cap = max(2 * mr * KMAX, MAX_TAPS * (nr + 1), 4096)
    dense = engine in ("rows", "pixels")
    offsets = 0 if engine == "generic" else KMAX if dense else MAX_TAPS
    weights = {"pixels": KMAX * nr, "dw_pixels": cap + MAX_TAPS * nr}.get(engine, 0)
    return (region(offsets, SLOT) + region(KMAX if dense else 0, SLOT) + region(MAX_TAPS if engine == "dw_rows" else 0, SLOT)
            + region(0 if engine == "generic" else cap, FLOAT) + region(weights, FLOAT) + region(mr * nr, FLOAT) + ALIGN)
