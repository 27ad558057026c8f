"""DMA traffic against its lower bound, per scratchpad size.

    python -m uma_strawberry.benchmark                      # cnn.onnx, MTCNN P-Net, BlazeFace
    python -m uma_strawberry.benchmark model.onnx:input:1,3,32,32 --sizes 8192 65536

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

from tvm_extension.api.resources import data_folder
from tvm_extension.mlf import build

ROOT = Path(__file__).resolve().parents[1]
EXTENSION = data_folder("tvm_extension.scaffold", "examples", "examples/ext")  # Vanilla, QVanilla, Strawberry
PLAN = re.compile(r"DMA (\d+) bytes in (\d+) transfers \(lower bound (\d+) bytes\)")
ZOO = {"mtcnn_pnet": "input_1:1,24,24,3", "blazeface": "input:1,128,128,3"}
DEFAULT_SIZES = [4096, 8192, 16384, 32768, 65536, 262144, 1 << 20]


def resolve(spec: str):
    """MODEL[:INPUT:DIMS] or a model-zoo name -> (label, path, tvmc --input-shapes or None)."""
    if spec in ZOO:
        sys.path.insert(0, str(ROOT / "examples"))
        from model_zoo import fetch  # the checkout's pinned real models

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
               f"--target-strawberry-scratchpad_bytes={spad}", "--experimental-tvm-extension", str(EXTENSION),
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
                        help="MODEL[:INPUT:D0,D1,...] or a model-zoo name (mtcnn_pnet, blazeface)")
    parser.add_argument("--sizes", nargs="+", type=int, default=DEFAULT_SIZES, help="scratchpad sizes in bytes")
    args = parser.parse_args(argv)
    header = f"{'model':<34} {'spad':>8} {'convs':>5} {'transfers':>9} {'DMA bytes':>10} {'lower bnd':>10} " \
             f"{'ratio':>6} {'DMA cyc':>9} {'MAC cyc':>9}"
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
                print(f"{label:<34} {spad:>8} {len(plans):>5} {c['dma_in_calls'] + c['dma_out_calls']:>9} {moved:>10} "
                      f"{bound:>10} {moved / bound:>6.2f} {c['dma_cycles']:>9} {c['compute_cycles']:>9}")
    print("\nbytes: host bytes read and written by the DMA (zero padding excluded); lower bound: every byte the "
          "offloaded layers need moved once; measured by the hardware model's counters (c_runtime/strawberry) on "
          "this host with the default rates (8 B/cycle, 32 setup cycles per transfer, 64 MACs/cycle).")


if __name__ == "__main__":
    main()
