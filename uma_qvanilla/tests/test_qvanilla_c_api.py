"""QVanilla's C library on its own, through ``qvanilla_c`` (``tvm_extension.testing.clib``):
every entry (plain, packed, what generated code calls, the reference kernels) equal to numpy bit
for bit at the ends of every range and in either rounding, each with a scratch of exactly its
_get_buffer_size bytes; the requantization against Python; each bad argument with its code;
_get_buffer_size equal to the compiler's mirror (uma_qvanilla.scratch); the README's C example.
Each call gets arrays of exactly their size: under ``clib.run_sanitized``
(test_qvanilla_sanitized.py) a read or write one element past any of them is reported."""
import ctypes
import platform
import re
import subprocess
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tvm_extension.kit import quantization
from tvm_extension.testing import clib
from uma_qvanilla import packing, scratch
from qvanilla_c import (CONSTANTS as Q, GENERATED, KERNEL_DIR, KIT_DIR, NULLABLE, REFERENCES, SHIPPED, STRUCT, Dims,
                        build, buffer_size, call, generated)

INT_MAX, INT_MIN = 2**31 - 1, -2**31


# On x86-64 the library runs AVX2 variants where the CPU has AVX2 (qvanilla_avx2.c, chosen at run
# time): every test runs on the library as built and on its plain C (-DQVANILLA_NO_AVX2).
@pytest.fixture(scope="module", params=["as-built", "no-avx2"])
def qvanilla(request, tmp_path_factory):
    return build(tmp_path_factory.mktemp("qvanilla"), ("-O2",) + (("-DQVANILLA_NO_AVX2",) if request.param == "no-avx2" else ()))


def cpu_flags():
    info = Path("/proc/cpuinfo")
    line = next((l for l in info.read_text().splitlines() if l.startswith("flags")), "") if info.is_file() else ""
    return set(line.partition(":")[2].split())


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the AVX2 variants are x86-64's")
def test_the_avx2_variants_run_where_the_cpu_has_avx2(qvanilla):
    """The run-time choice: the variants the tests above check are the ones that ran."""
    want = "avx2" in cpu_flags() and "-DQVANILLA_NO_AVX2" not in qvanilla.build_flags
    assert hasattr(qvanilla, "qvanilla_avx2") == ("-DQVANILLA_NO_AVX2" not in qvanilla.build_flags)
    assert not hasattr(qvanilla, "qvanilla_avx2") or bool(qvanilla.qvanilla_avx2()) == want


def output_size(size, kernel, stride, pad, pad_end):
    return (size + pad + pad_end - kernel) // stride + 1


def one(dtype):
    """A one-element array: a call rejected before it reads or writes must leave it alone (the
    sanitized run reports any access past it)."""
    return np.full(1, 77, dtype)


QNAMES = ["ih", "iw", "ic", "oh", "ow", "oc", "kh", "kw", "stride_h", "stride_w", "pad_top", "pad_left",
          "input_zp", "weight_zp", "output_zp", "act_min", "act_max", "rounding"]
# The ints of what generated code calls (after the scratch's size), in its signature's order.
QCALLS = {
    "qvanilla_conv2d_nhwc_packed_s8": [n for n in QNAMES if n != "weight_zp"],
    "qvanilla_conv2d_nhwc_packed8_s8": [n for n in QNAMES if n != "weight_zp"],
    "qvanilla_depthwise_conv2d_nhwc_packed_s8": [n for n in QNAMES if n not in ("oc", "weight_zp")],
}
assert list(QCALLS) == GENERATED
# Each kind's entries: the struct ones (the API), what generated code calls, the reference kernel.
QDENSE = [e for e in STRUCT + GENERATED + REFERENCES if "depthwise" not in e]
QDEPTHWISE = [e for e in STRUCT + GENERATED + REFERENCES if "depthwise" in e]
DENSE_STRUCT = [e for e in STRUCT if "depthwise" not in e]
DEPTHWISE_STRUCT = [e for e in STRUCT if "depthwise" in e]
fits_int8 = packing.fits_int8  # the packed8 entries' weights


def qnames(entry):
    """The names of QNAMES an entry reads (a depthwise entry's channels are "ic"; packed weights have no zero point)."""
    return [n for n in QNAMES if not (n == "oc" and "depthwise" in entry or n == "weight_zp" and "packed" in entry)]


def qkind(entry):
    """The entry's kind as scratch.buffer_size and the _get_buffer_size functions name it."""
    return entry.replace("qvanilla_", "").replace("_nhwc", "").replace("_ref", "")


def qscratch(entry, g):
    """The scratch array an entry gets: exactly its size (the sanitized run sees one byte too far), None if 0."""
    size = 0 if entry in REFERENCES else scratch.buffer_size(qkind(entry), g["kh"], g["kw"], g["ic"], g["oc"])
    return np.zeros(size, np.int8) if size else None


def exact_requantize(acc, multiplier, shift):
    """Python's exact requantize for any shift (beyond +-100 the result no longer changes)."""
    return quantization.requantize(int(acc), int(multiplier), max(-100, min(100, int(shift))))


def tflite_requantize(acc, multiplier, shift):
    """TFLite's MultiplyByQuantizedMultiplier (gemmlowp's SaturatingRoundingDoublingHighMul, then
    RoundingDivideByPOT) in Python integers, as the header defines it for any shift: the int32
    multiply by 2^left wraps (0 from left = 32 on), the division by 2^right rounds half away
    from zero (0 from right = 32 on; right is cut at 40 so that the mask stays small)."""
    acc, multiplier, shift = int(acc), int(multiplier), int(shift)
    left, right = min(max(shift, 0), 32), min(max(-shift, 0), 40)
    x = ((acc << left) + 2**31) % 2**32 - 2**31
    if x == multiplier == INT_MIN:
        high = INT_MAX
    else:
        ab = x * multiplier
        nudged = ab + ((1 << 30) if ab >= 0 else 1 - (1 << 30))
        high = nudged // 2**31 if nudged >= 0 else -(-nudged // 2**31)  # C's division truncates
    mask = (1 << right) - 1
    threshold = (mask >> 1) + (1 if high < 0 else 0)
    return (high >> right) + (1 if (high & mask) > threshold else 0)  # Python's & and >>: two's complement


QROUNDINGS = ["upward", "tflite"]


def rounding_code(name):
    return Q[f"ROUNDING_{name.upper()}"]


def requantizer(q):
    """The requantize of q's rounding (upward if q names none)."""
    return tflite_requantize if q.get("rounding", 0) == Q["ROUNDING_TFLITE"] else exact_requantize


