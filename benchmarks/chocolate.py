"""Chocolate's figures per model and tile size.

    python benchmarks/chocolate.py                          # the int8 networks of the tests, cnn.onnx
    python benchmarks/chocolate.py model.tflite --tiles 4x4x4 16x16x16 --plot util.png
    python benchmarks/chocolate.py --scratchpad 2048       # too small to keep panels: tiles reloaded

For each model and core tile: compiles with TVM's own tvmc (``--target chocolate``), builds the
MLF with gcc, runs it once with the hardware model's counters on (``CHOCOLATE_REPORT``) and
prints what the core and the DMA did: core calls, configure calls, utilisation (useful MACs /
MACs issued: the tiles' padding is wasted work), DMA bytes against the lower bound of the
offloaded layers (every input element a window reads, every weight and output once), and
cycles from the model's cost model (DMA: setup + bytes / rate per transfer; core: tile_k cycles
per call), summed and overlapped; "core MACs": the share of the model's conv and dense MACs the
core computes (the rest, depthwise convs mostly, stays on the CPU).
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
BOUND = re.compile(r"chocolate_main_\d+: GEMM .* \(lower bound (\d+) bytes\)")
MACS = re.compile(r"\[chocolate\] MACs of convs and dense layers: (\d+); on the core (\d+)")
ZOO = ["kws_dscnn_int8", "kws_on_off_int8"]
DEFAULT_TILES = ["4x4x4", "8x8x8", "16x16x16"]


def resolve(spec: str):
    if spec in ZOO:
        from tvm_extension.testing.model_zoo import fetch  # the checkout's pinned real models

        return spec, fetch(spec)
    return Path(spec).name, Path(spec)


def measure(path: Path, tile: str, spad: int, work: Path):
    m, n, k = tile.split("x")
    out = work / f"{tile}.tar"
    command = [sys.executable, "-m", "tvm.driver.tvmc", "compile", "--target", "chocolate",
               f"--target-chocolate-tile_m={m}", f"--target-chocolate-tile_n={n}", f"--target-chocolate-tile_k={k}",
               f"--target-chocolate-scratchpad_bytes={spad}",
               str(path), "-f", "mlf", "-o", str(out), "-v"]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"tvmc failed on {path} with tile {tile}: {done.stderr.strip().splitlines()[-1]}")
    bound = sum(int(b) for b in BOUND.findall(done.stdout + done.stderr))
    total, on_core = (int(v) for v in MACS.search(done.stdout).groups())
    program = build(out, work / f"build{tile}")
    report = work / f"report{tile}.txt"
    os.environ["CHOCOLATE_REPORT"] = str(report)
    try:
        program.run(program.filled_inputs(seed=1))
    finally:
        del os.environ["CHOCOLATE_REPORT"]
    counters = {}
    for line in report.read_text().splitlines():
        key, value = line.split(": ")
        counters[key.split(".", 1)[1]] = int(value)
    return bound, on_core / total, counters


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="*", default=[*ZOO, str(ROOT / "examples" / "models" / "cnn.onnx")],
                        help=f"a model file or a model-zoo name ({', '.join(ZOO)})")
    parser.add_argument("--tiles", nargs="+", default=DEFAULT_TILES, help="core tiles MxNxK")
    parser.add_argument("--scratchpad", type=int, default=65536, help="scratchpad bytes (a small one: loop orders "
                        "that reload tiles)")
    parser.add_argument("--plot", type=Path, help="also draw utilisation and DMA bytes against the tile (PNG)")
    args = parser.parse_args(argv)
    header = (f"{'model':<18} {'tile':>8} {'layers':>6} {'core calls':>10} {'configure':>9} {'util':>6} "
              f"{'DMA bytes':>10} {'lower bnd':>10} {'ratio':>6} {'DMA cyc':>9} {'core cyc':>9} {'summed':>9} "
              f"{'overlap':>9} {'core MACs':>9}")
    print(header)
    print("-" * len(header))
    points = {}
    for spec in args.models:
        label, path = resolve(spec)
        with tempfile.TemporaryDirectory() as tmp:
            for tile in args.tiles:
                bound, share, c = measure(path, tile, args.scratchpad, Path(tmp))
                moved = c["dma_in_bytes"] + c["dma_out_bytes"]
                util = c["macs_useful"] / c["macs_issued"]
                dma, core = c["dma_cycles"], c["core_cycles"]
                print(f"{label:<18} {tile:>8} {c['layers']:>6} {c['core_calls']:>10} {c['configure_calls']:>9} "
                      f"{util:>6.2f} {moved:>10} {bound:>10} {moved / bound:>6.2f} {dma:>9} {core:>9} {dma + core:>9} "
                      f"{max(dma, core):>9} {share:>9.1%}")
                points.setdefault(label, []).append((tile, util, moved / bound))
    print("\nutil: useful MACs / MACs issued; DMA bytes: host bytes read and written (tile fill excluded); lower "
          "bound: every input element a window reads, every weight and output once; cycles from the hardware "
          "model's counters (c_runtime/chocolate) with the default DMA rates (8 B/cycle, 32 setup cycles per "
          "transfer), tile_k cycles per core call: summed = DMA then compute, overlap = max of the two.")
    if args.plot:
        plot(points, args.plot)


def plot(points, path: Path):
    import matplotlib  # pylint: disable=import-outside-toplevel

    matplotlib.use("Agg")
    from matplotlib import pyplot  # pylint: disable=import-outside-toplevel

    figure, (left, right) = pyplot.subplots(1, 2, figsize=(8, 3.5))
    for label, rows in points.items():
        tiles = [t for t, _, _ in rows]
        left.plot(tiles, [u for _, u, _ in rows], marker="o", label=label)
        right.plot(tiles, [r for _, _, r in rows], marker="o", label=label)
    left.set_ylabel("core utilisation (useful / issued MACs)")
    right.set_ylabel("DMA bytes / lower bound")
    for axes in (left, right):
        axes.set_xlabel("core tile (M x N x K)")
        axes.grid(True, alpha=0.3)
        axes.legend(fontsize=7)
    figure.suptitle("Chocolate: what the tile size costs")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    print(f"plot: {path}")


if __name__ == "__main__":
    main()
