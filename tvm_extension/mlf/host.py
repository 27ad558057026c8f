"""Build an MLF archive into a host program with a C compiler, and run it on numpy arrays.

Only what an MLF holds is used: its generated C, its runtime folder, its metadata, plus
the project's host harness (``c_runtime/host/mlf_main.c``).
"""
import dataclasses
import json
import os
import re
import shlex
import subprocess
import tarfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from tvm_extension.api.resources import data_folder

HARNESS = data_folder(__package__, "c_runtime", "c_runtime") / "host" / "mlf_main.c"


class HostBuildError(Exception):
    """The MLF could not be built or run on the host (one line for the user)."""


@dataclasses.dataclass
class Tensor:
    name: str
    dtype: str
    size: int  # bytes
    shape: Tuple[int, ...] = ()


@dataclasses.dataclass
class HostProgram:
    executable: Path
    inputs: List[Tensor]
    outputs: List[Tensor]
    diagnostics: List[str] = dataclasses.field(default_factory=list)  # the last run's stderr, but its timing

    def filled_inputs(self, fill_mode: str = "random", seed: int = 0) -> Dict[str, np.ndarray]:
        """Inputs made as ``tvmc run --fill-mode`` makes them (zeros, ones, random)."""
        rng = np.random.default_rng(seed)
        make = {
            "zeros": lambda shape, dtype: np.zeros(shape, dtype),
            "ones": lambda shape, dtype: np.ones(shape, dtype),
            "random": lambda shape, dtype: rng.uniform(size=shape).astype(dtype),
        }[fill_mode]
        return {t.name: make(t.shape or (t.size // np.dtype(t.dtype).itemsize,), t.dtype) for t in self.inputs}

    def check_inputs(self, inputs: Mapping[str, np.ndarray], source: str = "") -> List[np.ndarray]:
        """The arrays to feed, in the model's order; HostBuildError, naming the input, ``source``
        and both shapes, for a missing input or another shape (size-1 dimensions aside)."""
        arrays = []
        for tensor in self.inputs:
            if tensor.name not in inputs:
                raise HostBuildError(f"missing input '{tensor.name}'{source} "
                                     f"(model inputs: {', '.join(t.name for t in self.inputs)})")
            given = np.asarray(inputs[tensor.name])
            array = np.ascontiguousarray(given, dtype=tensor.dtype)
            squeezed = [tuple(d for d in shape if d != 1) for shape in (given.shape, tensor.shape)]
            if array.nbytes != tensor.size or (tensor.shape and squeezed[0] != squeezed[1]):
                expected = tensor.shape or f"{tensor.size} bytes"
                raise HostBuildError(f"input '{tensor.name}'{source} has shape {given.shape}, "
                                     f"the model expects {expected} {tensor.dtype}")
            arrays.append(array)
        return arrays

    def run(self, inputs: Mapping[str, np.ndarray], repeat: int = 0) -> Tuple[Dict[str, np.ndarray], float]:
        """Run once on ``inputs`` (by name); returns outputs by name and seconds per run if ``repeat``."""
        work = self.executable.parent / "io"
        work.mkdir(exist_ok=True)
        args = [str(self.executable)] + (["-r", str(repeat)] if repeat else [])
        for array in self.check_inputs(inputs):
            path = work / f"in{len(args)}.bin"
            array.tofile(path)
            args.append(str(path))
        out_paths = [work / f"out{i}.bin" for i in range(len(self.outputs))]
        args += [str(p) for p in out_paths]
        done = subprocess.run(args, capture_output=True, text=True)
        if done.returncode != 0:
            last = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"
            raise HostBuildError(last.removeprefix("error: "))  # the harness's own lines start with it
        seconds, self.diagnostics = 0.0, []
        for line in done.stderr.splitlines():
            if line.startswith("seconds_per_run:"):
                seconds = float(line.split(":")[1])
            else:  # what the program's libraries print (a hardware model's counters...): for mlf run to pass on
                self.diagnostics.append(line)
        outputs = {
            t.name: np.fromfile(p, dtype=t.dtype).reshape(t.shape or (-1,)) for t, p in zip(self.outputs, out_paths)
        }
        return outputs, seconds


def _c_name(name: str) -> str:
    return re.sub(r"\W", "_", name)


def _struct_fields(header: str, struct: str) -> List[str]:
    body = re.search(r"struct\s+%s\s*\{([^}]*)\}" % re.escape(struct), header)
    return re.findall(r"void\*\s*(\w+)\s*;", body.group(1)) if body else []


def _describe(tree: Path) -> Tuple[str, List[Tensor], List[Tensor]]:
    metadata = json.loads((tree / "metadata.json").read_text())
    (module_name, module), = metadata["modules"].items()
    if module["executors"] != ["aot"]:
        raise HostBuildError("the MLF was not built for the AOT executor: compile with --executor aot")
    main = module["memory"]["functions"]["main"][0]
    prefix = f"tvmgen_{module_name}"
    header_path = tree / "codegen" / "host" / "include" / f"{prefix}.h"
    if not header_path.exists():
        raise HostBuildError("the MLF has no C interface header: compile with --executor-aot-interface-api c")
    header = header_path.read_text()

    def ordered(kind: str, entries: dict) -> List[Tensor]:
        by_c_name = {_c_name(name): (name, info) for name, info in entries.items()}
        return [
            Tensor(by_c_name[f][0], by_c_name[f][1]["dtype"], int(by_c_name[f][1]["size"]))
            for f in _struct_fields(header, f"{prefix}_{kind}")
        ]

    inputs, outputs = ordered("inputs", main["inputs"]), ordered("outputs", main["outputs"])
    shapes = [tuple(s) for s in main.get("output_shapes", [])]
    if len(shapes) == len(outputs):
        for tensor, shape in zip(outputs, shapes):
            tensor.shape = shape
    for tensor in inputs:
        tensor.shape = tuple(main.get("input_shapes", {}).get(tensor.name, ()))
    return prefix, inputs, outputs


# As firmware is linked: functions nothing calls (a kernel library's unused entry points, TVM
# runtime helpers) are left out of the program.
SECTION_GC = ("-ffunction-sections", "-fdata-sections", "-Wl,--gc-sections")


def is_mlf(path: os.PathLike) -> bool:
    """A tar archive with ``metadata.json`` at its top: Model Library Format."""
    if not tarfile.is_tarfile(path):
        return False
    with tarfile.open(path) as tar:
        return any(m.name.removeprefix("./") == "metadata.json" for m in tar.getmembers())


def unpack(mlf: os.PathLike, work_dir: Path) -> Tuple[Path, str, List[Tensor], List[Tensor]]:
    """``mlf`` unpacked into ``work_dir/mlf``: that folder, the interface prefix, inputs, outputs."""
    tree = work_dir / "mlf"
    tree.mkdir(parents=True, exist_ok=True)
    try:
        with tarfile.open(mlf) as archive:
            archive.extractall(tree, filter="data")
    except (OSError, tarfile.TarError) as exc:
        reason = str(exc).splitlines()[0].rstrip(":")  # tarfile lists each compression it tried
        raise HostBuildError(f"cannot read MLF archive {mlf}: {reason}") from None
    if not (tree / "metadata.json").is_file():
        raise HostBuildError(f"{mlf} holds no metadata.json: not a Model Library Format archive (tvmc compile -f mlf)")
    return (tree, *_describe(tree))


def default_cc() -> str:
    """The C compiler: ``$CC`` as make takes it (e.g. ``ccache gcc``), else gcc."""
    return os.environ.get("CC", "").strip() or "gcc"


def build(mlf: os.PathLike, work_dir: os.PathLike, cc: Optional[str] = None,
          cflags: Sequence[str] = ("-O2",), device=None) -> HostProgram:
    """Unpack ``mlf`` into ``work_dir`` and compile it with ``cc`` (default ``default_cc()``; a
    command line, so ``ccache gcc`` works) into ``work_dir/model``: one object per source, compiled
    side by side on the machine's cores, then linked; with a ``device`` (``devices.device``), its
    flags added and its link instead of the C compiler's."""
    cc = cc or default_cc()
    cflags = [*cflags, *(device.cflags if device is not None else ())]
    # The caller's own include folders, as the caller named them (the compiler runs elsewhere).
    cflags = [f"-I{Path(f[2:]).resolve()}" if f.startswith("-I") and len(f) > 2 else f for f in cflags]
    work_dir = Path(work_dir)
    tree, prefix, inputs, outputs = unpack(mlf, work_dir)
    # Paths relative to the unpacked tree (the compiler runs there): the same library source gives
    # the same command wherever the MLF was unpacked, so a compiler cache (ccache) reuses its object.
    sources = [p.relative_to(tree) for p in sorted((tree / "codegen" / "host" / "src").glob("*.c"))
               + sorted((tree / "runtime" / "src").glob("*.c"))]
    includes = ["-Icodegen/host/include", "-Iruntime/include"]
    # Only the harness sees the model's interface macros: the library's objects stay the same from
    # model to model.
    interface = [f'-DMLF_HEADER="{prefix}.h"', f"-DMLF_PREFIX={prefix}",
                 "-DMLF_INPUT_SIZES=" + ",".join(str(t.size) for t in inputs),
                 "-DMLF_OUTPUT_SIZES=" + ",".join(str(t.size) for t in outputs)]
    objects_dir = work_dir.resolve() / "obj"
    objects_dir.mkdir(exist_ok=True)
    jobs = []
    for index, source in enumerate([HARNESS, *sources]):
        # A library source with its own flags (NAME.cflags beside it) is compiled with them.
        own = (tree / source).with_suffix(".cflags")
        extra = own.read_text().split() if own.is_file() else []
        obj = objects_dir / f"{index:03d}_{source.stem}.o"  # sources of two folders may share a name
        jobs.append((obj, [*cflags, *extra, *SECTION_GC[:2], "-std=c11", *includes,
                           *(interface if source == HARNESS else []), "-c", "-o", str(obj), str(source)]))
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        list(pool.map(lambda job: _compile(cc, job[1], cwd=tree), jobs))  # the first failure is raised
    executable = work_dir / "model"
    if device is not None:
        device.link(tree, [obj for obj, _ in jobs], executable.resolve(), work_dir.resolve())
    else:
        _compile(cc, [*cflags, SECTION_GC[2], "-o", str(executable), *(str(obj) for obj, _ in jobs), "-lm"])
    return HostProgram(executable, inputs, outputs)


def _compile(cc: str, arguments: Sequence[str], cwd: Optional[Path] = None):
    try:
        done = subprocess.run([*shlex.split(cc), *arguments], capture_output=True, text=True, cwd=cwd)
    except OSError as exc:
        raise HostBuildError(f"cannot run the C compiler {cc}: {exc.strerror}") from None
    if done.returncode != 0:
        first_error = next((l for l in done.stderr.splitlines() if "error" in l), done.stderr.strip()[:300])
        raise HostBuildError(f"{cc} failed to build the MLF: {first_error}")
