"""QVanilla's packed entries layer by layer, on this machine and on the emulated Cortex-M boards:
what the per-layer benchmark (``benchmarks/layers.py``) measures and the board kernel tests check.

One program (``c/board/qvanilla_layers_main.c``) calls the entries generated code calls on a file
of layers; built with the host's gcc it runs the portable C, cross-compiled for a board (with
``tvm_extension.mlf.board``'s start-up code and linker scripts) it runs in QEMU under ``-icount``,
so its SysTick ticks count instructions.  Variants: ``portable`` (plain C), ``dsp`` (the DSP
extension's SIMD32 multiply-adds: Cortex-M4 and up), ``mve`` (Helium: Cortex-M55), each chosen at
compile time by the core's macros, the lower ones forced by ``QVANILLA_PORTABLE`` and
``QVANILLA_NO_MVE``.
"""
import dataclasses
import re
import subprocess
from pathlib import Path
from typing import List, Optional, Sequence

import numpy as np

from tvm_extension.mlf import board as boards

from .codegen import KERNEL_DIR, KIT_DIR
from .packing import interleave8, pack_conv, pack_depthwise
from .scratch import buffer_size, packed_kind

HARNESS = KERNEL_DIR / "board" / "qvanilla_layers_main.c"
VARIANTS = {"portable": ["-DQVANILLA_PORTABLE"], "dsp": ["-DQVANILLA_NO_MVE"], "mve": []}
BOARD_VARIANTS = {"mps2-an386": ("portable", "dsp"), "mps3-an547": ("portable", "dsp", "mve")}


