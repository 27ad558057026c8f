"""One point of a sweep, in its own working folder: compile with TVM's own tvmc (its command
line, run in the worker's process), build and run the MLF on the host with the hardware model's
counters on, compare with the model's CPU build, and return a flat record.  Also the reference
itself: the same inputs through TVM's CPU build (llvm), once per model."""
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, Optional

import numpy as np

from .grid import Model, Point, relax_command

FLOAT_TOLERANCE = 1e-4  # max |got - expected| <= this x max(1, max |expected|)
LOWER_BOUND = re.compile(r"\(lower bound (\d+) bytes")  # what the backends' passes log per offloaded function


def _inputs(shapes: Dict[str, tuple], dtypes: Dict[str, str], seed: int = 0) -> Dict[str, np.ndarray]:
    """Deterministic inputs: standard normal floats, integers over their whole range."""
    rng = np.random.default_rng(seed)
    made = {}
    for name in sorted(shapes):
        dtype = np.dtype(dtypes[name])
        if dtype.kind in "iu":
            info = np.iinfo(dtype)
            made[name] = rng.integers(info.min, int(info.max) + 1, shapes[name]).astype(dtype)
        else:
            made[name] = rng.standard_normal(shapes[name]).astype(dtype)
    return made


def _shape_dict(text: Optional[str]):
    if not text:
        return None
    from tvm.driver.tvmc.shape_parser import parse_shape_string  # pylint: disable=import-outside-toplevel

    return parse_shape_string(text)


def reference(model: Model):
    """(inputs, outputs) of TVM's own CPU build of ``model``: the model loaded as tvmc loads it;
    an ONNX QDQ model first turned into integer QNN ops (the graph an int8 backend offloads)."""
    import tvm  # pylint: disable=import-outside-toplevel
    from tvm import relay  # pylint: disable=import-outside-toplevel
    from tvm.contrib import graph_executor  # pylint: disable=import-outside-toplevel
    from tvm.driver import tvmc  # pylint: disable=import-outside-toplevel

    loaded = tvmc.load(str(model.path), shape_dict=_shape_dict(model.input_shapes))
    mod = relay.transform.InferType()(loaded.mod)  # the TFLite frontend leaves the types to infer
    if model.path.suffix == ".onnx" and "qnn.quantize" in mod.astext(show_meta_data=False):
        mod = relay.transform.InferType()(relay.transform.FakeQuantizationToInteger()(mod))
    params = [p for p in mod["main"].params if p.name_hint not in loaded.params]
    inputs = _inputs({p.name_hint: tuple(int(d) for d in p.checked_type.shape) for p in params},
                     {p.name_hint: p.checked_type.dtype for p in params})
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm -mtriple=x86_64-linux-gnu", params=loaded.params)
    runtime = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    runtime.set_input(**inputs)
    runtime.run()
    return inputs, [runtime.get_output(i).numpy() for i in range(runtime.get_num_outputs())]


def _one_line(text: str) -> str:
    lines = [l.strip() for l in text.strip().splitlines() if l.strip()]
    return lines[-1][:300] if lines else "no message"


def _counters(path: Path) -> Dict[str, int]:
    """The hardware model's report (``BACKEND.name: value`` lines), without the prefix."""
    if not path.is_file():
        return {}
    pairs = (line.split(": ") for line in path.read_text().splitlines() if ": " in line)
    return {key.split(".", 1)[1]: int(value) for key, value in pairs}


def _summary(counters: Dict[str, int]) -> dict:
    """The figures every backend is compared by, from whichever counters it reports."""
    c = counters
    dma_cycles = c.get("dma_cycles", 0)
    compute_cycles = c.get("compute_cycles", c.get("core_cycles", 0))
    issued, useful = c.get("macs_issued"), c.get("macs_useful")
    return {
        "dma_bytes": c.get("dma_in_bytes", 0) + c.get("dma_out_bytes", 0),
        "dma_transfers": c.get("dma_in_calls", 0) + c.get("dma_out_calls", 0),
        "engine_calls": c.get("compute_calls", c.get("core_calls", 0)),
        "macs": c.get("macs", useful or 0),
        "utilisation": useful / issued if issued else None,
        "dma_cycles": dma_cycles,
        "compute_cycles": compute_cycles,
        # DMA then compute (no overlap), and the overlapped bound (double buffering hides the shorter)
        "est_cycles": dma_cycles + compute_cycles,
        "est_cycles_overlap": max(dma_cycles, compute_cycles),
        # what the hardware costs: its scratchpad, and its MACs per cycle (a core of M x N x K tiles
        # does M*N*K MACs in K cycles)
        "scratchpad": c.get("spad_bytes"),
        "macs_per_cycle": c.get("macs_per_cycle") or (c["tile_m"] * c["tile_n"] if "tile_m" in c else None),
    }


