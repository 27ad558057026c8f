"""Real networks on emulated Cortex-M boards: ROM, RAM (workspace, stack) and instructions per
inference of each backend's build beside plain TVM's C build, written into docs/benchmarks.md.

    python benchmarks/board.py                       # every network, mps2-an386 and mps3-an547
    python benchmarks/board.py --networks kws_dscnn_int8 --boards mps2-an386
    python benchmarks/board.py --engines             # the int8 networks' MLFs of both engines, as ratios

Every build uses the same tvmc options (AOT, C interface, CRT, no vectors: TVMC's options for
microcontrollers) and the same cross-compiler flags (gcc -O2 for the board's core).  Each
program runs once in QEMU (-icount shift=0) on one random input; its outputs are compared with
the host build of the same MLF.  The table replaces the part of docs/benchmarks.md between its
markers (the rest of the page is kept).
"""
import argparse
import platform
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from tvm_extension.mlf import board as boards
from tvm_extension.mlf import build
from tvm_extension.testing.model_zoo import fetch

ROOT = Path(__file__).resolve().parents[1]

TVMC = Path(sys.executable).parent / "tvmc"
EMBEDDED = ["--executor", "aot", "--executor-aot-interface-api", "c", "--executor-aot-unpacked-api", "1",
            "--runtime", "crt", "--pass-config", "tir.disable_vectorize=1"]
NETWORKS = {  # name: input shapes, backends beside plain TVM
    "kws_dscnn_int8": ({"input_1": (1, 50, 10, 1)}, ["qvanilla", "chocolate"]),
    "kws_on_off_int8": ({"serving_default_input_1:0": (1, 98, 1, 104)}, ["qvanilla", "chocolate"]),
    "mtcnn_pnet": ({"input_1": (1, 24, 24, 3)}, ["vanilla", "strawberry"]),
    "mtcnn_onet": ({"input_3": (1, 48, 48, 3)}, ["vanilla"]),
    "kws_on_off_float32": ({"serving_default_input_1:0": (1, 98, 1, 104)}, ["vanilla"]),
    "blazeface": ({"input": (1, 128, 128, 3)}, ["vanilla"]),
}
TARGETS = {"vanilla": "vanilla_accelerator", "qvanilla": "qvanilla", "strawberry": "strawberry",
           "chocolate": "chocolate", "plain": "c"}
# compiled for a microcontroller: QVanilla's calls take at most 4 KB of scratch each (c/qvanilla.h)
OPTIONS = {"qvanilla": ["--target-qvanilla-scratch_budget=4096"]}
# ... and on Helium's Cortex-M55 its dense weights as int8 (the packed8 entry)
CORE_OPTIONS = {("qvanilla", "mps3-an547"): ["--target-qvanilla-int8_weights=1"]}


def options(backend, board):
    return OPTIONS.get(backend, []) + CORE_OPTIONS.get((backend, board), [])


def archive_name(net, backend, board):
    """One MLF per network and backend, and per board where the board's options differ."""
    return f"{net}-{backend}{f'-{board}' if (backend, board) in CORE_OPTIONS else ''}"
SRAM = 256 * 1024
BEGIN, END = "<!-- board table: benchmarks/board.py writes from here -->", "<!-- end of the board table -->"
ENGINES_BEGIN = "<!-- engines board table: benchmarks/board.py --engines writes from here -->"
ENGINES_END = "<!-- end of the engines board table -->"
RELAX_ENGINE = ROOT / ".venv-relax" / "bin" / "tvmc"  # made by scripts/env.sh test


def compile_mlf(net, backend, out, board):
    shapes = " ".join(f"{n}:[{','.join(map(str, s))}]" for n, s in NETWORKS[net][0].items())
    # the example backends are installed (scripts/env.sh): no extension flag
    command = [str(TVMC), "compile", "--target", TARGETS[backend], *options(backend, board), *EMBEDDED,
               "--input-shapes", shapes, str(fetch(net)), "-f", "mlf", "-o", str(out)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"error: tvmc failed for {net} {backend}: {done.stderr.strip().splitlines()[-1]}")


