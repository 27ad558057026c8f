"""Chocolate's RTL (``rtl/*.v``, the core as Verilog): Verilator's lint and builds of a module with a
C++ testbench (linked with C sources, e.g. the C model, built by gcc), and Yosys's area of the core.

Verilator 5 and Yosys 0.23 come from the system's packages (``apt-get install verilator yosys``;
``scripts/env.sh test`` installs them).
"""
import dataclasses
import functools
import hashlib
import re
import shutil
import subprocess
from pathlib import Path
from typing import Dict, Iterable, Sequence

from tvm_extension.api.resources import data_folder

RTL_DIR = data_folder(__package__, "rtl")
KERNEL_DIR = data_folder(__package__, "c")
KIT_DIR = data_folder("tvm_extension.kit", "c")
SOURCES = ["chocolate_top.v", "chocolate_core.v", "chocolate_spad.v", "chocolate_output_stage.v"]


class RtlError(RuntimeError):
    """A tool missing or failing: one line for the user."""


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise RtlError(f"{name} not found: apt-get install verilator yosys (or bash scripts/env.sh test)")
    return path


def _run(command: Sequence[str], cwd=None) -> subprocess.CompletedProcess:
    done = subprocess.run([str(c) for c in command], cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines() or [f"exit status {done.returncode}"]
        raise RtlError(f"{Path(str(command[0])).name} failed: {lines[0]}")
    return done


def lint(top: str) -> str:
    """``verilator --lint-only -Wall`` of ``top`` and what it instantiates: its warnings ('' if none)."""
    done = subprocess.run([_tool("verilator"), "--lint-only", "-Wall", "--top-module", top,
                           *(RTL_DIR / s for s in SOURCES)], capture_output=True, text=True)
    return done.stderr.strip()


def build(top: str, testbench: Path, work: Path, params: Dict[str, int] = None, c_sources: Iterable[Path] = (),
          includes: Iterable[Path] = (KERNEL_DIR, KIT_DIR)) -> Path:
    """The simulator of ``top`` with ``params`` (Verilog parameters, also macros of the testbench) and
    the C++ ``testbench``, the C sources compiled by gcc and linked in, in ``work``; built again only
    when an input changed."""
    params, includes = dict(params or {}), [Path(i).resolve() for i in includes]
    c_sources = [Path(c).resolve() for c in c_sources]
    digest = hashlib.sha256(repr((top, sorted(params.items()), [str(i) for i in includes])).encode())
    for path in [*(RTL_DIR / s for s in SOURCES), Path(testbench), *c_sources]:
        digest.update(path.read_bytes())
    folder = Path(work) / f"{top}_{digest.hexdigest()[:16]}"
    simulator = folder / "obj" / "sim"
    if simulator.exists():
        return simulator
    folder.mkdir(parents=True, exist_ok=True)
    objects = []
    for source in c_sources:
        obj = folder / f"{source.stem}.o"
        _run(["gcc", "-O2", "-std=c11", *(f"-I{i}" for i in includes), "-c", source, "-o", obj])
        objects.append(obj)
    _verilate(top, params, folder / "obj", includes, Path(testbench).resolve(), objects, "sim")
    return simulator


def _verilate(top: str, params: Dict[str, int], folder: Path, includes: Sequence[Path], cpp: Path,
              objects: Sequence[Path], name: str) -> Path:
    """Verilator's build of ``top`` (``params`` as Verilog parameters and as macros of the C++) with
    ``cpp`` and the compiled ``objects`` linked in: the executable ``folder/name``."""
    link = ["-LDFLAGS", " ".join([*(str(o) for o in objects), "-lm"])] if objects else []
    cflags = ["-O2", *(f"-I{i}" for i in includes), *(f"-D{k}={v}" for k, v in params.items())]
    _run([_tool("verilator"), "--cc", "--exe", "--build", "-O2", "--top-module", top,
          *(f"-G{k}={v}" for k, v in params.items()), "--Mdir", folder, "-CFLAGS", " ".join(cflags), *link,
          "-o", name, *(RTL_DIR / s for s in SOURCES), cpp])
    return Path(folder) / name


@dataclasses.dataclass(frozen=True)
class Area:
    """Yosys's generic-cell synthesis of the core (the scratchpad, an SRAM, not counted)."""
    cells: int
    flip_flops: int  # bits of state


def area(tile_m: int, tile_n: int, tile_k: int) -> Area:
    """The core for these tile sizes synthesized by Yosys to its generic gate library (``synth``):
    its cells and flip-flop bits."""
    script = (f"read_verilog {RTL_DIR / 'chocolate_core.v'} {RTL_DIR / 'chocolate_output_stage.v'}; "
              f"chparam -set TILE_M {tile_m} -set TILE_N {tile_n} -set TILE_K {tile_k} chocolate_core; "
              "synth -top chocolate_core -flatten; tee -o /dev/stdout stat")
    text = _run([_tool("yosys"), "-q", "-p", script]).stdout
    cells = re.findall(r"Number of cells:\s+(\d+)", text)
    flops = sum(int(n) for n in re.findall(r"\$_\w*DFF\w*\s+(\d+)", text))  # one bit each
    if not cells:
        raise RtlError("yosys printed no cell count")
    return Area(int(cells[-1]), flops)


BRIDGE = RTL_DIR / "chocolate_rtl.cpp"  # the C model's hooks into the Verilated core
_BEGIN = re.compile(r"chocolate_begin_call\((\d+), (\d+), (\d+), (\d+),")


class Device:
    """``python -m tvm_extension.mlf run --device rtl``: the MLF's Chocolate library built with
    ``-DCHOCOLATE_RTL`` and linked with the Verilated core of the tile sizes and scratchpad its
    generated code powers up (``chocolate_begin_call``); every core call runs on both and is compared."""

    cflags = ("-DCHOCOLATE_RTL",)

    @staticmethod
    def chip(tree: Path) -> Dict[str, int]:
        """The Verilog parameters of the chip the MLF's generated code was compiled for."""
        found = {m.groups() for source in (Path(tree) / "codegen" / "host" / "src").glob("*.c")
                 for m in _BEGIN.finditer(source.read_text())}
        if len(found) != 1:
            raise RtlError("the MLF powers up no Chocolate core: nothing to run on its RTL" if not found else
                           f"the MLF powers up {len(found)} different Chocolate cores: one RTL build takes one")
        spad, tile_m, tile_n, tile_k = (int(v) for v in found.pop())
        return dict(TILE_M=tile_m, TILE_N=tile_n, TILE_K=tile_k, SPAD_BYTES=spad)

    def link(self, tree: Path, objects: Sequence[Path], executable: Path, work: Path) -> None:
        from tvm_extension.mlf.host import HostBuildError  # pylint: disable=import-outside-toplevel

        try:
            params = self.chip(tree)
            includes = [Path(tree).resolve() / "codegen" / "host" / "include"]
            model = _verilate("chocolate_top", params, Path(work) / "rtl", includes, BRIDGE, objects, "model")
            shutil.copy2(model, executable)
        except RtlError as err:
            raise HostBuildError(str(err)) from None

    def cost(self, tree: Path) -> Dict[str, int]:
        """What the chip of the MLF costs: the core's synthesized area (its scratchpad is SRAM:
        ``spad_bytes`` of the counters)."""
        params = self.chip(tree)
        core = _area(params["TILE_M"], params["TILE_N"], params["TILE_K"])
        return {"area_cells": core.cells, "area_flip_flops": core.flip_flops}


_area = functools.lru_cache(maxsize=None)(area)  # a synthesis takes 10-60 s: once per tile shape and process
DEVICE = Device()
