"""GMAC/s of the Vanilla kernel library on this machine, NCHW and NHWC side by side.

    python examples/kernel_benchmark.py [--cflags "-O2"]

Builds c_runtime/vanilla with gcc into a shared library, runs each convolution shape
repeatedly (median of 5 batches of about 0.2 s) and prints multiply-accumulates per second.
This is a benchmark, not a test.
"""
import argparse
import ctypes
import shlex
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

KERNEL = Path(__file__).resolve().parent.parent / "c_runtime" / "vanilla" / "vanilla_accelerator.c"
# (oc, ic, h, w, kh, kw, stride, depthwise): the layer shapes of the example and real networks
# ("same" padding; MTCNN's "valid" ones compute like their output-sized "same" twins)
SHAPES = [(32, 32, 48, 48, 3, 3, 1, False), (64, 64, 24, 24, 3, 3, 1, False), (128, 128, 12, 12, 3, 3, 1, False),
          (16, 3, 48, 48, 5, 5, 1, False), (48, 24, 64, 64, 1, 1, 1, False), (96, 96, 16, 16, 1, 1, 1, False),
          (40, 120, 49, 1, 1, 1, 1, False), (8, 8, 4, 4, 5, 5, 1, False), (24, 3, 128, 128, 5, 5, 2, False),
          (64, 32, 25, 5, 3, 3, 2, False), (96, 96, 16, 16, 3, 3, 1, True), (32, 32, 112, 112, 3, 3, 1, True),
          (28, 28, 64, 64, 3, 3, 2, True)]


def gmacs(function, args, macs):
    start, calls = time.perf_counter(), 0
    while time.perf_counter() - start < 0.05:  # calibrate a batch of about 0.2 s
        function(*args)
        calls += 1
    batch = max(1, int(calls * 0.2 / (time.perf_counter() - start)))
    times = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(batch):
            function(*args)
        times.append((time.perf_counter() - start) / batch)
    return macs / statistics.median(times) / 1e9


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cflags", default="-O2")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        library = Path(work) / "libvanilla.so"
        subprocess.run(["gcc", *shlex.split(args.cflags), "-std=c11", "-shared", "-fPIC", "-o", str(library),
                        str(KERNEL)], check=True)
        lib = ctypes.CDLL(str(library))
        text = subprocess.run(["size", str(library)], capture_output=True, text=True).stdout.splitlines()[1].split()[0]
        print(f"gcc {args.cflags}: library text {text} bytes")
        print("oc x ic x h x w, kernel | NCHW GMAC/s | NHWC GMAC/s")
        print("--- | --- | ---")
        rng = np.random.default_rng(0)
        f = lambda a: a.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
        unbounded = (ctypes.c_float(-3.4e38), ctypes.c_float(3.4e38))
        for oc, ic, h, w, kh, kw, stride, depthwise in SHAPES:
            weights = rng.standard_normal((oc, 1 if depthwise else ic, kh, kw)).astype(np.float32)
            ifmap = rng.standard_normal(ic * h * w).astype(np.float32)
            oh, ow = (h + stride - 1) // stride, (w + stride - 1) // stride  # "same": pads (k-1)/2, rest at the end
            result = np.empty(oc * oh * ow, np.float32)
            macs = oc * (1 if depthwise else ic) * oh * ow * kh * kw
            sizes = ((oc, w, h) if depthwise else (oc, w, h, ic)) + (kh, kw, ow, oh, stride, stride, (kw - 1) // 2, (kh - 1) // 2)
            entry = "vanilla_depthwise_conv2d{}" if depthwise else "vanilla_conv2d{}_general"
            row = [gmacs(getattr(lib, entry.format(layout)), (f(ifmap), f(weights), None, None, None, f(result), *sizes,
                                                              *unbounded), macs) for layout in ("nchw", "nhwc")]
            kind = f"{kh}x{kw}" + (f" stride {stride}" if stride > 1 else "") + (" depthwise" if depthwise else "")
            print(f"{oc} x {ic} x {h} x {w}, {kind} | {row[0]:.1f} | {row[1]:.1f}", flush=True)


if __name__ == "__main__":
    main()
