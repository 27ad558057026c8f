"""Chocolate's core as RTL under the zoo's int8 networks: cycles of the Verilated core beside the C
model's estimate, per network and per layer, and the core's Yosys area per tile shape, written into
docs/benchmarks.md.

    python benchmarks/chocolate_rtl.py               # both networks, tiles 4x8x8, 8x8x8, 16x8x8 (~3 min)

Each network is compiled by tvmc for Chocolate at each tile shape, built and run on the host
(``mlf run``) and on the RTL (``mlf run --device rtl``: every core call also run on the Verilated
core and compared with the model's), on one random input; the outputs must be equal.  The C
model estimates a core call at TILE_K cycles (a systolic array fed as fast as it computes); the
RTL's cycles are counted clock by clock.  The DMA's cycles stay the model's in both.
"""
import argparse
import csv
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from board import ROOT, TVMC, write_section
from tvm_extension.mlf import build, devices
from tvm_extension.testing.model_zoo import fetch
from uma_chocolate import rtl

NETWORKS = ["kws_dscnn_int8", "kws_on_off_int8"]
TILES = [(4, 8, 8), (8, 8, 8), (16, 8, 8)]
LAYERS_AT = (8, 8, 8)  # the tile shape of the per-layer table
BEGIN, END = "<!-- rtl table: benchmarks/chocolate_rtl.py writes from here -->", "<!-- end of the rtl table -->"


def counters(path: Path) -> dict:
    return {k.split(".", 1)[1]: int(v) for k, v in (line.split(": ") for line in path.read_text().splitlines())}


def measure(net, tiles, work: Path):
    mlf = work / "model.tar"
    options = [f"--target-chocolate-tile_{d}={v}" for d, v in zip("mnk", tiles)]
    done = subprocess.run([str(TVMC), "compile", "--target", "chocolate", *options, str(fetch(net)), "-f", "mlf",
                           "-o", str(mlf)], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"error: tvmc failed for {net} at {tiles}: {done.stderr.strip().splitlines()[-1]}")
    host = build(mlf, work / "host")
    rng = np.random.default_rng(0)
    inputs = {t.name: rng.integers(-128, 128, t.shape).astype(t.dtype) if t.dtype == "int8"
              else rng.uniform(-40, 80, t.shape).astype(t.dtype) for t in host.inputs}
    expected, _ = host.run(inputs)
    device = build(mlf, work / "rtl", device=devices.device("rtl"))
    # the report's and the layer file's paths, for this run only
    os.environ["CHOCOLATE_REPORT"], os.environ["CHOCOLATE_RTL_LAYERS"] = str(work / "report"), str(work / "layers.csv")
    try:
        got, _ = device.run(inputs)
    finally:
        del os.environ["CHOCOLATE_REPORT"], os.environ["CHOCOLATE_RTL_LAYERS"]
    if not all(np.array_equal(got[k], expected[k]) for k in expected):
        sys.exit(f"error: {net} at {tiles}: the RTL run's outputs differ from the C model's")
    with open(work / "layers.csv") as f:
        layers = [{k: int(v) for k, v in row.items()} for row in csv.DictReader(f)]
    return counters(work / "report"), [layer for layer in layers if layer["core_calls"]]


def table(command):
    cpu = next((l.split(":", 1)[1].strip() for l in Path("/proc/cpuinfo").read_text().splitlines()
                if l.startswith("model name")), platform.processor())
    verilator = subprocess.run(["verilator", "--version"], capture_output=True, text=True).stdout.strip()
    yosys = subprocess.run(["yosys", "-V"], capture_output=True, text=True).stdout.strip()
    lines = [f"Measured with `{command}` on {cpu}; {verilator}; {yosys} (`synth`, generic cells; the "
             "scratchpad is SRAM, not counted).  Outputs of every run equal to the C model's, every core call "
             "compared.", "",
             "| network | tiles | core calls | the model's core cycles (TILE_K a call) | RTL core cycles | RTL / model "
             "| RTL cycles a call | the model's DMA cycles | core area: cells / flip-flops |",
             "| " + " | ".join(["---"] * 9) + " |"]
    per_layer = []
    with tempfile.TemporaryDirectory(prefix="rtl-bench-") as tmp:
        for net in NETWORKS:
            for tiles in TILES:
                work = Path(tmp) / f"{net}_{'x'.join(map(str, tiles))}"
                work.mkdir()
                c, layers = measure(net, tiles, work)
                area = rtl.area(*tiles)
                rtl_cycles = c["rtl_zero_cycles"] + c["rtl_matmul_cycles"] + c["rtl_store_cycles"]
                lines.append(f"| {net} | {'x'.join(map(str, tiles))} | {c['core_calls']:,} | {c['core_cycles']:,} | "
                             f"{rtl_cycles:,} | {rtl_cycles / c['core_cycles']:.1f}x | "
                             f"{c['rtl_matmul_cycles'] // c['core_calls']} | {c['dma_cycles']:,} | "
                             f"{area.cells:,} / {area.flip_flops:,} |")
                print(lines[-1], flush=True)
                if tiles == LAYERS_AT:
                    per_layer += [(net, layer) for layer in layers]
    lines += ["", f"Per layer at {'x'.join(map(str, LAYERS_AT))} (the layers with core calls, in order):", "",
              "| network | layer | core calls | the model's core cycles | RTL cycles (zero, matmul, store) | RTL / model |",
              "| " + " | ".join(["---"] * 6) + " |"]
    for net, layer in per_layer:
        lines.append(f"| {net} | {layer['layer']} | {layer['core_calls']:,} | {layer['model_core_cycles']:,} | "
                     f"{layer['rtl_cycles']:,} | {layer['rtl_cycles'] / layer['model_core_cycles']:.1f}x |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--output", default=str(ROOT / "docs" / "benchmarks.md"), help="page to write, '-': print only")
    args = parser.parse_args()
    try:
        rtl.lint("chocolate_top")
    except rtl.RtlError as err:
        sys.exit(f"error: {err}")
    text = table("python benchmarks/chocolate_rtl.py")
    if args.output != "-":
        write_section(Path(args.output), BEGIN, END, text)
        print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
