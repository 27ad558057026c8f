"""GMAC/s of the kernel libraries on this machine, one thread: Vanilla (float32, NCHW and NHWC)
and QVanilla (int8, the packed entries compiled models call), with the one-core float peak.

    python examples/kernel_benchmark.py [--cflags "-O2"] [--rounds 7] [--only vanilla|qvanilla]
                                        [--rounding upward|tflite|both]

Builds Vanilla's and QVanilla's C libraries (with the kit's C they use) with gcc into shared libraries, and a float
peak probe: a register-blocked sgemm-like loop (a 4x8 block of accumulators, 256-long
reductions in L1) in C compiled with the same flags, i.e. what plain C reaches on this core at
those flags (-O2: SSE2, no FMA).  numpy's float32 matmul on one thread (OpenBLAS, whatever
SIMD the CPU has) is printed for reference.  Each row's variants are measured interleaved:
rounds of one batch (about 0.05 s) of each in turn, and the median per variant is printed.
Multiply-accumulates per second count the convolution's MACs only (no padding taps).
QVanilla runs in the rounding --rounding names (QVANILLA_ROUNDING_UPWARD, TVM's, by default;
QVANILLA_ROUNDING_TFLITE; or both, every variant in each rounding, all interleaved).
This is a benchmark, not a test.
"""
import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):  # one thread, before numpy loads
    os.environ[_var] = "1"

import argparse  # noqa: E402
import ctypes  # noqa: E402
import shlex  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from tvm_extension.api.resources import data_folder  # noqa: E402
from uma_qvanilla.packing import pack_conv, pack_depthwise  # noqa: E402
from uma_vanilla.buffer_size import buffer_size as vanilla_buffer_size  # noqa: E402

VANILLA_DIR, QVANILLA_DIR = data_folder("uma_vanilla", "c"), data_folder("uma_qvanilla", "c")
KIT_C = data_folder("tvm_extension.kit", "c")

VANILLA = [*sorted(VANILLA_DIR.glob("*.c")), KIT_C / "kit_conv_f32.c"]
QVANILLA = sorted(QVANILLA_DIR.glob("*.c"))  # its C API (qvanilla.h): structs, scratch from the caller


def _struct(name, fields):
    """A ctypes mirror of one of qvanilla.h's structs (fields: (name, ctypes type))."""
    return type(name, (ctypes.Structure,), {"_fields_": fields})


QHW = _struct("qvanilla_hw", [("h", ctypes.c_int32), ("w", ctypes.c_int32)])
QDIMS = _struct("qvanilla_dims", [(n, ctypes.c_int32) for n in "nhwc"])
QPARAMS = _struct("qvanilla_conv_params", [("stride", QHW), ("padding", QHW)] +
                  [(n, ctypes.c_int32) for n in ("input_zp", "weight_zp", "output_zp", "act_min", "act_max", "rounding")])
QQUANT = _struct("qvanilla_per_channel_quant_params", [("multiplier", ctypes.c_void_p), ("shift", ctypes.c_void_p)])
QCONTEXT = _struct("qvanilla_context", [("buf", ctypes.c_void_p), ("size", ctypes.c_int32)])


