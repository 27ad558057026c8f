"""DMA traffic against its lower bound, per scratchpad size.

    python benchmarks/strawberry.py                      # cnn.onnx and the five real float networks
    python benchmarks/strawberry.py model.onnx:input:1,3,32,32 --sizes 8192 65536

For each model and scratchpad size: compiles with TVM's own tvmc (``--target strawberry``),
builds the MLF with gcc, runs it once with the hardware model's counters on
(``STRAWBERRY_REPORT``) and prints what the offloaded layers moved: transfers, bytes, the lower
bound of those layers (every byte they need moved once), the ratio, and the model's cycle
estimates (DMA: setup + bytes / rate per transfer; engine: MACs / rate).  The lower bound only
counts offloaded layers: a scratchpad too small for a layer leaves it on the CPU (the column
"convs" says how many were offloaded).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from tvm_extension.mlf import build

ROOT = Path(__file__).resolve().parents[1]
PLAN = re.compile(r"DMA (\d+) bytes in (\d+) transfers \(lower bound (\d+) bytes, scratchpad (\d+) bytes in use\)")
ZOO = {"mtcnn_pnet": "input_1:1,24,24,3", "mtcnn_onet": "input_3:1,48,48,3", "blazeface": "input:1,128,128,3",
       "face_landmark": "input_1:1,192,192,3", "kws_on_off_float32": "serving_default_input_1:0:1,98,1,104"}
DEFAULT_SIZES = [4096, 8192, 16384, 32768, 65536, 262144, 1 << 20]


def resolve(spec: str):
    """MODEL[:INPUT:DIMS] or a model-zoo name -> (label, path, tvmc --input-shapes or None)."""
    if spec in ZOO:
        from tvm_extension.testing.model_zoo import fetch  # the checkout's pinned real models

        spec = f"{fetch(spec)}:{ZOO[spec]}"
        label = spec.split("/")[-1].split(":")[0]
    else:
        label = Path(spec.split(":")[0]).name
    path, _, shape = spec.partition(":")
    if not shape:
        return label, Path(path), None
    name, _, dims = shape.rpartition(":")
    return label, Path(path), f"{name}:[{dims}]"


def measure(path: Path, shapes, spad: int, work: Path):
    out = work / f"{spad}.tar"
    command = [sys.executable, "-m", "tvm.driver.tvmc", "compile", "--target", "strawberry",
               f"--target-strawberry-scratchpad_bytes={spad}",
               str(path), "-f", "mlf", "-o", str(out), "-v"] + (["--input-shapes", shapes] if shapes else [])
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"tvmc failed on {path} at {spad} bytes: {done.stderr.strip().splitlines()[-1]}")
    plans = [tuple(map(int, m)) for m in PLAN.findall(done.stdout + done.stderr)]
    program = build(out, work / f"build{spad}")
    report = work / f"report{spad}.txt"
    os.environ["STRAWBERRY_REPORT"] = str(report)
    try:
        program.run(program.filled_inputs(seed=1))
    finally:
        del os.environ["STRAWBERRY_REPORT"]
    counters = {}
    if report.exists():
        for line in report.read_text().splitlines():
            key, value = line.split(": ")
            counters[key.split(".", 1)[1]] = int(value)
    return plans, counters


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="*", default=[str(ROOT / "examples" / "models" / "cnn.onnx"), *ZOO],
                        help=f"MODEL[:INPUT:D0,D1,...] or a model-zoo name ({', '.join(ZOO)})")
    parser.add_argument("--sizes", nargs="+", type=int, default=DEFAULT_SIZES, help="scratchpad sizes in bytes")
    parser.add_argument("--plot", type=Path, help="also draw DMA bytes / lower bound against scratchpad size (PNG)")
    args = parser.parse_args(argv)
    header = f"{'model':<34} {'spad':>8} {'convs':>5} {'transfers':>9} {'DMA bytes':>10} {'lower bnd':>10} " \
             f"{'ratio':>6} {'burst B':>8} {'peak B':>7} {'DMA cyc':>9} {'MAC cyc':>9} {'summed':>9} {'overlap':>9}"
    curves = {}
    print(header)
    print("-" * len(header))
    for spec in args.models:
        label, path, shapes = resolve(spec)
        with tempfile.TemporaryDirectory() as tmp:
            for spad in args.sizes:
                plans, c = measure(path, shapes, spad, Path(tmp))
                if not plans:
                    print(f"{label:<34} {spad:>8} {0:>5}   (no layer fits)")
                    continue
                moved = c["dma_in_bytes"] + c["dma_out_bytes"]
                bound = sum(p[2] for p in plans)
                assert moved == sum(p[0] for p in plans), "the model counted other transfers than planned"
                peak = c["spad_peak_bytes"]
                assert peak == max(p[3] for p in plans), "the model's occupancy differs from the plan's"
                transfers = c["dma_in_calls"] + c["dma_out_calls"]
                dma, mac = c["dma_cycles"], c["compute_cycles"]
                # overlapped: a DMA that runs beside the engine (double buffering) hides the shorter of the two
                print(f"{label:<34} {spad:>8} {len(plans):>5} {transfers:>9} {moved:>10} {bound:>10} "
                      f"{moved / bound:>6.2f} {moved / transfers:>8.0f} {peak:>7} {dma:>9} {mac:>9} {dma + mac:>9} {max(dma, mac):>9}")
                curves.setdefault(label, []).append((spad, moved, bound, len(plans)))
    print("\nbytes: host bytes read and written by the DMA (zero padding excluded); lower bound: every byte the "
          "offloaded layers need moved once; burst: average bytes per transfer; peak: the most scratchpad bytes one "
          "layer occupies (measured by the model, equal to the plan); cycles from the hardware model's "
          "counters (c_runtime/strawberry) with the default rates (8 B/cycle, 32 setup cycles per transfer, "
          "64 MACs/cycle): summed = DMA then compute, overlap = max of the two (transfers hidden behind compute).")
    if args.plot:
        plot(curves, args.plot)


def plot(curves, path: Path):
    import matplotlib  # pylint: disable=import-outside-toplevel

    matplotlib.use("Agg")
    from matplotlib import pyplot  # pylint: disable=import-outside-toplevel

    figure, axes = pyplot.subplots(figsize=(6.5, 4))
    for label, points in curves.items():
        most = max(p[3] for p in points)
        sizes = [s / 1024 for s, *_ in points]
        line, = axes.plot(sizes, [moved for _, moved, _, _ in points], marker="o", label=f"{label} (DMA bytes)")
        axes.plot(sizes, [bound for _, _, bound, _ in points], linestyle="--", color=line.get_color(), alpha=0.6,
                  label=f"{label} (lower bound)")
        for spad, moved, _, convs in points:
            if convs < most:  # fewer layers fit: the rest run on the CPU, so fewer bytes move
                axes.annotate(f"{convs}/{most}", (spad / 1024, moved), fontsize=7, xytext=(3, 3),
                              textcoords="offset points")
    axes.set_xscale("log", base=2)
    axes.set_yscale("log")
    axes.set_xlabel("scratchpad (KiB)")
    axes.set_ylabel("bytes moved by the DMA")
    axes.set_title("Strawberry: bytes moved against scratchpad size")
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize=6)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    print(f"plot: {path}")


if __name__ == "__main__":
    main()