def numpy_qconv(x, w, params, oh, ow, q):
    """int8 reference: padding holds the input zero point; the int32 accumulator wraps around.
    ``w`` is HWIO, or [kh][kw][channels] for a depthwise conv."""
    ih, iw, ic = x.shape
    depthwise = w.ndim == 3
    kh, kw, oc = w.shape[0], w.shape[1], w.shape[-1]
    sh, sw, pt, pl = q["stride_h"], q["stride_w"], q["pad_top"], q["pad_left"]
    padded = np.full((pt + max(ih, (oh - 1) * sh + kh), pl + max(iw, (ow - 1) * sw + kw), ic), q["input_zp"], np.int64)
    padded[pt:pt + ih, pl:pl + iw] = x
    acc = np.broadcast_to(params[0].astype(np.int64), (oh, ow, oc)).copy()
    for ky in range(kh):
        for kx in range(kw):
            window = padded[ky:ky + (oh - 1) * sh + 1:sh, kx:kx + (ow - 1) * sw + 1:sw] - q["input_zp"]
            tap = w[ky, kx].astype(np.int64) - q["weight_zp"]
            acc += window * tap if depthwise else np.einsum("hwc,co->hwo", window, tap)
    return numpy_output_stage(acc, params, q)


def numpy_output_stage(acc, params, q):
    """clamp(output_zp + requantize(acc wrapped to int32)) per channel (the last axis)."""
    acc = (acc + 2**31) % 2**32 - 2**31
    out = np.empty(acc.shape, np.int64)
    requantize = requantizer(q)
    for index in np.ndindex(*acc.shape):
        o = index[-1]
        out[index] = requantize(acc[index], params[1][o], params[2][o]) + q["output_zp"]
    return np.clip(out, q["act_min"], q["act_max"]).astype(np.int8)


def qrun(lib, entry, x, w, params, oh, ow, q):
    """(status, output) of ``entry`` on a graph's tensors: x [ih][iw][ic] and HWIO (or [kh][kw][channels])
    weights w with their zero points (the plain dense entries get them as OHWI), params [bias, multiplier, shift]; packed entries get the
    weights and biases packed as the compiler packs them (uma_qvanilla.packing), and every entry
    the scratch its _get_buffer_size asks for (uma_qvanilla.scratch's mirror); each array a copy
    of exactly its size."""
    (ih, iw, ic), (kh, kw), oc = x.shape, w.shape[:2], w.shape[-1]
    if "packed" in entry:
        pack = (packing.pack_depthwise if "depthwise" in entry else
                packing.pack_conv8 if "packed8" in entry else packing.pack_conv)
        assert "packed8" not in entry or fits_int8(w, q["weight_zp"]), "the packed8 entries' weights fit int8"
        w, bias = pack(w, q["weight_zp"], q["input_zp"], params[0])
        params = np.stack([bias, params[1], params[2]]).astype(np.int32)
    elif w.ndim == 4:  # the plain dense entries take OHWI, as TFLite's and CMSIS-NN's convs
        w = w.transpose(3, 0, 1, 2)
    g = dict(dict(ih=ih, iw=iw, ic=ic, oh=oh, ow=ow, oc=oc, kh=kh, kw=kw, rounding=Q["ROUNDING_UPWARD"]), **q)
    output = np.full((oh, ow, oc), 77, np.int8)
    work = qscratch(entry, g)
    size = 0 if work is None else work.size
    x, w = np.array(x, order="C"), np.array(w, order="C")
    if entry in QCALLS:
        status = generated(lib, entry, [x, w, np.array(params, order="C"), output, work],
                           [size] + [g[k] for k in QCALLS[entry]])
    else:
        status = call(lib, entry, [x, w, params[0].copy(), output, params[1].copy(), params[2].copy(), work], g, size)
    return status, output


def qparams(rng, oc, shifts, multipliers=None, biases=None):
    multipliers = rng.integers(1 << 30, 1 << 31, oc) if multipliers is None else multipliers
    biases = rng.integers(-5000, 5000, oc) if biases is None else biases
    return np.stack([np.resize(biases, oc), np.resize(multipliers, oc), np.resize(shifts, oc)]).astype(np.int32)


def qcases(depthwise, rows, seed, rounding):
    """(entry, qrun's arguments, expected output) of each entry of the kind (dense or depthwise) for each row
    (ih, iw, ic, oc, kh, kw, stride, pad, pad_end, (input_zp, weight_zp, output_zp), (act_min, act_max),
    qparams' keywords); a depthwise row's oc is its ic."""
    rng = np.random.default_rng(seed)
    cases = []
    for ih, iw, ic, oc, kh, kw, stride, pad, pad_end, zps, act, params in rows:
        x = rng.integers(-128, 128, (ih, iw, ic)).astype(np.int8)
        w = rng.integers(-128, 128, (kh, kw, ic) if depthwise else (kh, kw, ic, oc)).astype(np.int8)
        p = qparams(rng, oc, **params)
        oh, ow = (output_size(*a) for a in zip((ih, iw), (kh, kw), stride, pad, pad_end))
        q = dict(stride_h=stride[0], stride_w=stride[1], pad_top=pad[0], pad_left=pad[1], input_zp=zps[0],
                 weight_zp=zps[1], output_zp=zps[2], act_min=act[0], act_max=act[1], rounding=rounding_code(rounding))
        want = numpy_qconv(x, w, p, oh, ow, q)
        for entry in QDEPTHWISE if depthwise else QDENSE:
            cases.append((entry, (x, w, p, oh, ow, q), want))
        if not depthwise and not fits_int8(w, zps[1]):  # the packed8 entries on weights near those
            w8 = np.clip(w, max(-128, zps[1] - 128), min(127, zps[1] + 127)).astype(np.int8)
            want8 = numpy_qconv(x, w8, p, oh, ow, q)
            cases = [c for c in cases if not (c[0] in QDENSE and "packed8" in c[0] and c[1][1] is w)]
            cases += [(entry, (x, w8, p, oh, ow, q), want8) for entry in QDENSE if "packed8" in entry]
    return cases