def compile_relax_mlf(net, backend, out, board):
    """The Relax engine's MLF (its own AOT C) of the same network and backend."""
    command = [str(RELAX_ENGINE), "compile", str(fetch(net)), "--target", TARGETS[backend], *options(backend, board),
               "-f", "mlf", "-o", str(out)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"error: the Relax engine failed for {net} {backend}: {done.stderr.strip().splitlines()[-1]}")


def measure(archive, board, work):
    host = build(archive, work / "host")
    rng = np.random.default_rng(0)
    inputs = {t.name: rng.integers(-128, 128, t.shape).astype(t.dtype) if t.dtype == "int8"
              else rng.standard_normal(t.shape).astype(t.dtype) for t in host.inputs}
    firmware = boards.build(archive, work / board, board)
    got, _ = firmware.run(inputs)
    expected, _ = host.run(inputs)
    same = all(np.array_equal(got[n], expected[n]) for n in expected)
    worst = max(float(np.max(np.abs(got[n].astype(np.float64) - expected[n]))) for n in expected)
    return firmware, "equal" if same else f"max diff {worst:.2g}"


def kib(n):
    return f"{n / 1024:.1f}"


def row(net, backend, board, firmware, agreement, plain_instructions):
    m = firmware.memory
    ratio = f"{plain_instructions / firmware.instructions:.2f}x" if backend != "plain" else "1x"
    fits = "yes" if m.ram() <= SRAM else "no"
    return (f"| {net} | {backend} | {board} | {kib(m.rom())} ({kib(m.rom('generated'))} / {kib(m.rom('kernel library'))}"
            f" / {kib(m.rom('runtime'))}) | {kib(m.workspace)} | {kib(m.stack)} | {kib(m.ram())} | {fits} | "
            f"{firmware.instructions / 1e6:.2f} | {ratio} | {agreement} |")