def _text_bytes(executable: Path) -> Optional[int]:
    """Bytes of machine code (the ``.text`` section): the weights, ``const`` arrays in ``.rodata``
    on one engine and elsewhere on the other, are ``constants_bytes``."""
    try:
        done = subprocess.run(["size", "-A", str(executable)], capture_output=True, text=True)
    except OSError:  # no binutils: the column stays empty
        return None
    text = [line.split() for line in done.stdout.splitlines() if line.startswith(".text ")]
    return int(text[0][1]) if done.returncode == 0 and text else None


def _compare(got, expected) -> tuple:
    """(matched, max abs error): integers equal, floats within FLOAT_TOLERANCE of the output's scale."""
    if len(got) != len(expected):
        return False, None
    worst, matched = 0.0, True
    for g, e in zip(got, expected):
        g, e = np.asarray(g), np.asarray(e)
        if g.size != e.size:
            return False, None
        g, e = g.reshape(e.shape), e
        error = float(np.max(np.abs(g.astype(np.float64) - e.astype(np.float64)))) if e.size else 0.0
        worst = max(worst, error)
        if e.dtype.kind in "iu":
            matched &= g.dtype == e.dtype and error == 0
        else:
            matched &= error <= FLOAT_TOLERANCE * max(1.0, float(np.max(np.abs(e))) if e.size else 1.0)
    return bool(matched), worst


def _on_board(mlf: Path, work: Path, board: str, inputs, host_outputs) -> dict:
    """The MLF cross-built for ``board`` and run once in QEMU: its ROM, RAM (static, and with the
    measured stack and heap) and instructions per inference; outputs must equal the host run's.
    A model the board cannot hold is a figure too (``board_error``), not a failed point."""
    from tvm_extension.mlf import board as boards  # pylint: disable=import-outside-toplevel

    record = {"board": board}
    try:
        program = boards.build(mlf, work, board)
        outputs, _ = program.run(inputs)
    except boards.BoardError as err:
        return {**record, "board_error": _one_line(str(err))}
    memory = program.memory
    same = all(np.array_equal(outputs[name], host_outputs[name]) for name in host_outputs)
    return {**record, "board_rom": memory.rom(), "board_ram": memory.ram(), "board_static_ram": memory.static_ram(),
            "board_instructions": program.instructions, "board_matches_host": same,
            "board_error": None if same else "the board's outputs differ from the host run's"}


def _on_device(mlf: Path, work: Path, point: Point, inputs, host_outputs) -> dict:
    """The MLF built against ``point.device`` and run: its outputs must equal the host run's; its
    counters (``dev_*``: the device's own, e.g. the RTL's cycles) and its cost (the device's
    ``cost(tree)``, e.g. the core's synthesized area), if it has one."""
    from tvm_extension.mlf import build, devices  # pylint: disable=import-outside-toplevel

    device = devices.device(point.device)
    program = build(mlf, work / "build", device=device)
    report = work / "counters.txt"
    variable = f"{point.backend.upper()}_REPORT"
    os.environ[variable] = str(report)
    try:
        outputs, _ = program.run(inputs)
    finally:
        del os.environ[variable]
    if not all(np.array_equal(outputs[name], host_outputs[name]) for name in host_outputs):
        raise RuntimeError(f"the outputs on device {point.device} differ from the C model's run")
    counters = _counters(report)
    own = {k: v for k, v in counters.items() if k.startswith(f"{point.device}_")}  # the device's counters
    record = {"device": point.device, "device_cycles": sum(v for k, v in own.items() if k.endswith("_cycles"))}
    record.update({f"dev_{k}": v for k, v in own.items()})
    cost = getattr(device, "cost", None)
    if cost is not None:
        record.update(cost(work / "build" / "mlf"))
    return record


_FD_STREAMS = []  # text streams on file descriptors 1 and 2 themselves, made once per process


def _tvmc(argv, cwd: Path):
    """``tvmc ARGV`` in this process: (exit code, stdout, stderr), captured at the file descriptors
    (TVM's C++ logs too).  A worker imports TVM and loads the extension once, not once per point
    (1.3 to 2 s of a point); the MLF is byte for byte a separate ``tvmc compile``'s, since the
    target's attributes are parsed per compile (tests/test_sweep.py compares them)."""
    from tvm.driver.tvmc.main import _main  # pylint: disable=import-outside-toplevel

    if not _FD_STREAMS:  # Python's own streams may write elsewhere (pytest's capture); these follow dup2
        _FD_STREAMS.extend(io.TextIOWrapper(io.FileIO(fd, "w", closefd=False), line_buffering=True) for fd in (1, 2))
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        sys.stdout.flush()
        sys.stderr.flush()
        streams, saved, here = (sys.stdout, sys.stderr), (os.dup(1), os.dup(2)), os.getcwd()
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        sys.stdout, sys.stderr = _FD_STREAMS
        os.chdir(cwd)
        try:
            code = _main(argv)
        except SystemExit as exit_:  # argparse's usage errors
            code = exit_.code
        except Exception as error:  # pylint: disable=broad-except  # what a traceback's last line says
            print(f"{type(error).__name__}: {error}", file=sys.stderr)
            code = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            sys.stdout, sys.stderr = streams
            for fd, copy in zip((1, 2), saved):
                os.dup2(copy, fd)
                os.close(copy)
            os.chdir(here)
        out.seek(0)
        err.seek(0)
        return code, out.read(), err.read()