def qconv_cases(rounding):
    return qcases(False, [
        # padding beyond the kernel on every side, strides, zero points and shifts at their range's ends
        (7, 9, 5, 12, 3, 3, (2, 3), (4, 5), (4, 6), (-128, 127, 127), (-128, 127),
         dict(shifts=[-31, 30, 0, -5, 30, -31], multipliers=[INT_MAX, 1, 1 << 30, INT_MIN, 3, 1 << 30])),
        (6, 6, 3, 8, 3, 3, (1, 1), (1, 1), (1, 1), (127, -128, -128), (0, 6),
         dict(shifts=[30, -31, 1, 2, -1, 0, 29, -30], multipliers=[1, INT_MAX, 5, 1 << 29, 0, INT_MAX, 2, 1 << 30])),
        # biases at int32's ends: the accumulator wraps around (as a two's-complement adder would)
        (4, 4, 2, 4, 2, 2, (1, 1), (0, 0), (1, 1), (0, 0, 0), (-128, 127),
         dict(shifts=[0, 0, 30, -31], multipliers=[1 << 30, INT_MAX, INT_MAX, INT_MAX],
              biases=[INT_MAX, INT_MIN, INT_MAX - 10, INT_MIN + 10])),
        (2, 2, 3, 1030, 1, 1, (1, 1), (0, 0), (0, 0), (3, -2, 5), (-100, 100), dict(shifts=[-3, 0, -31, 30])),
        (1, 1, 1, 1, 1, 1, (1, 1), (0, 0), (0, 0), (0, 0, 0), (3, 3), dict(shifts=[0])),
        (5, 1, 4, 6, 9, 1, (2, 1), (3, 0), (4, 0), (-1, 0, -128), (-128, 127), dict(shifts=[-8, -9])),
        # tiles of windows across output rows, odd pixel counts, channels not a multiple of 4
        (9, 13, 16, 13, 3, 3, (1, 1), (1, 1), (1, 1), (5, 0, -3), (-128, 127), dict(shifts=[-9, -10, -8])),
        (3, 70, 40, 7, 1, 3, (1, 2), (0, 30), (0, 31), (-7, 2, 0), (-20, 90), dict(shifts=[-7])),
        (11, 1, 104, 9, 3, 1, (1, 1), (1, 0), (1, 0), (4, -3, 1), (-128, 127), dict(shifts=[-10, -11])),
        # the longest windows of the fast path (4096 entries, two per tile), and longer ones (direct loops)
        (2, 4, 512, 5, 2, 4, (1, 1), (0, 1), (1, 2), (9, -1, 2), (-128, 127), dict(shifts=[-12])),
        (4, 3, 520, 6, 3, 3, (2, 1), (1, 1), (1, 1), (-9, 1, -2), (-128, 127), dict(shifts=[-13, 2])),
        # 1x1 kernels over runs of contiguous pixels (ic a multiple of 8), and where the padding
        # interrupts the runs; channels beyond one chunk of 64 and a partial block of 16
        (6, 9, 16, 21, 1, 1, (1, 1), (0, 0), (0, 0), (3, 0, -4), (-128, 127),
         dict(shifts=[-9, -8, 0, -12], multipliers=[1 << 30, -(1 << 30) - 7, INT_MAX, INT_MIN, 3 << 28])),
        (5, 7, 8, 70, 1, 1, (2, 1), (1, 2), (1, 1), (-5, 0, 7), (-20, 100), dict(shifts=[-10, -7, -1])),
    ], seed=9, rounding=rounding)


def qdepthwise_cases(rounding):
    return qcases(True, [
        (7, 9, 5, 5, 3, 3, (2, 3), (4, 5), (4, 6), (-128, 127, 127), (-128, 127),
         dict(shifts=[-31, 30, 0, -5, 30], multipliers=[INT_MAX, 1, 1 << 30, INT_MIN, 3])),
        (6, 6, 16, 16, 3, 3, (1, 1), (1, 1), (1, 1), (127, -128, -128), (0, 6),
         dict(shifts=[30, -31, 1, 2, -1, 0, 29, -30], multipliers=[1, INT_MAX, 5, 1 << 29, 0, INT_MAX, 2, 1 << 30])),
        (4, 4, 17, 17, 2, 2, (1, 1), (0, 0), (1, 1), (0, 0, 0), (-128, 127),
         dict(shifts=[0, 0, 30, -31], multipliers=[1 << 30, INT_MAX, INT_MAX, INT_MAX],
              biases=[INT_MAX, INT_MIN, INT_MAX - 10, INT_MIN + 10])),
        (1, 1, 1, 1, 1, 1, (1, 1), (0, 0), (0, 0), (0, 0, 0), (3, 3), dict(shifts=[0])),
        # keyword spotting's 9x1 on 120 channels (7 vectors of 16 and a tail of 8), strided
        (13, 1, 120, 120, 9, 1, (2, 1), (4, 0), (4, 0), (-6, 0, 3), (-128, 127), dict(shifts=[-8, -9])),
        # two blocks of channels (256 + 44), with a tail
        (3, 4, 300, 300, 3, 3, (1, 1), (1, 1), (1, 1), (2, -5, 0), (-50, 127), dict(shifts=[-9])),
        # more taps than one pointer group (64): two groups, and a tail of channels
        (5, 6, 20, 20, 9, 9, (1, 2), (4, 4), (4, 4), (1, 3, -1), (-128, 127), dict(shifts=[-12, -11])),
        (4, 80, 7, 7, 1, 65, (3, 1), (0, 40), (0, 30), (-3, 4, 9), (-128, 127), dict(shifts=[-10])),
        # the plain entry beyond its weight buffer (4096 int16): one channel at a time
        (3, 3, 3, 3, 65, 65, (1, 1), (62, 63), (2, 1), (-2, 7, 0), (-128, 127), dict(shifts=[-14])),
        # weights in [-128, 127] (two taps at a time): more taps than a group, an odd last group,
        # a tail of channels; single columns (pixels of several rows share an output stage)
        (3, 70, 24, 24, 1, 67, (1, 1), (0, 33), (0, 33), (2, 0, -3), (-128, 127),
         dict(shifts=[-11, -10], multipliers=[1 << 30, -(1 << 30) - 5, INT_MIN])),
        (9, 1, 8, 8, 3, 1, (1, 1), (1, 0), (1, 0), (0, 0, 5), (-100, 120), dict(shifts=[-9, 0])),
        (11, 1, 40, 40, 4, 1, (2, 1), (2, 0), (1, 0), (-128, 0, 127), (-128, 127), dict(shifts=[-8, -31, 30, -20])),
    ], seed=10, rounding=rounding)


@pytest.mark.parametrize("rounding", QROUNDINGS)
@pytest.mark.parametrize("kind", ["conv", "depthwise"])
def test_qvanilla_at_the_ends_of_every_range(qvanilla, kind, rounding):
    """Every entry (plain, struct, packed) equals the reference bit for bit, in either rounding."""
    for entry, args, want in qconv_cases(rounding) if kind == "conv" else qdepthwise_cases(rounding):
        status, got = qrun(qvanilla, entry, *args)
        assert status == Q["OK"] and np.array_equal(got, want), (entry, got.shape, args[-1])


