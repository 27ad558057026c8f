"""Build an MLF into firmware for an Arm Cortex-M board that QEMU emulates, and run it there.

The program is the host harness (``c_runtime/host/mlf_main.c``) with the board's platform
header, start-up code and linker script (``c_runtime/board/``), cross-compiled with
``arm-none-eabi-gcc`` and newlib; QEMU runs it with semihosting, so the harness reads its
inputs and writes its outputs as host files.  Under ``-icount shift=0`` QEMU advances its clock
1 ns per instruction, so the SysTick ticks the harness counts around ``tvmgen_<name>_run``
give the instructions of one inference (ticks x 1e9 / the board's clock).
"""
import dataclasses
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Dict, List, Mapping, Sequence, Tuple

import numpy as np

from tvm_extension.api.resources import data_folder

from .host import HARNESS, SECTION_GC, HostBuildError, HostProgram, unpack
from .memory import MemoryReport, section_sizes

BOARD_FILES = data_folder(__package__, "c_runtime", "c_runtime") / "board"
INSTALL = "apt-get install -y gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm"
CC = "arm-none-eabi-gcc"
QEMU = "qemu-system-arm"
RUN_SECONDS = 1800  # an inference of the largest test network takes a few seconds in QEMU


class BoardError(HostBuildError):
    """The MLF could not be built or run on the board (one line for the user)."""


@dataclasses.dataclass(frozen=True)
class Board:
    core: str
    cpu_flags: Tuple[str, ...]
    linker_script: str
    clock_hz: int  # SysTick counts the processor clock: instructions = ticks * 1e9 / clock_hz


BOARDS: Dict[str, Board] = {
    "mps2-an385": Board("Cortex-M3", ("-mcpu=cortex-m3", "-mfloat-abi=soft"), "mps2.ld", 25_000_000),
    "mps2-an386": Board("Cortex-M4", ("-mcpu=cortex-m4", "-mfpu=fpv4-sp-d16", "-mfloat-abi=hard"), "mps2.ld",
                        25_000_000),
    "mps2-an500": Board("Cortex-M7", ("-mcpu=cortex-m7", "-mfpu=fpv5-d16", "-mfloat-abi=hard"), "mps2.ld",
                        25_000_000),
    "mps3-an547": Board("Cortex-M55", ("-mcpu=cortex-m55", "-mfloat-abi=hard"), "mps3.ld", 32_000_000),
}


def check_tools(cc: str = CC):
    """BoardError in one line, saying how to install them, if the cross compiler, newlib or QEMU is missing."""
    if shutil.which(cc) is None:
        raise BoardError(f"the Cortex-M cross compiler {cc} is not installed: {INSTALL}")
    specs = subprocess.run([cc, "-print-file-name=rdimon.specs"], capture_output=True, text=True).stdout.strip()
    if not Path(specs).is_absolute():
        raise BoardError(f"newlib for {cc} (rdimon.specs) is not installed: {INSTALL}")
    if shutil.which(QEMU) is None:
        raise BoardError(f"{QEMU} is not installed: {INSTALL}")


def board(name: str) -> Board:
    if name not in BOARDS:
        raise BoardError(f"unknown board '{name}' (boards: {', '.join(BOARDS)})")
    return BOARDS[name]


@dataclasses.dataclass
class BoardProgram(HostProgram):
    """The firmware (``executable`` is its ELF file) and its memory report."""
    board: str = ""
    memory: MemoryReport = None
    instructions: int = 0  # of the last inference run

    def run(self, inputs: Mapping[str, np.ndarray], repeat: int = 0) -> Tuple[Dict[str, np.ndarray], float]:
        """Run one inference in QEMU; returns outputs by name and its instructions (also in
        ``self.instructions``; the measured stack goes into ``self.memory.stack``)."""
        if repeat:
            raise BoardError("--repeat is for the host: on a board one inference is counted in instructions")
        work = self.executable.parent / "io"
        work.mkdir(exist_ok=True)
        names = []
        for i, array in enumerate(self.check_inputs(inputs)):
            names.append(f"in{i}.bin")
            array.tofile(work / names[-1])
        out_names = [f"out{i}.bin" for i in range(len(self.outputs))]
        # QEMU splits the command line at spaces: short names, relative to QEMU's folder.
        semihosting = ",".join(["enable=on,target=native", "arg=model", *(f"arg={n}" for n in names + out_names)])
        command = [QEMU, "-machine", self.board, "-nographic", "-monitor", "none", "-serial", "none",
                   "-semihosting-config", semihosting, "-icount", "shift=0", "-kernel", str(self.executable.resolve())]
        try:
            done = subprocess.run(command, cwd=work, capture_output=True, text=True, timeout=RUN_SECONDS)
        except subprocess.TimeoutExpired:
            raise BoardError(f"the model did not finish on {self.board} within {RUN_SECONDS} s") from None
        text = done.stdout + done.stderr
        measured = re.search(r"^board: ticks (\d+) stack (\d+) heap (\d+)$", done.stdout, re.MULTILINE)
        if done.returncode != 0 or measured is None:
            last = [l for l in text.splitlines() if l.strip() and not l.startswith("board:")]
            raise BoardError(f"the model failed on {self.board}: " + (last[-1] if last else f"exit {done.returncode}"))
        if "board: stack overflow" in done.stdout:
            raise BoardError(f"the model overflowed the {self.board} program's stack")
        self.instructions = int(measured.group(1)) * 1_000_000_000 // BOARDS[self.board].clock_hz
        self.memory.stack, self.memory.heap = int(measured.group(2)), int(measured.group(3))
        outputs = {t.name: np.fromfile(work / n, dtype=t.dtype).reshape(t.shape or (-1,))
                   for t, n in zip(self.outputs, out_names)}
        return outputs, 0.0