def environment(command):
    cpu = next((l.split(":", 1)[1].strip() for l in Path("/proc/cpuinfo").read_text().splitlines()
                if l.startswith("model name")), platform.processor())
    qemu = subprocess.run([boards.QEMU, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    gcc = subprocess.run([boards.CC, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    return (f"Measured with `{command}` on {cpu} ({platform.system()} {platform.machine()}); {qemu}; {gcc}, -O2 "
            f"with the board's -mcpu; tvmc options: `{' '.join(EMBEDDED)}`, QVanilla's also "
            f"`{' '.join(OPTIONS['qvanilla'])}`, on the Cortex-M55 (mps3-an547) also "
            f"`{' '.join(CORE_OPTIONS['qvanilla', 'mps3-an547'])}`.")


def table(networks, board_names, command):
    lines = [environment(command), "",
             "| network | build | board | ROM KiB (generated / kernel library / runtime) | workspace KiB | "
             "peak stack KiB | RAM KiB | fits 256 KiB | M instructions per inference | fewer than plain TVM | "
             "outputs vs host |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    with tempfile.TemporaryDirectory(prefix="board-bench-") as tmp:
        work = Path(tmp)
        for net in networks:
            for board in board_names:
                plain = None
                for backend in ["plain"] + NETWORKS[net][1]:
                    archive = work / f"{archive_name(net, backend, board)}.tar"
                    if not archive.exists():
                        compile_mlf(net, backend, archive, board)
                    try:
                        firmware, agreement = measure(archive, board, work / archive.stem)
                    except boards.BoardError as err:  # e.g. more RAM than the board has: say so in the table
                        lines.append(f"| {net} | {backend} | {board} | {err} |" + " |" * 8)
                        print(lines[-1], flush=True)
                        continue
                    plain = plain or firmware.instructions
                    lines.append(row(net, backend, board, firmware, agreement, plain))
                    print(lines[-1], flush=True)
    return "\n".join(lines)


def engines_table(networks, board_names, command):
    """Per int8 network, backend and board: the Relax engine's MLF against the Relay engine's (ROM,
    RAM, instructions per inference, as ratios Relax / Relay), each run against its own host build."""
    lines = [environment(command), "",
             "| network | build | board | ROM KiB Relay / Relax | RAM KiB Relay / Relax | M instructions Relay / "
             "Relax | Relax / Relay: ROM, RAM, instructions | outputs vs host (Relay, Relax) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    with tempfile.TemporaryDirectory(prefix="board-engines-") as tmp:
        work = Path(tmp)
        for net in networks:
            for backend in ["plain"] + NETWORKS[net][1]:
                for board in board_names:
                    name = archive_name(net, backend, board)
                    relay, relax = work / f"{name}.tar", work / f"{name}-relax.tar"
                    if not relay.exists():
                        compile_mlf(net, backend, relay, board)
                        compile_relax_mlf(net, backend, relax, board)
                    try:
                        (a, agree_a), (b, agree_b) = (measure(archive, board, work / f"{archive.stem}-{board}")
                                                      for archive in (relay, relax))
                    except boards.BoardError as err:  # e.g. more RAM than the board has: say so in the table
                        lines.append(f"| {net} | {backend} | {board} | {err} |" + " |" * 4)
                        print(lines[-1], flush=True)
                        continue
                    ratios = [b.memory.rom() / a.memory.rom(), b.memory.ram() / a.memory.ram(),
                              b.instructions / a.instructions]
                    lines.append(f"| {net} | {backend} | {board} | {kib(a.memory.rom())} / {kib(b.memory.rom())} | "
                                 f"{kib(a.memory.ram())} / {kib(b.memory.ram())} | {a.instructions / 1e6:.2f} / "
                                 f"{b.instructions / 1e6:.2f} | {', '.join(f'{r:.2f}x' for r in ratios)} | "
                                 f"{agree_a}, {agree_b} |")
                    print(lines[-1], flush=True)
    return "\n".join(lines)


def write_section(path: Path, begin: str, end: str, text: str):
    """Replace the part of ``path`` between ``begin`` and ``end`` (appended when missing)."""
    page = path.read_text() if path.is_file() else f"# Benchmarks\n\n{begin}\n{end}\n"
    if begin not in page:
        page += f"\n{begin}\n{end}\n"
    head, rest = page.split(begin, 1)
    path.write_text(f"{head}{begin}\n{text}\n{end}{rest.split(end, 1)[1] if end in rest else chr(10)}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--networks", nargs="+", default=list(NETWORKS), choices=list(NETWORKS))
    parser.add_argument("--boards", nargs="+", default=["mps2-an386", "mps3-an547"], choices=list(boards.BOARDS))
    parser.add_argument("--output", type=Path, default=ROOT / "docs" / "benchmarks.md")
    parser.add_argument("--engines", action="store_true",
                        help="the int8 networks' MLFs of the Relay and the Relax engine side by side")
    args = parser.parse_args()
    try:
        boards.check_tools()
    except boards.BoardError as err:
        sys.exit(f"error: {err}")
    command = "python benchmarks/board.py" + "".join(
        f" --{k} {' '.join(v)}" for k, v in (("networks", args.networks), ("boards", args.boards))
        if v != parser.get_default(k))
    if args.engines:
        if not RELAX_ENGINE.is_file():
            sys.exit(f"error: {RELAX_ENGINE} is missing: scripts/env.sh test makes the Relax engine's environment")
        networks = [n for n in args.networks if n.endswith("_int8")]
        command = "python benchmarks/board.py --engines" + (
            f" --networks {' '.join(networks)}" if args.networks != parser.get_default("networks") else "") + (
            f" --boards {' '.join(args.boards)}" if args.boards != parser.get_default("boards") else "")
        write_section(args.output, ENGINES_BEGIN, ENGINES_END, engines_table(networks, args.boards, command))
    else:
        write_section(args.output, BEGIN, END, table(args.networks, args.boards, command))
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