def _relax_compile(argv, cwd: Path):
    """``tvmc ARGV`` of the Relax engine's environment: (exit code, stdout, stderr)."""
    environment = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}  # not this one's
    done = subprocess.run([str(relax_command()), *argv], cwd=cwd, capture_output=True, text=True, env=environment)
    return done.returncode, done.stdout, done.stderr


def run_point(point: Point, inputs, expected, work_root: Optional[str] = None, keep: bool = False) -> dict:
    """The record of one point; a failure becomes ``error`` (its one line), never an exception."""
    from tvm_extension.mlf import build  # pylint: disable=import-outside-toplevel

    record = {"model": point.model.label, "backend": point.backend, **dict(point.attrs),
              "board": point.board, "engine": point.engine, "matched": False, "error": None,
              "host": os.uname().nodename, "pid": os.getpid()}
    started = time.time()
    if work_root:  # --keep-work: under the cache, made on the node the point runs on
        os.makedirs(work_root, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"sweep-{point.backend}-", dir=work_root))
    stage = "compile"
    try:
        mlf = work / "model.tar"
        command = ["compile", "--target", point.backend, *point.attr_options(), str(point.model.path),
                   "-f", "mlf", "-o", str(mlf)]
        if point.model.input_shapes:
            command += ["--input-shapes", point.model.input_shapes]
        if point.engine == "relax":
            code, stdout, stderr = _relax_compile(command + ["-v"], work)
        else:
            code, stdout, stderr = _tvmc(command + ["-v"], work)
        record["compile_seconds"] = round(time.time() - started, 3)
        log = stdout + stderr
        if code != 0:
            raise RuntimeError(_one_line(stderr or stdout))
        offload = re.search(rf"\[{point.backend}\] offloaded: (.*)", log)
        record["offloaded"] = offload.group(1) if offload else ""
        record["offloaded_functions"] = int(re.search(r"in (\d+) functions", offload.group(1)).group(1)) \
            if offload and "functions" in offload.group(1) else 0
        record["lower_bound_bytes"] = sum(int(b) for b in LOWER_BOUND.findall(log))
        macs = re.search(rf"\[{point.backend}\] MACs of convs and dense layers: (\d+); on the core (\d+) \([^)]*\); "
                         r"never on the core: (.*)", log)  # a backend reporting what its core never sees
        if macs:
            record.update(model_macs=int(macs.group(1)), core_macs=int(macs.group(2)), never_on_core=macs.group(3).strip())
        stage = "build"
        program = build(mlf, work / "build")
        record["code_bytes"] = _text_bytes(program.executable)
        metadata = json.loads((work / "build" / "mlf" / "metadata.json").read_text())
        main = next(iter(metadata["modules"].values()))["memory"]["functions"]["main"][0]
        record["workspace_bytes"] = main.get("workspace_size_bytes")
        record["constants_bytes"] = main.get("constants_size_bytes")
        stage = "run"
        report = work / "counters.txt"
        variable = f"{point.backend.upper()}_REPORT"
        os.environ[variable] = str(report)  # the task's own process: no other run reads it
        try:
            outputs, _ = program.run(inputs)
        finally:
            del os.environ[variable]
        counters = _counters(report)
        record.update({f"c_{k}": v for k, v in counters.items()})
        record.update(_summary(counters))
        record["matched"], record["max_error"] = _compare(list(outputs.values()), expected)
        if not record["matched"]:
            record["error"] = f"outputs differ from TVM's CPU build (max error {record['max_error']:.3g})"
        if point.board:
            stage = "board"
            record.update(_on_board(mlf, work / "board", point.board, inputs, outputs))
        if point.device:
            stage = "device"
            record.update(_on_device(mlf, work / "device", point, inputs, outputs))
    except Exception as err:  # pylint: disable=broad-except
        record["error"] = f"{stage}: {_one_line(str(err)) if str(err) else type(err).__name__}"
    finally:
        record["seconds"] = round(time.time() - started, 3)
        if not keep:
            import shutil  # pylint: disable=import-outside-toplevel

            shutil.rmtree(work, ignore_errors=True)
    return record