def _largest_frame(folder: Path, objects: Sequence[Path]) -> Tuple[int, str]:
    """The deepest single function frame of ``objects`` (gcc -fstack-usage's .su files)."""
    frames = [(0, "")]
    for obj in objects:
        su = folder / f"{obj.stem}.su"
        for line in su.read_text().splitlines() if su.is_file() else []:
            function, size, _ = line.rsplit("\t", 2)
            frames.append((int(size), function.rsplit(":", 1)[-1]))
    return max(frames)


def build(mlf, work_dir, board_name: str, cflags: Sequence[str] = ("-O2",), cc: str = CC) -> BoardProgram:
    """Unpack ``mlf`` into ``work_dir`` and cross-compile it for ``board_name`` into ``work_dir/model.elf``."""
    spec = board(board_name)
    check_tools(cc)
    work_dir = Path(work_dir)
    tree, prefix, inputs, outputs = unpack(mlf, work_dir)
    src = tree / "codegen" / "host" / "src"
    module = prefix[len("tvmgen_"):]
    generated = sorted(p for p in src.glob("*.c") if re.fullmatch(rf"{re.escape(module)}_lib\d+", p.stem))
    library = sorted(p for p in src.glob("*.c") if p not in generated)
    runtime = sorted((tree / "runtime" / "src").glob("*.c")) + [HARNESS, BOARD_FILES / "startup.c"]
    objects_dir = work_dir / "obj"
    objects_dir.mkdir(exist_ok=True)
    common = [*spec.cpu_flags, "-mthumb", *cflags, *SECTION_GC[:2], "-std=c11", "-fstack-usage",
              f"-I{tree / 'codegen' / 'host' / 'include'}", f"-I{tree / 'runtime' / 'include'}", f"-I{BOARD_FILES}",
              f'-DMLF_HEADER="{prefix}.h"', f"-DMLF_PREFIX={prefix}", '-DMLF_PLATFORM="mlf_platform.h"',
              "-DMLF_INPUT_SIZES=" + ",".join(str(t.size) for t in inputs),
              "-DMLF_OUTPUT_SIZES=" + ",".join(str(t.size) for t in outputs)]
    for source in generated + library + runtime:  # one object per source: the map file names them
        extra = source.with_suffix(".cflags").read_text().split() if source.with_suffix(".cflags").is_file() else []
        _compile(cc, [*common, *extra, "-c", "-o", str(objects_dir / f"{source.stem}.o"), str(source)])
    objects = [objects_dir / f"{s.stem}.o" for s in generated + library + runtime]
    elf, map_file = work_dir / "model.elf", work_dir / "model.map"
    _compile(cc, [*spec.cpu_flags, "-mthumb", "--specs=rdimon.specs", "-nostartfiles", f"-L{BOARD_FILES}",
                  f"-T{spec.linker_script}", SECTION_GC[2], f"-Wl,-Map={map_file}", "-o", str(elf),
                  *map(str, objects), "-lm"])

    parts = {f"{s.stem}.o": "generated" for s in generated} | {f"{s.stem}.o": "kernel library" for s in library}
    metadata = json.loads((tree / "metadata.json").read_text())
    (main,) = [m["memory"]["functions"]["main"][0] for m in metadata["modules"].values()]
    frame, function = _largest_frame(objects_dir, [objects_dir / f"{s.stem}.o" for s in library])
    report = MemoryReport(section_sizes(map_file, lambda path: parts.get(Path(path).name, "runtime")),
                          int(main["workspace_size_bytes"]), sum(t.size for t in inputs + outputs), frame, function)
    return BoardProgram(elf, inputs, outputs, board=board_name, memory=report)


def _compile(cc: str, arguments: List[str]):
    done = subprocess.run([cc, *arguments], capture_output=True, text=True)
    if done.returncode != 0:
        overflow = re.search(r"region `(\w+)' overflowed by (\d+) bytes", done.stderr)
        if overflow:  # the linker's own words name its paths twice: say what it means
            raise BoardError(f"the MLF does not fit the board's {overflow.group(1)}: "
                             f"{int(overflow.group(2))} bytes too many")
        lines = done.stderr.strip().splitlines()
        causes = [l for l in lines if re.search(r"error|undefined reference|overflowed|will not fit", l)
                  and not l.startswith("collect2")]
        first_error = (causes or lines or [f"exit {done.returncode}"])[0]
        raise BoardError(f"{cc} failed to build the MLF for the board: {first_error}")