def qvanilla_call(lib, entry, x, weights, table, out, oc, kh, kw, window, zps, clamp, rounding):
    """(function, arguments) calling QVanilla's struct entry ``entry`` with its scratch: x [h][w][ic],
    table [bias, multiplier, shift] rows of oc, window (kh, kw, stride_h, stride_w, pad_top, pad_left)."""
    (h, w, ic), (oh, ow) = x.shape, out.shape[:2]
    depthwise = "depthwise" in entry
    dims = [QDIMS(1, h, w, ic), QDIMS(1 if depthwise else oc, kh, kw, ic), QDIMS(1, oh, ow, oc)]
    params = QPARAMS(QHW(*window[2:4]), QHW(*window[4:6]), *zps, *clamp, rounding)
    quant = QQUANT(pointer(table[1]), pointer(table[2]))
    size = getattr(lib, f"{entry}_get_buffer_size")(ctypes.byref(dims[0]), ctypes.byref(dims[1]))
    scratch = np.zeros(max(size, 1) // 8 + 1, np.int64)  # 8-byte aligned
    context = QCONTEXT(pointer(scratch), size)
    arguments = (ctypes.byref(context), ctypes.byref(params), ctypes.byref(quant), ctypes.byref(dims[0]), pointer(x),
                 ctypes.byref(dims[1]), pointer(weights), pointer(table[0]), ctypes.byref(dims[2]), pointer(out))
    function = getattr(lib, entry)
    return (lambda *a, _scratch=scratch: function(*a)), arguments  # (the context holds a bare address)


# (oc, ic, h, w, kh, kw, stride, depthwise): the layer shapes of the example and real networks
# ("same" padding; MTCNN's "valid" ones compute like their output-sized "same" twins)
SHAPES = [(32, 32, 48, 48, 3, 3, 1, False), (64, 64, 24, 24, 3, 3, 1, False), (128, 128, 12, 12, 3, 3, 1, False),
          (16, 3, 48, 48, 5, 5, 1, False), (48, 24, 64, 64, 1, 1, 1, False), (96, 96, 16, 16, 1, 1, 1, False),
          (40, 120, 49, 1, 1, 1, 1, False), (8, 8, 4, 4, 5, 5, 1, False), (24, 3, 128, 128, 5, 5, 2, False),
          (64, 32, 25, 5, 3, 3, 2, False), (96, 96, 16, 16, 3, 3, 1, True), (32, 32, 112, 112, 3, 3, 1, True),
          (28, 28, 64, 64, 3, 3, 2, True)]
# QVanilla: dense 3x3 and 1x1 of 16-64 channels, strided, depthwise, and the int8 keyword-spotting
# networks' layers (DS-CNN: 10x4 stride 2 on 1 channel, 3x3 depthwise and 1x1 on 64 channels of 25x5;
# keyword_spotting_on_off_v3: 1x1 40 <-> 120 and 9x1 depthwise on 120 channels of 49x1)
QSHAPES = [(16, 16, 32, 32, 3, 3, 1, False), (32, 32, 24, 24, 3, 3, 1, False), (64, 64, 16, 16, 3, 3, 1, False),
           (16, 16, 32, 32, 1, 1, 1, False), (32, 32, 24, 24, 1, 1, 1, False), (64, 64, 16, 16, 1, 1, 1, False),
           (32, 32, 24, 24, 3, 3, 2, False), (64, 64, 16, 16, 3, 3, 2, False),
           (64, 1, 50, 10, 10, 4, 2, False), (64, 64, 25, 5, 1, 1, 1, False),
           (120, 40, 49, 1, 1, 1, 1, False), (40, 120, 49, 1, 1, 1, 1, False),
           (64, 64, 25, 5, 3, 3, 1, True), (32, 32, 48, 48, 3, 3, 1, True), (64, 64, 24, 24, 3, 3, 2, True),
           (120, 120, 49, 1, 9, 1, 1, True)]

PEAK_C = r"""
/* c[4][8] += sum_k a[k][0..3] (x) b[k][0..7], k < n: 32 independent accumulators, spelled out so
 * that gcc's SLP vectoriser keeps them in SIMD registers at -O2 (as the kit's kit_conv_f32.c does). */
#define ROW(i) acc[i][0] += ai * b[0]; acc[i][1] += ai * b[1]; acc[i][2] += ai * b[2]; acc[i][3] += ai * b[3]; \
               acc[i][4] += ai * b[4]; acc[i][5] += ai * b[5]; acc[i][6] += ai * b[6]; acc[i][7] += ai * b[7];
void sgemm_4x8(const float* a, const float* b, float* c, int n) {
  float acc[4][8];
  for (int i = 0; i < 4; ++i) for (int j = 0; j < 8; ++j) acc[i][j] = c[i * 8 + j];
  for (int k = 0; k < n; ++k, a += 4, b += 8) {
    { const float ai = a[0]; ROW(0) }
    { const float ai = a[1]; ROW(1) }
    { const float ai = a[2]; ROW(2) }
    { const float ai = a[3]; ROW(3) }
  }
  for (int i = 0; i < 4; ++i) for (int j = 0; j < 8; ++j) c[i * 8 + j] = acc[i][j];
}
"""
PEAK_K = 256


def batch_size(function, args, seconds=0.05):
    """Calls that take about ``seconds``."""
    start, calls = time.perf_counter(), 0
    while time.perf_counter() - start < seconds / 4:
        function(*args)
        calls += 1
    return max(1, int(calls * seconds / (time.perf_counter() - start)))


def interleaved(variants, rounds):
    """{label: median seconds per call}; variants {label: (function, args)} timed in turn, batch by batch."""
    batches = {label: batch_size(*fa) for label, fa in variants.items()}
    samples = {label: [] for label in variants}
    for _ in range(rounds):
        for label, (function, args) in variants.items():
            start = time.perf_counter()
            for _ in range(batches[label]):
                function(*args)
            samples[label].append((time.perf_counter() - start) / batches[label])
    return {label: statistics.median(times) for label, times in samples.items()}


def build(work, name, sources, cflags):
    library = Path(work) / f"lib{name}.so"
    includes = [f"-I{folder}" for folder in {s.parent for s in sources} | {KIT_C}]
    subprocess.run(["gcc", *cflags, "-std=c11", "-shared", "-fPIC", *includes, "-o", str(library), *map(str, sources)],
                   check=True)
    return ctypes.CDLL(str(library)), library


def text_bytes(library):
    return subprocess.run(["size", str(library)], capture_output=True, text=True).stdout.splitlines()[1].split()[0]


def pointer(array):
    return array.ctypes.data_as(ctypes.c_void_p)


class Peak:
    """The float peak probe: (function, args) of one sgemm_4x8 call and its MACs."""

    def __init__(self, lib):
        rng = np.random.default_rng(1)
        self.a = rng.standard_normal(4 * PEAK_K).astype(np.float32)
        self.b = rng.standard_normal(8 * PEAK_K).astype(np.float32)
        self.c = np.zeros(32, np.float32)
        self.call = (lib.sgemm_4x8, (pointer(self.a), pointer(self.b), pointer(self.c), PEAK_K))
        self.macs = 32 * PEAK_K


def numpy_peak(rounds):
    a, b = (np.random.default_rng(2).standard_normal((512, 512)).astype(np.float32) for _ in range(2))
    seconds = interleaved({"numpy": (np.matmul, (a, b))}, rounds)["numpy"]
    return 512**3 / seconds / 1e9


def vanilla_rows(lib, rounds):
    print("oc x ic x h x w, kernel | NCHW GMAC/s | NHWC GMAC/s")
    print("--- | --- | ---")
    rng = np.random.default_rng(0)
    f = lambda a: a.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
    unbounded = (ctypes.c_float(-3.4e38), ctypes.c_float(3.4e38))
    for oc, ic, h, w, kh, kw, stride, depthwise in SHAPES:
        weights = rng.standard_normal((oc, 1 if depthwise else ic, kh, kw)).astype(np.float32)
        ifmap = rng.standard_normal(ic * h * w).astype(np.float32)
        oh, ow = (h + stride - 1) // stride, (w + stride - 1) // stride  # "same": pads (k-1)/2, rest at the end
        results = {layout: np.empty(oc * oh * ow, np.float32) for layout in ("nchw", "nhwc")}
        macs = oc * (1 if depthwise else ic) * oh * ow * kh * kw
        sizes = ((oc, h, w, oh, ow) if depthwise else (ic, h, w, oc, oh, ow)) + (kh, kw, stride, stride, (kh - 1) // 2,
                                                                                 (kw - 1) // 2)
        g = dict(ic=oc if depthwise else ic, ih=h, iw=w, oc=oc, oh=oh, ow=ow, kh=kh, kw=kw, stride_h=stride,
                 stride_w=stride, pad_top=(kh - 1) // 2, pad_left=(kw - 1) // 2)
        size = max(vanilla_buffer_size(depthwise, layout, g) for layout in ("nchw", "nhwc"))
        scratch = ctypes.create_string_buffer(size)  # the entries' scratch (vanilla_accelerator.h)
        entry = "vanilla_depthwise_conv2d{}" if depthwise else "vanilla_conv2d{}_general"
        variants = {layout: (getattr(lib, entry.format(layout)), (scratch, size, f(ifmap), f(weights), None, None,
                                                                  None, f(results[layout]), *sizes, *unbounded))
                    for layout in ("nchw", "nhwc")}
        seconds = interleaved(variants, rounds)
        kind = f"{kh}x{kw}" + (f" stride {stride}" if stride > 1 else "") + (" depthwise" if depthwise else "")
        print(f"{oc} x {ic} x {h} x {w}, {kind} | {macs / seconds['nchw'] / 1e9:.1f} | "
              f"{macs / seconds['nhwc'] / 1e9:.1f}", flush=True)


ROUNDINGS = {"upward": 0, "tflite": 1}  # QVANILLA_ROUNDING_UPWARD, QVANILLA_ROUNDING_TFLITE


def qvanilla_rows(lib, peak, rounds, roundings):
    """Per shape, interleaved: the packed entry (what compiled models call), the plain entry
    (HWIO int8 weights, packed four channels at a time as it goes), each in every one of
    ``roundings``, and the float peak probe."""
    columns = [f"{entry}{f' {r}' if len(roundings) > 1 else ''} GMAC/s" for entry in ("packed", "plain") for r in roundings]
    print(f"oc x ic x h x w, kernel | {' | '.join(columns)} | float peak GMAC/s (same rounds)")
    print(" | ".join(["---"] * (len(columns) + 2)))
    rng = np.random.default_rng(0)
    input_zp, weight_zp, output_zp = 3, 0, -2
    peaks = []
    for oc, ic, h, w, kh, kw, stride, depthwise in QSHAPES:
        x = rng.integers(-128, 128, (h, w, ic)).astype(np.int8)
        oh, ow = (h + stride - 1) // stride, (w + stride - 1) // stride
        pad_top, pad_left = (kh - 1) // 2, (kw - 1) // 2
        table = np.stack([rng.integers(-5000, 5000, oc), rng.integers(1 << 30, 1 << 31, oc),
                          rng.integers(-10, -6, oc)]).astype(np.int32)
        weights = rng.integers(-128, 128, (kh, kw, ic) if depthwise else (kh, kw, ic, oc)).astype(np.int8)
        packed, bias = (pack_depthwise if depthwise else pack_conv)(weights, weight_zp, input_zp, table[0])
        folded = np.stack([bias, table[1], table[2]]).astype(np.int32)
        window = (kh, kw, stride, stride, pad_top, pad_left)
        clamp = (output_zp, 127)  # a ReLU: about half the outputs clamp
        macs = oh * ow * oc * kh * kw * (1 if depthwise else ic)
        variants, outputs = {}, {}
        for r in roundings:
            out = outputs[r] = [np.empty((oh, ow, oc), np.int8) for _ in range(2)]
            kind = "depthwise_conv2d" if depthwise else "conv2d"
            fast = qvanilla_call(lib, f"qvanilla_{kind}_packed_s8", x, packed, folded, out[0], oc, kh, kw, window,
                                 (input_zp, 0, output_zp), clamp, ROUNDINGS[r])
            plain = qvanilla_call(lib, f"qvanilla_{kind}_s8", x, weights, table, out[1], oc, kh, kw, window,
                                  (input_zp, weight_zp, output_zp), clamp, ROUNDINGS[r])
            variants[("packed", r)], variants[("plain", r)] = fast, plain
        seconds = interleaved({**variants, "peak": peak.call}, rounds)
        for (entry, r), (function, arguments) in variants.items():
            if function(*arguments):
                raise SystemExit(f"error: the {entry} entry failed on {oc} x {ic} x {h} x {w} ({r})")
        for r in roundings:
            if not np.array_equal(*outputs[r]):
                raise SystemExit(f"error: the packed and plain entries disagree on {oc} x {ic} x {h} x {w} ({r})")
        peaks.append(peak.macs / seconds["peak"] / 1e9)
        kind = f"{kh}x{kw}" + (f" stride {stride}" if stride > 1 else "") + (" depthwise" if depthwise else "")
        rates = [f"{macs / seconds[(entry, r)] / 1e9:.1f}" for entry in ("packed", "plain") for r in roundings]
        print(f"{oc} x {ic} x {h} x {w}, {kind} | {' | '.join(rates)} | {peaks[-1]:.1f}", flush=True)
    return statistics.median(peaks)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cflags", default="-O2")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds per row (medians)")
    parser.add_argument("--only", choices=["vanilla", "qvanilla"])
    parser.add_argument("--rounding", choices=["upward", "tflite", "both"], default="upward",
                        help="QVanilla's requantization rounding (both: side by side, interleaved)")
    args = parser.parse_args()
    cflags = shlex.split(args.cflags)
    with tempfile.TemporaryDirectory() as work:
        peak_source = Path(work) / "peak.c"
        peak_source.write_text(PEAK_C)
        peak = Peak(build(work, "peak", [peak_source], cflags)[0])
        if args.only != "qvanilla":
            lib, library = build(work, "vanilla", VANILLA, cflags)
            print(f"Vanilla (float32), gcc {args.cflags}: library text {text_bytes(library)} bytes")
            vanilla_rows(lib, args.rounds)
            print()
        if args.only != "vanilla":
            lib, library = build(work, "qvanilla", QVANILLA, cflags)
            print(f"QVanilla (int8), gcc {args.cflags}: library text {text_bytes(library)} bytes")
            roundings = list(ROUNDINGS) if args.rounding == "both" else [args.rounding]
            median_peak = qvanilla_rows(lib, peak, args.rounds, roundings)
        else:
            median_peak = peak.macs / interleaved({"peak": peak.call}, args.rounds)["peak"] / 1e9
        print()
        print(f"one-core float peak: {median_peak:.1f} GMAC/s (float32 sgemm-like 4x8 register block in C, "
              f"gcc {args.cflags}, median over the rows' rounds); numpy float32 matmul on 1 thread "
              f"(OpenBLAS): {numpy_peak(args.rounds):.1f} GMAC/s")


if __name__ == "__main__":
    main()