@dataclasses.dataclass(frozen=True)
class Shape:
    """A layer: NHWC input h x w x ic, a kh x kw filter, oc outputs (= ic if depthwise), TFLite's
    SAME padding (the extra row and column at the bottom and right) or VALID."""
    name: str
    h: int
    w: int
    ic: int
    oc: int
    kh: int
    kw: int
    stride: int = 1
    depthwise: bool = False
    same: bool = True  # TFLite's SAME padding, else VALID

    @property
    def out_hw(self):
        if not self.same:
            return (self.h - self.kh) // self.stride + 1, (self.w - self.kw) // self.stride + 1
        return -(-self.h // self.stride), -(-self.w // self.stride)

    @property
    def pads(self):
        """(top, left); the rest of SAME's padding is at the bottom and right."""
        if not self.same:
            return 0, 0
        (oh, ow) = self.out_hw
        return (max((oh - 1) * self.stride + self.kh - self.h, 0) // 2,
                max((ow - 1) * self.stride + self.kw - self.w, 0) // 2)

    @property
    def macs(self) -> int:
        """Multiply-adds of the layer, padding taps included (as CMSIS-NN's figures count)."""
        oh, ow = self.out_hw
        return oh * ow * self.oc * self.kh * self.kw * (1 if self.depthwise else self.ic)


@dataclasses.dataclass
class Layer:
    """One call: the shape, its tensors (packed weights, table) and quantization.  Dense layers'
    weights int16 (``pack_conv``: the packed entry) or int8 (``interleave8``: the packed8 entry)."""
    shape: Shape
    x: np.ndarray
    packed: np.ndarray
    table: np.ndarray
    input_zp: int
    output_zp: int
    act: tuple
    rounding: int
    budget: int = 0  # the scratch the call gets: buffer_size's for this QVANILLA_SCRATCH_BUDGET

    @property
    def kind(self) -> str:
        """The entry (scratch.KINDS)."""
        return packed_kind(self.shape.depthwise, self.packed.dtype == np.int8)

    @property
    def scratch(self) -> int:
        return buffer_size(self.kind, self.shape.kh, self.shape.kw, self.shape.ic, self.shape.oc, self.budget)

    def with_int8_weights(self) -> Optional["Layer"]:
        """This dense layer for the packed8 entry, None if its weights leave int8."""
        packed8 = None if self.shape.depthwise else interleave8(self.packed)
        return None if packed8 is None else dataclasses.replace(self, packed=packed8)

    def record(self) -> bytes:
        s, (oh, ow), (pt, pl) = self.shape, self.shape.out_hw, self.shape.pads
        kind = {"conv2d_packed_s8": 0, "depthwise_conv2d_packed_s8": 1, "conv2d_packed8_s8": 2}[self.kind]
        header = [kind, s.h, s.w, s.ic, oh, ow, s.oc, s.kh, s.kw, s.stride, s.stride, pt, pl,
                  self.input_zp, self.output_zp, *self.act, self.rounding, self.scratch, self.packed.size]
        weights = self.packed.astype("<i2") if self.packed.dtype != np.int8 else self.packed
        parts = [np.array(header, "<i4").tobytes(), self.x.tobytes(), weights.tobytes(),
                 self.table.astype("<i4").tobytes()]
        return b"".join(p + bytes(-len(p) % 4) for p in parts)


def random_layer(shape: Shape, rng: np.random.Generator, rounding: int = 1, relu: bool = False) -> Layer:
    """``shape`` with random int8 tensors and the quantization of a trained int8 layer (TFLite's:
    symmetric per-channel weights, multipliers in [2^30, 2^31), shifts that spread the outputs)."""
    s = shape
    x = rng.integers(-128, 128, (s.h, s.w, s.ic), dtype=np.int8)
    input_zp, output_zp = int(rng.integers(-20, 21)), int(rng.integers(-20, 21))
    if s.depthwise:
        w = rng.integers(-127, 128, (s.kh, s.kw, s.ic), dtype=np.int8)
        bias = rng.integers(-2000, 2000, s.ic, dtype=np.int32)
        packed, folded = pack_depthwise(w, 0, input_zp, bias)
        k = s.kh * s.kw
    else:
        w = rng.integers(-127, 128, (s.kh, s.kw, s.ic, s.oc), dtype=np.int8)
        bias = rng.integers(-20000, 20000, s.oc, dtype=np.int32)
        packed, folded = pack_conv(w, 0, input_zp, bias)
        k = s.kh * s.kw * s.ic
    spread = 40 / (74 * 73 * np.sqrt(k) * 0.75)  # outputs of about 40 from sums of about 74 * 73 * sqrt(k)
    shift = np.clip(np.round(np.log2(spread)) + rng.integers(-1, 2, s.oc), -31, 30).astype(np.int32)
    multiplier = rng.integers(1 << 30, (1 << 31) - 1, s.oc, dtype=np.int64).astype(np.int32)
    table = np.stack([folded.astype(np.int32), multiplier, shift])
    act = (output_zp, 127) if relu else (-128, 127)
    return Layer(shape, x, packed, table, input_zp, output_zp, act, rounding)


@dataclasses.dataclass
class Result:
    output: np.ndarray
    status: int
    instructions: int  # of the first call on a board (0 on the host)
    nanoseconds: int   # of the first call on the host (0 on a board)
    scratch_used: int  # bytes of scratch either call wrote
    repeatable: bool   # both calls gave the same output, whatever the scratch held


class LayersError(RuntimeError):
    """The program could not be built or run (one line)."""


def _run(command: List[str], what: str, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run(command, capture_output=True, text=True, **kwargs)
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        raise LayersError(f"{what} failed: {lines[0] if lines else f'exit {done.returncode}'}")
    return done


def build(work: Path, board: Optional[str] = None, variant: str = "", cflags: Sequence[str] = ("-O2",)) -> Path:
    """The program for ``board`` (None: this machine, portable C) in ``variant``, in ``work``."""
    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    sources = [HARNESS, *sorted(KERNEL_DIR.glob("*.c"))]
    includes = [f"-I{KERNEL_DIR}", f"-I{KIT_DIR}"]
    if board is None:
        program = work / "layers_host"
        _run(["gcc", *cflags, "-std=c11", *includes, "-o", str(program), *map(str, sources)], "gcc")
        return program
    spec = boards.board(board)
    boards.check_tools()
    program = work / f"layers_{board}_{variant}.elf"
    _run([boards.CC, *spec.cpu_flags, "-mthumb", *cflags, "-std=c11", *includes, f"-I{boards.BOARD_FILES}",
          *VARIANTS[variant], "--specs=rdimon.specs", "-nostartfiles", f"-L{boards.BOARD_FILES}",
          f"-T{spec.linker_script}", "-o", str(program), *map(str, sources), str(boards.BOARD_FILES / "startup.c"),
          "-lm"], boards.CC)
    return program


def run(program: Path, layers: Sequence[Layer], board: Optional[str] = None) -> List[Result]:
    """Each layer called by ``program`` (built by ``build`` for ``board``)."""
    work = program.parent / f"{program.stem}_io"
    work.mkdir(exist_ok=True)
    (work / "layers.bin").write_bytes(b"".join(layer.record() for layer in layers))
    if board is None:
        done = _run([str(program.resolve()), "layers.bin", "out.bin"], "the layers program", cwd=work)
    else:
        semihosting = "enable=on,target=native,arg=program,arg=layers.bin,arg=out.bin"
        done = _run([boards.QEMU, "-machine", board, "-nographic", "-monitor", "none", "-serial", "none",
                     "-semihosting-config", semihosting, "-icount", "shift=0", "-kernel", str(program.resolve())],
                    f"the layers program on {board}", cwd=work, timeout=boards.RUN_SECONDS)
    lines = re.findall(r"^layer: (-?\d+) (\d+) (\d+) (\d)$", done.stdout, re.MULTILINE)
    if len(lines) != len(layers):
        raise LayersError(f"the layers program answered {len(lines)} of {len(layers)} layers")
    data, at, results = (work / "out.bin").read_bytes(), 0, []
    clock = boards.BOARDS[board].clock_hz if board else 1
    for layer, (status, ticks, used, same) in zip(layers, lines):
        (oh, ow) = layer.shape.out_hw
        n = oh * ow * layer.shape.oc
        output = np.frombuffer(data[at:at + n], np.int8).reshape(oh, ow, layer.shape.oc)
        at += n
        results.append(Result(output, int(status), int(ticks) * 1_000_000_000 // clock if board else 0,
                              0 if board else int(ticks), int(used), same == "1"))
    return results