def output_changes(multiplier, shift, output_zp, act_min, act_max, requantize=exact_requantize, levels=()):
    """The accumulators (int32) where the clamped output of a channel changes: for each of act_min,
    act_max, their middle and ``levels``, the first s whose output is past it (binary search: the
    output is monotonic in s), if there is one."""
    def out(s):
        return min(act_max, max(act_min, output_zp + requantize(s, multiplier, shift)))

    ends, rising = [], out(INT_MAX) > out(INT_MIN)
    for level in {act_min, act_max, (act_min + act_max) // 2, *levels}:
        past = (lambda s: out(s) > level) if rising else (lambda s: out(s) < level)
        if not past(INT_MAX) or past(INT_MIN):
            continue
        lo, hi = INT_MIN, INT_MAX  # past(hi), not past(lo)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if past(mid) else (mid, hi)
        ends.append(hi)
    return ends


@pytest.mark.parametrize("rounding", QROUNDINGS)
@pytest.mark.parametrize("family", ["per-channel", "mixed", "extreme"])
def test_qvanilla_output_stage_where_outputs_change(qvanilla, family, rounding):
    """The vectorised output stage where the clamped outputs change: a 1x1 conv of one input
    channel of weight 1 whose 256 pixels hold every int8 value, with biases that put each output
    channel's accumulators around one of its changes (at act_min, act_max or in between; in
    TFLite's rounding also from requantized -2 to -1, -1 to 0 and 0 to 1, where its ties round
    away from zero), or where the int32 accumulator wraps; the channels of a block with differing
    shifts and signs, blocks where some channel cannot take the vectorised stage (finish()); dense
    (37 and 70 channels: a partial block, two chunks) and depthwise entries."""
    rng = np.random.default_rng({"per-channel": 21, "mixed": 22, "extreme": 23}[family])
    code = rounding_code(rounding)
    requantize = requantizer(dict(rounding=code))
    for oc, (input_zp, output_zp), (act_min, act_max) in [(37, (0, 0), (-128, 127)), (70, (-7, 12), (-3, 6)),
                                                          (37, (100, -128), (-128, 127)), (37, (-128, 3), (0, 6))]:
        if family == "per-channel":  # TFLite's: normalised multipliers, a layer's shifts
            multipliers = rng.integers(1 << 30, 1 << 31, oc) * rng.choice([1, 1, 1, -1], oc)
            shifts = rng.integers(-12, 1, oc)
        elif family == "mixed":  # now and then a channel that does not qualify
            odd = rng.random(oc) < 0.08
            multipliers = np.where(odd, rng.integers(1, 1 << 12, oc), rng.integers(1 << 30, 1 << 31, oc))
            shifts = np.where(odd, rng.integers(-31, 31, oc), rng.integers(-9, -5, oc))
        else:
            multipliers = rng.choice([0, 1, -1, INT_MIN, INT_MAX, 1 << 30, -(1 << 30), 3], oc)
            shifts = rng.choice([-31, -20, -1, 0, 1, 30], oc)
        biases = []
        levels = (output_zp - 2, output_zp - 1, output_zp) if rounding == "tflite" else ()
        for m, s in zip(multipliers, shifts):
            ends = output_changes(int(m), int(s), output_zp, act_min, act_max, requantize, levels)
            target = int(rng.choice(ends)) if ends and rng.random() < 0.9 else int(rng.integers(INT_MIN, INT_MAX))
            if rng.random() < 0.05:
                target = INT_MAX - 60  # the accumulators wrap around
            biases.append(((target + input_zp + 2**31) % 2**32) - 2**31)  # s = bias + (x - input_zp) * 1
        params = np.stack([biases, multipliers, shifts]).astype(np.int64).astype(np.int32)
        q = dict(stride_h=1, stride_w=1, pad_top=0, pad_left=0, input_zp=input_zp, weight_zp=0, output_zp=output_zp,
                 act_min=act_min, act_max=act_max, rounding=code)
        sweep = np.arange(-128, 128).astype(np.int8).reshape(16, 16, 1)
        dense_w = np.ones((1, 1, 1, oc), np.int8)
        want = numpy_qconv(sweep, dense_w, params, 16, 16, q)
        runs = [(entry, sweep, dense_w) for entry in QDENSE]
        runs += [(entry, np.repeat(sweep, oc, axis=2), np.ones((1, 1, oc), np.int8)) for entry in QDEPTHWISE]
        for entry, x, w in runs:
            status, got = qrun(qvanilla, entry, x, w, params, 16, 16, q)
            assert status == Q["OK"] and np.array_equal(got, want), (entry, oc, q)


@pytest.mark.parametrize("rounding", QROUNDINGS)
@pytest.mark.parametrize("kind", ["conv", "depthwise"])
def test_qvanilla_pads_as_large_as_an_int(qvanilla, kind, rounding):
    """Windows entirely in the padding, far past the image on any side: the output is the output
    stage of the bias alone, and no index or pointer leaves its tensor.  A second table of biases
    and multipliers at int32's ends: the outputs in the padding requantize the biases themselves,
    among them TFLite's saturating high multiply (INT32_MIN by INT32_MIN, directly or through a
    left shift that wraps)."""
    rng = np.random.default_rng(12)
    c, ih, iw, k = 5, 4, 5, 3
    x = rng.integers(-128, 128, (ih, iw, c)).astype(np.int8)
    # weights less their zero point (3) in int8, as the packed8 entries take them
    w = rng.integers(-125, 128, (k, k, c) if kind == "depthwise" else (k, k, c, c)).astype(np.int8)
    p = qparams(rng, c, shifts=[-6, -7])
    extreme = qparams(rng, c, shifts=[0, 1, 30, -31, 0], multipliers=[INT_MIN, INT_MIN, INT_MAX, INT_MIN, INT_MIN],
                      biases=[INT_MIN, 1 << 30, INT_MIN, -1, INT_MAX])
    zps = dict(input_zp=-17, weight_zp=3, output_zp=4, act_min=-128, act_max=127, rounding=rounding_code(rounding))
    windows = [((2, 3), (1, 1), (0, INT_MAX)), ((3, 2), (2, 1), (INT_MAX, 0)), ((2, 2), (3, 5), (INT_MAX, INT_MAX)),
               ((70, 1), (1, 1), (INT_MAX - 5, 0)),
               ((2, 2), (2**29, 2**29), (0, 0))]  # no padding, but the second row and column are 2^29 away
    for params in (p, extreme):
        sums = exact_sums(x, w, params, zps)  # of the one output that reads the image
        for (oh, ow), stride, pad in windows:
            q = dict(stride_h=stride[0], stride_w=stride[1], pad_top=pad[0], pad_left=pad[1], **zps)
            acc = np.broadcast_to(params[0].astype(np.int64), (oh, ow, c)).copy()
            if pad == (0, 0):
                acc[0, 0] = sums
            want = numpy_output_stage(acc, params, q)
            for entry in QDEPTHWISE if kind == "depthwise" else QDENSE:
                status, got = qrun(qvanilla, entry, x, w, params, oh, ow, q)
                assert status == Q["OK"] and np.array_equal(got, want), (entry, params.tolist(), q)


def exact_sums(x, w, params, q):
    """bias + sum (x - input_zp) * (w - weight_zp) of the window at the input's top left corner."""
    kh, kw = w.shape[:2]
    window = x[:kh, :kw].astype(np.int64) - q["input_zp"]
    taps = w.astype(np.int64) - q["weight_zp"]
    sums = (window * taps).sum(axis=(0, 1)) if w.ndim == 3 else np.einsum("hwc,hwco->o", window, taps)
    return params[0].astype(np.int64) + sums


INT32_ENDS = np.array([INT_MIN, INT_MIN + 1, -1, 0, 1, INT_MAX - 1, INT_MAX], np.int64)


def random_requantize_arguments(rng, n):
    """(acc, multiplier), n each: int32's ends, any int32, and small accumulators (results
    that do not saturate)."""
    acc = np.where(rng.random(n) < 0.3, rng.choice(INT32_ENDS, n), rng.integers(INT_MIN, INT_MAX, n, endpoint=True))
    multiplier = np.where(rng.random(n) < 0.3, rng.choice(INT32_ENDS, n), rng.integers(INT_MIN, INT_MAX, n, endpoint=True))
    small = np.where(rng.random(n) < 0.5, rng.integers(-8, 9, n), acc >> rng.integers(0, 31, n))
    return np.where(rng.random(n) < 0.3, small, acc), multiplier


def test_qvanilla_requantize_is_exact_for_any_shift(qvanilla):
    rng = np.random.default_rng(1)
    n = 20000
    acc, multiplier = random_requantize_arguments(rng, n)
    shift = rng.integers(-70, 71, n)
    shift[:400] = rng.choice([-33, -32, -31, 30, 31, 32, 62, 63, 64, INT_MIN, INT_MAX, INT_MIN + 1], 400)
    arguments = list(zip(*(a.astype(np.int32).tolist() for a in (acc, multiplier, shift))))
    got = [qvanilla.qvanilla_requantize(*a) for a in arguments]
    assert got == [exact_requantize(*a) for a in arguments]


def test_tflite_reference_rounds_as_gemmlowp():
    """The Python reference itself, on values worked out by hand: the high multiply rounds ties
    upward (0.5 -> 1, -0.5 -> 0: gemmlowp's nudge and truncation), the division by 2^right half
    away from zero (0.5 -> 1, -0.5 -> -1), and the two roundings compound ((2^30 + 1) / 2^32,
    about 0.25, is 1: 0.5 + 2^-31 rounds to 1, then 1/2 to 1)."""
    assert [tflite_requantize(a, 1 << 30, 0) for a in (1, -1, 3, -3)] == [1, 0, 2, -1]
    assert [tflite_requantize(a, 1 << 30, -1) for a in (2, -2, 6, -6, 1, -1)] == [1, -1, 2, -2, 1, 0]
    assert tflite_requantize(1, (1 << 30) + 1, -1) == 1 and exact_requantize(1, (1 << 30) + 1, -1) == 0
    assert tflite_requantize(INT_MIN, INT_MIN, 0) == INT_MAX  # the saturating case
    assert tflite_requantize(INT_MIN, INT_MIN, -1) == 1 << 30
    assert tflite_requantize(1 << 29, INT_MIN, 2) == INT_MAX  # 2^31 wraps to INT32_MIN: saturates too
    assert tflite_requantize(3, 1 << 30, 31) == tflite_requantize(-1, 1 << 30, 31) == -(1 << 30)  # x wraps to INT32_MIN
    assert tflite_requantize(2, 1 << 30, 31) == 0  # x wraps to 0
    assert tflite_requantize(5, INT_MAX, 32) == 0 and tflite_requantize(INT_MIN, INT_MAX, -32) == 0


def test_qvanilla_requantize_tflite_matches_python(qvanilla):
    """qvanilla_requantize_tflite equals the Python reference for every kind of argument: int32's
    ends, ties of either rounding at both signs (the high multiply's: acc odd with M = 2^30;
    the division's: acc * 2^30 / 2^31 an odd multiple of 2^(right-1)), the saturating high
    multiply (INT32_MIN by INT32_MIN, or through a wrapping left shift), every shift in
    [-31, 30], left shifts that wrap, and shifts beyond the range."""
    rng = np.random.default_rng(2)
    n = 20000
    acc, multiplier = random_requantize_arguments(rng, n)
    shift = rng.integers(-31, 31, n)
    shift[:400] = rng.choice([-70, -33, -32, 31, 32, 33, 62, 63, 64, INT_MIN, INT_MAX, INT_MIN + 1], 400)
    rows = [(acc, multiplier, shift)]
    # ties at both signs, of the high multiply (an odd accumulator times 2^30: h = k + 1/2) and of
    # the division (acc = (2k + 1) * 2^right times 2^30: h / 2^right = k + 1/2), and next to them
    # (multipliers 2^30 +- 1), at every right shift
    for right in range(32):
        odd = 2 * rng.integers(0, 1 << max(0, 30 - right), 16) + 1  # odd * 2^right <= 2^31
        for m in (1 << 30, (1 << 30) + 1, (1 << 30) - 1, -(1 << 30)):
            for a in (odd, -odd, odd << right, -(odd << right)):
                a = a[(a >= INT_MIN) & (a <= INT_MAX)]
                rows.append((a, np.full(a.size, m), np.full(a.size, -right)))
    # the saturating case at every shift, directly and through left shifts that wrap to INT32_MIN
    shifts = np.arange(-31, 31)
    rows.append((np.full(shifts.size, INT_MIN), np.full(shifts.size, INT_MIN), shifts))
    left = np.arange(1, 31)
    rows.append((np.int64(1) << (31 - left), np.full(left.size, INT_MIN), left))
    rows.append((-(np.int64(1) << (31 - left)), np.full(left.size, INT_MIN), left))  # exactly INT32_MIN
    rows.append((3 * (np.int64(1) << (30 - left)), np.full(left.size, INT_MIN), left + 1))  # 3 * 2^31 wraps
    # left shifts that wrap, with multipliers of both signs
    wraps = rng.integers(1, 31, 2000)
    rows.append((rng.integers(INT_MIN, INT_MAX, 2000, endpoint=True), rng.choice(INT32_ENDS, 2000), wraps))
    rows.append((rng.integers(-(1 << 20), 1 << 20, 2000), rng.integers(1 << 30, 1 << 31, 2000), wraps))
    acc, multiplier, shift = (np.concatenate(parts) for parts in zip(*rows))
    arrays = [a.astype(np.int64).astype(np.int32) for a in (acc, multiplier, shift)]
    assert np.array_equal(arrays[0], acc) and np.array_equal(arrays[2], shift)
    arguments = list(zip(*(a.tolist() for a in arrays)))
    got = [qvanilla.qvanilla_requantize_tflite(*a) for a in arguments]
    assert got == [tflite_requantize(*a) for a in arguments]


def qvanilla_errors():
    """(expected code name, entry, arrays, the rest of ``call``'s or ``generated``'s arguments) for
    each kind of bad argument of every QVanilla struct entry that has the argument, and of what
    generated code calls."""
    base = dict(ih=4, iw=4, ic=2, oh=2, ow=2, oc=3, kh=3, kw=3, stride_h=1, stride_w=1, pad_top=0, pad_left=0,
                input_zp=0, weight_zp=0, output_zp=0, act_min=-128, act_max=127, rounding=0)
    cases = []

    def add(code, arrays=None, null=(), misaligned=False, entries=STRUCT, size=16, **changed):
        g = dict(base, **changed)
        for entry in entries:
            if any(k in QNAMES and k not in qnames(entry) for k in changed):
                continue
            weights = np.int16 if "packed_s8" in entry else np.int8
            pointers = dict(input=one(np.int8), weights=one(weights), bias=one(np.int32), output=one(np.int8),
                            multiplier=one(np.int32), shift=one(np.int32), scratch=np.zeros(max(size, 1), np.int8))
            pointers.update(arrays or {})
            cases.append((code, entry, list(pointers.values()), dict(g=g, size=size, null=null, misaligned=misaligned)))

    for role in ("input", "weights", "output", "multiplier", "shift"):  # a NULL bias is zeros (CMSIS-NN's)
        add("EINVAL", {role: None})
    for name in NULLABLE:
        add("EINVAL", null=[name])
    for size in ("ih", "iw", "ic", "oh", "ow", "oc", "kh", "kw"):
        add("ESIZE", **{size: 0})
        add("ESIZE", **{size: INT_MIN})
    add("ESIZE", n=2)  # a batch
    add("ESIZE", n=0)
    add("ESIZE", filter_c=3)  # the filter's channels are not the input's
    add("ESIZE", filter_n=4, entries=DENSE_STRUCT)  # nor its output channels the output's
    add("ESIZE", filter_n=2, entries=DEPTHWISE_STRUCT)  # a channel multiplier
    add("ESIZE", output_c=3, entries=DEPTHWISE_STRUCT)  # a depthwise output of other channels
    add("ESTRIDE", stride_h=0)
    add("ESTRIDE", stride_w=-2)
    add("EPAD", pad_top=-1)
    add("EPAD", pad_left=INT_MIN)
    add("ECLAMP", act_min=5, act_max=4)
    add("ECLAMP", act_min=-129)
    add("ECLAMP", act_max=128)
    for zp in ("input_zp", "weight_zp", "output_zp"):
        add("EZEROPOINT", **{zp: 128})
        add("EZEROPOINT", **{zp: -129})
        add("EZEROPOINT", **{zp: INT_MIN})
    add("ERANGE", oh=3, stride_h=2**30)
    add("ERANGE", ow=2**30)
    add("ERANGE", ih=INT_MAX, iw=INT_MAX, ic=INT_MAX, filter_c=INT_MAX)
    add("ERANGE", ic=INT_MAX, oc=INT_MAX, kh=65536, kw=65536, oh=1, ow=1)  # the weights
    add("ERANGE", ic=INT_MAX, kh=65537, kw=65537, oh=1, ow=1)  # a depthwise conv's weights
    # 2^62 weights: as int8 they fit, packed as int16 they do not
    add("ERANGE", ic=2**20, oc=2**16, kh=2**13, kw=2**13, oh=1, ow=1, entries=["qvanilla_conv2d_packed_s8"])
    add("ERANGE", ic=2**30, kh=2**16, kw=2**16, oh=1, ow=1, entries=["qvanilla_depthwise_conv2d_packed_s8"])
    add("ERANGE", ic=2**21, oc=2**16, kh=2**13, kw=2**13, oh=1, ow=1, entries=["qvanilla_conv2d_packed8_s8"])  # 2^63
    for entry in STRUCT:
        channels = base["ic"] if "depthwise" in entry else base["oc"]
        weights = np.zeros(3 * 3 * 2 * (1 if "depthwise" in entry else 3), np.int8)
        if "packed" in entry:  # packed8: OCP x K16 int8
            weights = np.zeros(3 * 3 * 2 if "depthwise" in entry else 4 * 24, np.int16)
            weights = np.zeros(4 * 32, np.int8) if "packed8" in entry else weights
        need = scratch.buffer_size(qkind(entry), 3, 3, 2, channels, budget=1)  # the least it accepts
        full = dict(input=np.zeros(4 * 4 * 2, np.int8), weights=weights, bias=np.zeros(channels, np.int32),
                    output=np.full(2 * 2 * channels, 77, np.int8), multiplier=np.full(channels, 1 << 30, np.int32))
        for bad in (31, -32, INT_MIN, INT_MAX):
            shifts = dict(full, shift=np.array([0] * (channels - 1) + [bad], np.int32))
            add("ESHIFT", shifts, entries=[entry])
            add("ESHIFT", shifts, entries=[entry], rounding=Q["ROUNDING_TFLITE"])
            add("ESHIFT", shifts, entries=[entry], rounding=2, size=0)  # the shifts come first
        valid = dict(full, shift=np.array([-31] + [30] * (channels - 1), np.int32))
        for bad in (2, -1, INT_MIN, INT_MAX):
            add("EROUNDING", valid, entries=[entry], rounding=bad, size=0)  # the rounding before the scratch
        # the scratch: below the least, NULL, not aligned, a negative size (checked last)
        add("ESCRATCH", dict(valid, scratch=np.zeros(need - 1, np.int8)), entries=[entry], size=need - 1)
        add("ESCRATCH", dict(valid, scratch=None), entries=[entry], size=need)
        add("ESCRATCH", dict(valid, scratch=np.zeros(need + 1, np.int8)), entries=[entry], size=need, misaligned=True)
        add("ESCRATCH", valid, entries=[entry], size=-1)
        add("OK", dict(valid, scratch=np.zeros(need, np.int8)), entries=[entry], size=need)
    # What generated code calls: a NULL table, too small a scratch
    for entry, channels in (("qvanilla_conv2d_nhwc_packed_s8", 3), ("qvanilla_conv2d_nhwc_packed8_s8", 3),
                            ("qvanilla_depthwise_conv2d_nhwc_packed_s8", 2)):
        weights = np.zeros(3 * 3 * 2 if "depthwise" in entry else 4 * 24, np.int16)
        weights = np.zeros(4 * 32, np.int8) if "packed8" in entry else weights
        table = np.array([[0] * channels, [1 << 30] * channels, [0] * channels], np.int32)
        need = scratch.buffer_size(qkind(entry), 3, 3, 2, channels, budget=1)
        ints = [dict(base, oc=channels)[k] for k in QCALLS[entry]]
        output = np.full(2 * 2 * channels, 77, np.int8)
        cases.append(("EINVAL", entry, [np.zeros(32, np.int8), weights, None, output, one(np.int8)],
                      dict(ints=[need] + ints)))
        cases.append(("ESCRATCH", entry, [np.zeros(32, np.int8), weights, table, output, np.zeros(need - 1, np.int8)],
                      dict(ints=[need - 1] + ints)))
        cases.append(("OK", entry, [np.zeros(32, np.int8), weights, table, output, np.zeros(need, np.int8)],
                      dict(ints=[need] + ints)))
    # Several problems at once: the first in the order of the header's list.
    add("EINVAL", {"input": None}, ih=0, input_zp=500)
    add("EINVAL", null=["params"], rounding=-1, size=0)
    add("ESIZE", n=3, stride_h=0, act_min=200, size=0)
    add("ECLAMP", act_min=1, act_max=0, output_zp=300, stride_h=2**30, oh=3)
    add("EZEROPOINT", output_zp=300, stride_h=2**30, oh=3, rounding=7)
    add("ERANGE", dict(shift=np.array([99] * 3, np.int32)), stride_h=2**30, oh=3, entries=DENSE_STRUCT)
    add("ERANGE", stride_h=2**30, oh=3, rounding=3, size=0)
    return cases


def test_qvanilla_status_codes_are_distinct():
    assert Q["OK"] == 0 and (Q["SHIFT_MIN"], Q["SHIFT_MAX"]) == (-31, 30)
    assert (Q["ROUNDING_UPWARD"], Q["ROUNDING_TFLITE"]) == (0, 1)
    errors = {k: v for k, v in Q.items() if k.startswith("E")}
    assert set(errors) == {"EINVAL", "ESIZE", "ESTRIDE", "EPAD", "ECLAMP", "EZEROPOINT", "ERANGE", "ESHIFT",
                           "EROUNDING", "ESCRATCH"}
    assert len(set(errors.values())) == len(errors) and 0 not in errors.values()


def test_qvanilla_rejects_each_bad_argument_with_its_code(qvanilla):
    for code, entry, arrays, rest in qvanilla_errors():
        before = [None if a is None else a.copy() for a in arrays]
        status = (generated if entry in QCALLS else call)(qvanilla, entry, arrays, **rest)
        assert status == Q[code], (code, entry, rest)
        if code != "OK":
            for a, b in zip(before, arrays):
                assert a is None or a.tobytes() == b.tobytes(), "an array changed on error"


def test_a_null_bias_is_zeros(qvanilla):
    """As CMSIS-NN's convs allow: each struct entry given a NULL bias computes what it computes with
    a bias of zeros (input zero point 0, so that the packed entries' folded bias is zeros too)."""
    rng = np.random.default_rng(8)
    for entry in STRUCT:
        depthwise = "depthwise" in entry
        ic, oc = 5, 5 if depthwise else 7
        x = rng.integers(-128, 128, (6, 6, ic)).astype(np.int8)
        w = rng.integers(-128, 128, (3, 3, ic) if depthwise else (3, 3, ic, oc)).astype(np.int8)
        params = qparams(rng, oc, shifts=-9, biases=0)
        q = dict(stride_h=1, stride_w=1, pad_top=1, pad_left=1, input_zp=0, weight_zp=0, output_zp=3, act_min=-128,
                 act_max=127)
        status, zeros = qrun(qvanilla, entry, x, w, params, 6, 6, q)
        assert status == Q["OK"] and np.array_equal(zeros, numpy_qconv(x, w, params, 6, 6, q)), entry
        if "packed" in entry:
            pack = (packing.pack_depthwise if depthwise else packing.pack_conv8 if "packed8" in entry else
                    packing.pack_conv)
            w, _ = pack(w, 0, 0, params[0])
        elif not depthwise:
            w = w.transpose(3, 0, 1, 2)  # OHWI
        g = dict(ih=6, iw=6, ic=ic, oh=6, ow=6, oc=oc, kh=3, kw=3, rounding=Q["ROUNDING_UPWARD"], **q)
        work = qscratch(entry, g)
        output = np.full((6, 6, oc), 77, np.int8)
        status = call(qvanilla, entry, [x, np.array(w, order="C"), None, output, params[1].copy(), params[2].copy(),
                                        work], g, work.size)
        assert status == Q["OK"] and np.array_equal(output, zeros), entry


def test_buffer_sizes_refuse_what_the_entries_refuse(qvanilla):
    """_get_buffer_size gives 0 for tensors too large to index (the entries' ERANGE), not a size
    computed from products that wrapped around: filters of 2^93 weights, inputs of 2^93 bytes, and
    2^62 weights packed as int16 (as int8 they fit: the plain and packed8 entries take them)."""
    huge = [(scratch.KINDS, Dims(1, 9, 9, INT_MAX), Dims(INT_MAX, INT_MAX, INT_MAX, INT_MAX)),
            (scratch.KINDS, Dims(1, INT_MAX, INT_MAX, INT_MAX), Dims(1, 3, 3, INT_MAX)),
            (["conv2d_packed_s8"], Dims(1, 9, 9, 2**20), Dims(2**16, 2**13, 2**13, 2**20))]
    for kinds, input_dims, filter_dims in huge:
        for kind in kinds:
            if kind.startswith("depthwise"):
                filter_dims = Dims(1, filter_dims.h, filter_dims.w, input_dims.c)
            assert buffer_size(qvanilla, kind, input_dims, filter_dims) == 0, (kind, input_dims.c, filter_dims.h)
    assert buffer_size(qvanilla, "conv2d_s8", Dims(1, 9, 9, 2**20), Dims(2**16, 2**13, 2**13, 2**20)) > 0


ZERO_FIT = r"""
/* The engines themselves (static in their files) given a scratch in which no tile fits: ESCRATCH,
 * nothing written, instead of tiles of no pixels (a loop without end). */
#include <stdio.h>
#include "qvanilla_internal.h"
#include ENGINE
int main(void) {
  const qvanilla_conv p = {4, 4, 8, 4, 4, 8, 3, 3, 1, 1, 1, 1, 0, 0, 0, -128, 127, 0, 0};
  const int32_t bias[8] = {0}, multiplier[8] = {1 << 30}, shift[8] = {0};
  const qvanilla_channels q = {bias, multiplier, shift};
  int8_t input[128] = {0}, output[128];
  int16_t weights[8 * 72] = {0};
  static uint64_t scratch[1024];
  for (int i = 0; i < 128; ++i) output[i] = 77;
  const qvanilla_status status = RUN;
  int untouched = 1;
  for (int i = 0; i < 128; ++i) untouched = untouched && output[i] == 77;
  printf("%d %d\n", (int)status, untouched);
  return 0;
}
"""


@pytest.mark.parametrize("engine, run", [
    ("qvanilla_conv2d_s8.c", "conv_tiles(input, weights, NULL, NULL, &q, output, &p, scratch, 16)"),
    ("qvanilla_depthwise_conv2d_s8.c", "depthwise(input, weights, NULL, &q, output, &p, scratch, 16)")])
def test_no_tile_fitting_the_scratch_is_escratch(tmp_path, engine, run):
    source = tmp_path / "zero_fit.c"
    source.write_text(ZERO_FIT)
    program = tmp_path / "zero_fit"
    sources = [path for path in SHIPPED if path.name != engine]  # the engine itself is included
    built = subprocess.run(["gcc", "-O1", "-std=c11", f"-I{KERNEL_DIR}", f"-I{KIT_DIR}", f'-DENGINE="{engine}"',
                            f"-DRUN={run}", "-o", program, source, *sources], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    done = subprocess.run([program], capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == [str(Q["ESCRATCH"]), "1"], done.stdout


BUDGETS = [4096, 1, 700]  # besides the hosts' 0, the library as built


@pytest.fixture(scope="module", params=BUDGETS)
def budgeted(request, tmp_path_factory):
    """The library built with -DQVANILLA_SCRATCH_BUDGET (sizes have no AVX2 variant: one build each)."""
    return request.param, build(tmp_path_factory.mktemp("budget"), ("-O1", f"-DQVANILLA_SCRATCH_BUDGET={request.param}"))


def test_qvanilla_buffer_sizes_equal_the_compilers_mirror(qvanilla):
    assert_buffer_sizes_equal_the_compilers_mirror(qvanilla, 0)


def test_budgeted_buffer_sizes_equal_the_compilers_mirror(budgeted):
    assert_buffer_sizes_equal_the_compilers_mirror(budgeted[1], budgeted[0])


def assert_buffer_sizes_equal_the_compilers_mirror(lib, budget):
    """Each entry's _get_buffer_size equals uma_qvanilla.scratch's (what the TIR pass allocates) on
    shapes across every branch: short and long windows (the direct loops beyond 4096 taps x
    channels), channel counts around the blocks (16), chunks (64) and depthwise blocks (128), plain
    depthwise weights around their buffer (4096); 0 for dims an entry rejects.  For each scratch
    budget (QVANILLA_SCRATCH_BUDGET): 0 the hosts' (the roomy layout), 4096 the microcontrollers', 1
    the least an entry accepts, and one below most entries' least."""
    rng = np.random.default_rng(31)
    shapes = [(1, 1, 1, 1), (3, 3, 2, 3), (1, 1, 8, 70), (3, 3, 512, 5), (2, 4, 512, 5), (3, 3, 520, 6),
              (9, 1, 120, 120), (65, 65, 3, 3), (1, 67, 24, 24), (9, 9, 20, 20), (3, 3, 300, 300), (1, 1, 2048, 2000),
              (64, 64, 1, 1), (8, 8, 64, 1030), (1, 4096, 1, 16), (1, 4097, 1, 16), (2, 2048, 1, 33)]
    shapes += [tuple(int(v) for v in rng.integers(1, [12, 12, 700, 1200])) for _ in range(150)]
    expected = []
    for kh, kw, ic, oc in shapes:
        for kind in scratch.KINDS:
            channels = ic if kind.startswith("depthwise") else oc
            filter_n = 1 if kind.startswith("depthwise") else oc
            want = scratch.buffer_size(kind, kh, kw, ic, channels, budget)
            got = buffer_size(lib, kind, Dims(1, 9, 9, ic), Dims(filter_n, kh, kw, ic))
            assert got == want and (budget == 0 or want <= scratch.buffer_size(kind, kh, kw, ic, channels)), \
                (kind, kh, kw, ic, oc)
            expected.append(want)
    for kind in scratch.KINDS:  # rejected dims: a size below 1, a batch, the filter's channels
        for dims in ([1, 9, 9, 0, 3, 3, 3, 0], [2, 9, 9, 4, 1, 3, 3, 4], [1, 9, 9, 4, 1, 3, 3, 5], [1, 9, 9, 4, 4, -1, 3, 4]):
            assert buffer_size(lib, kind, Dims(*dims[:4]), Dims(*dims[4:])) == 0, (kind, dims)
    assert max(expected) < 100_000  # a workspace buffer, not a tensor


def test_requantize_matches_python(qvanilla):
    rng = np.random.default_rng(0)
    for _ in range(2000):
        # The product must fit 64 bits (as in TVM): int8 convs accumulate far below 2^29.
        acc = int(rng.integers(-(1 << 29), 1 << 29))
        multiplier, shift = quantization.fixed_point_multiplier(float(rng.uniform(1e-6, 4.0)))
        assert qvanilla.qvanilla_requantize(acc, multiplier, shift) == quantization.requantize(acc, multiplier, shift)
    # Ties round upward, as in TVM: 0.5 -> 1, -0.5 -> 0.
    half = quantization.fixed_point_multiplier(0.5)
    assert quantization.requantize(1, *half) == 1 and quantization.requantize(-1, *half) == 0


def tflite_multiply_by_quantized_multiplier(acc, multiplier, shift):
    """TFLite's MultiplyByQuantizedMultiplier (tensorflow/lite/kernels/internal/common.h, gemmlowp's
    two roundings) on int64 arrays of int32 values, step by step as its C++ computes."""
    acc, multiplier, shift = (np.asarray(a, np.int64) for a in (acc, multiplier, shift))
    left, right = np.maximum(shift, 0), np.maximum(-shift, 0)
    x = (acc << left).astype(np.int32).astype(np.int64)  # x * (1 << left_shift): int32, wraps
    # SaturatingRoundingDoublingHighMul(x, multiplier)
    ab = x * multiplier
    nudged = ab + np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    high = np.sign(nudged) * (np.abs(nudged) // (1 << 31))  # C++'s division truncates toward zero
    high = np.where((x == multiplier) & (x == INT_MIN), INT_MAX, high)
    # RoundingDivideByPOT(high, right)
    mask = (np.int64(1) << right) - 1
    threshold = (mask >> 1) + (high < 0)
    return (high >> right) + ((high & mask) > threshold)


def test_requantize_tflite_matches_python(qvanilla):
    """qvanilla_requantize_tflite, the TFLite rounding's arithmetic, equals TFLite's
    MultiplyByQuantizedMultiplier: multipliers and shifts as QuantizeMultiplier makes them
    (ratios 1e-6 .. 4: shifts -19 .. 2), and any int32 multiplier with any shift in [-31, 30]."""
    rng = np.random.default_rng(0)
    n = 2000
    pairs = [quantization.fixed_point_multiplier(float(r)) for r in rng.uniform(1e-6, 4.0, n)]
    acc = np.concatenate([rng.integers(-(1 << 29), 1 << 29, n), rng.integers(INT_MIN, INT_MAX, n, endpoint=True)])
    multiplier = np.concatenate([[m for m, _ in pairs], rng.integers(INT_MIN, INT_MAX, n, endpoint=True)])
    shift = np.concatenate([[s for _, s in pairs], rng.integers(-31, 31, n)])
    got = [qvanilla.qvanilla_requantize_tflite(int(a), int(m), int(s)) for a, m, s in zip(acc, multiplier, shift)]
    assert np.array_equal(got, tflite_multiply_by_quantized_multiplier(acc, multiplier, shift))
    # Ties: 0.5 -> 1 and -0.5 -> -1 here (TVM's rounding: 0 for -0.5); 0.25 + 2^-32 rounds twice, to 1.
    quarter = (1 << 30, -1)
    assert [qvanilla.qvanilla_requantize_tflite(a, *quarter) for a in (2, -2)] == [1, -1]
    assert quantization.requantize(-2, *quarter) == 0
    assert qvanilla.qvanilla_requantize_tflite(1, (1 << 30) + 1, -1) == 1
    assert quantization.requantize(1, (1 << 30) + 1, -1) == 0


def test_readme_c_example_builds_and_runs(tmp_path, capfd):
    """The C example of the README, built with the library as an MLF ships it (its main renamed,
    called in this process), prints what it says."""
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    example = re.search(r"^    #include <stdio.h>\n(?:(?:    .*)?\n)*?^    }\n", readme, re.MULTILINE).group(0)
    source = tmp_path / "main.c"
    source.write_text(textwrap.dedent(example))
    program = clib.build([source, *SHIPPED], [KERNEL_DIR, KIT_DIR], tmp_path, "readme", ["-O2", "-Dmain=readme_main"])
    assert program.readme_main() == 0
    ctypes.CDLL(None).fflush(None)  # C's stdout is buffered
    expected = re.search(r"printf\(.*/\* (-?\d+ -?\d+):", example).group(1)
    assert capfd.readouterr().out.strip() == expected


def test_packed8_weights_are_the_headers_layout():
    """pack_conv8 writes qvanilla.h's formula for the packed8 entry (pack_conv's values as int8, in
    blocks of four channels by 16 entries), and refuses weights whose values leave int8."""
    rng = np.random.default_rng(5)
    w = rng.integers(-128, 128, (3, 3, 5, 6)).astype(np.int8)  # K = 45: K16 = 48, OCP = 8
    packed, bias = packing.pack_conv(w, 0, 3, np.arange(6))
    packed8, bias8 = packing.pack_conv8(w, 0, 3, np.arange(6))
    assert packed8.dtype == np.int8 and packed8.size == 8 * 48 and np.array_equal(bias8, bias)
    flat = packed8.reshape(-1)
    for o in range(8):
        for k in range(48):
            want = packed[o, k] if k < packed.shape[1] else 0
            assert flat[((o // 4) * 3 + k // 16) * 64 + (o % 4) * 16 + k % 16] == want, (o, k)
    assert packing.pack_conv8(w, -1, 0) is None  # 127 - (-1) = 128
