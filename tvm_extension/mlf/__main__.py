"""Build an MLF on the host and run it on input files.

    python -m tvm_extension.mlf build model.tar -o build/            # -> build/model
    python -m tvm_extension.mlf run model.tar -i input.npz -o output.npz [--repeat 100]
    python -m tvm_extension.mlf run --board mps2-an386 model.tar -i input.npz -o output.npz
    python -m tvm_extension.mlf run --device rtl model.tar -i input.npz -o output.npz

With --board, the MLF is cross-built for that Arm Cortex-M board and run in QEMU (one inference:
its instructions and the firmware's memory are printed).  With --device, a backend's library is
linked against that device instead of its C model (``devices.py``: Chocolate's ``rtl``, its core's
Verilog under Verilator, every core call compared with the model).

Inputs are an ``.npz`` keyed by input name, or an ``.npy`` for a one-input model.
Outputs are written as an ``.npz`` keyed by output name.
"""
import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

from . import board as boards
from . import devices
from .host import HostBuildError, build


def _read_inputs(path: Path, program):
    """The inputs in ``path``, checked against the model's (one line naming the file otherwise)."""
    try:
        if path.suffix == ".npy":
            if len(program.inputs) != 1:
                raise HostBuildError(f"the model has {len(program.inputs)} inputs: give an .npz keyed by input name")
            inputs = {program.inputs[0].name: np.load(path)}
        else:
            with np.load(path) as data:
                inputs = dict(data)
    except (OSError, ValueError, EOFError) as exc:  # numpy's words for a file that is no .npy/.npz
        raise HostBuildError(f"cannot read inputs from {path}, not an .npy or .npz file: "
                             f"{str(exc).splitlines()[0]}") from None
    program.check_inputs(inputs, f" in {path}")
    return inputs


def _check_paths(args):
    """What the user named, checked before building (a build takes seconds)."""
    if not args.mlf.is_file():
        raise HostBuildError(f"MLF archive {args.mlf} does not exist")
    if args.command != "run":
        return
    if not args.inputs.is_file():
        raise HostBuildError(f"input file {args.inputs} does not exist")
    if args.outputs.is_dir():
        raise HostBuildError(f"output path {args.outputs} is a folder: give a file name, e.g. {args.outputs / 'out.npz'}")
    if not args.outputs.parent.is_dir():
        raise HostBuildError(f"output folder {args.outputs.parent} of -o {args.outputs} does not exist: create it first")


def _joined_cflags(argv):
    """``--cflags -O0`` as ``--cflags=-O0``: argparse takes a value that starts with a dash for an option."""
    joined = []
    for arg in argv:
        if joined and joined[-1] == "--cflags":
            joined[-1] = f"--cflags={arg}"
        else:
            joined.append(arg)
    return joined


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tvm_extension.mlf", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("build", "run"):
        cmd = sub.add_parser(name)
        cmd.add_argument("mlf", type=Path, help="Model Library Format archive (tvmc compile -f mlf)")
        cmd.add_argument("--cc", help=f"C compiler command (default $CC, else gcc; with --board {boards.CC})")
        cmd.add_argument("--board", metavar="BOARD",
                         help="cross-build for this QEMU board and run there: "
                         + ", ".join(f"{n} ({b.core})" for n, b in boards.BOARDS.items()))
        cmd.add_argument("--cflags", default="-O2", help="C compiler flags (default -O2)")
        cmd.add_argument("--device", metavar="DEVICE", help="link a backend's library against this device "
                         "instead of its C model (installed: " + (", ".join(sorted(devices.available())) or "none") + ")")
    sub.choices["build"].add_argument("-o", "--output", type=Path, required=True, help="build folder")
    run = sub.choices["run"]
    run.add_argument("-i", "--inputs", type=Path, required=True, help=".npz keyed by input name, or .npy")
    run.add_argument("-o", "--outputs", type=Path, required=True, help=".npz to write the outputs to")
    run.add_argument("--repeat", type=int, default=0, help="time this many runs and print seconds per run")
    args = parser.parse_args(_joined_cflags(sys.argv[1:] if argv is None else list(argv)))

    def compile_in(work):
        if args.board:
            return boards.build(args.mlf, work, args.board, args.cflags.split(), args.cc or boards.CC)
        return build(args.mlf, work, args.cc, args.cflags.split(), devices.device(args.device) if args.device else None)

    try:
        _check_paths(args)
        if args.board and args.device:
            raise HostBuildError("--board and --device exclude each other: a device runs on this machine")
        if args.board:
            boards.board(args.board)  # a known one, before building
        if args.device:
            devices.device(args.device)  # a known one, before building
        if args.board and args.command == "run" and args.repeat:
            raise HostBuildError("--repeat times runs on the host: on a board one inference is counted in instructions")
        if args.command == "build":
            program = compile_in(args.output)
            print(program.executable)
            if args.board:
                print("\n".join(program.memory.lines()))
            return 0
        with tempfile.TemporaryDirectory(prefix="mlf-host-") as work:
            program = compile_in(work)
            outputs, seconds = program.run(_read_inputs(args.inputs, program), repeat=args.repeat)
        for line in getattr(program, "diagnostics", []):  # the program's own stderr (CHOCOLATE_REPORT=1...)
            sys.stderr.write(line + "\n")
        partial = args.outputs.with_name(f".{args.outputs.name}.partial.npz")
        np.savez(partial, **outputs)
        partial.replace(args.outputs)
        for name, value in outputs.items():
            print(f"{name}: shape {tuple(value.shape)} {value.dtype}")
        if args.repeat:
            print(f"seconds per run: {seconds:.6f}")
        if args.board:
            print(f"instructions per inference on {args.board} ({boards.BOARDS[args.board].core}): "
                  f"{program.instructions}")
            print("\n".join(program.memory.lines()))
        return 0
    except HostBuildError as err:
        sys.stderr.write(f"Error: {err}\n")
        return 2


if __name__ == "__main__":
    sys.exit(main())
