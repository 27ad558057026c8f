"""Command line of the Relax engine (TVMC does not exist in apache-tvm 0.27):

    tvm-extension compile MODEL.onnx --target vanilla_accelerator -o model.so \\
        [--experimental-tvm-extension FOLDER] [--target-vanilla_accelerator-max_kernel_size=5]
    tvm-extension run model.so -i in.npz -o out.npz

(``python -m tvm_extension.relax`` is the same.)  A mistake the user can fix ends in one line on
stderr and exit status 1, nothing at the output.  What only the Relay engine makes (an MLF, the
AOT executor, the C runtime: embedded C) is refused in one line that says so.
"""
import argparse
import os
import re
import sys
from pathlib import Path

_TARGET_ATTR = re.compile(r"--target-([A-Za-z0-9_]+)-([A-Za-z0-9_]+)=(.*)")


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        sys.exit(f"error: {message}")


# tvmc options whose meaning does not carry over: the Relax engine builds a shared library for
# its VM on this host; MLF, AOT and the C runtime (the embedded C output) stay on the Relay engine.
RELAY_ONLY = "stays on the Relay engine (hhb-tvm: tvmc compile --target NAME,c -f mlf; README, 'Two engines')"


def _parser(prog="python -m tvm_extension.relax"):
    parser = _Parser(prog=prog, description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    compile_ = commands.add_parser("compile", help="compile an ONNX or TFLite model into a shared library")
    compile_.add_argument("model")
    compile_.add_argument("--target", required=True,
                          help="the backend's target name, e.g. vanilla_accelerator; llvm: TVM's own kernels only")
    compile_.add_argument("-o", "--output", required=True, help="the shared library to write (.so)")
    compile_.add_argument("--experimental-tvm-extension", "--experimental-tvmc-extension", action="append",
                          default=[], dest="extensions", metavar="FOLDER", help="a folder holding backend packages")
    compile_.add_argument("--input-shapes", help="as tvmc's: 'name:[1,3,224,224] other:[1,10]' fixes dynamic inputs")
    compile_.add_argument("--tflite-exact", action="store_true",
                          help="int8 TFLite models: compute exactly what TFLite's reference kernels compute (convs, "
                               "FULLY_CONNECTED, ADD, AVERAGE_POOL_2D, SOFTMAX, LOGISTIC, TANH, QUANTIZE); "
                               "operators it cannot make exact are listed")
    compile_.add_argument("-f", "--output-format", default="so",
                          help="so (a shared library for the Relax VM); mlf (Model Library Format: AOT C, "
                               "with --target c so far)")
    compile_.add_argument("--executor", help="the Relax VM; aot " + RELAY_ONLY)
    compile_.add_argument("--runtime", help="TVM's own; crt " + RELAY_ONLY)
    run = commands.add_parser("run", help="run a compiled library with the Relax VM")
    run.add_argument("library")
    run.add_argument("-i", "--inputs", required=True, help=".npz of the inputs, by name")
    run.add_argument("-o", "--outputs", required=True, help=".npz to write the outputs to (output_0, ...)")
    run.add_argument("--repeat", type=int, default=0, help="then run it N more times and print the seconds per run")
    return parser


def _compile(args, target_attrs):
    from . import compile_model  # pylint: disable=import-outside-toplevel

    for option, value in (("--executor", args.executor), ("--runtime", args.runtime)):
        if value is not None:
            raise_user(f"{option} {value}: the Relax engine builds a shared library for its VM, or with -f mlf "
                       f"AOT C of its own; {value} {RELAY_ONLY}")

    attrs = {}
    for target, name, value in target_attrs:
        if target != args.target:
            raise_user(f"--target-{target}-{name}: '{target}' is not the target compiled for ('{args.target}')")
        attrs[name] = value
    shapes = _input_shapes(args.input_shapes) if args.input_shapes else None
    for line in compile_model(args.model, args.target, args.output, args.extensions, attrs, shapes=shapes,
                              tflite_exact=args.tflite_exact, output_format=args.output_format):
        print(line)


_SHAPE = re.compile(r"\s*([^\s:]+):\[([0-9,\s]*)\]\s*")


def _input_shapes(text: str) -> dict:
    """tvmc's --input-shapes spelling: {name: shape}; a malformed one is the user's one line."""
    shapes, at = {}, 0
    while at < len(text):
        match = _SHAPE.match(text, at)
        if match is None:
            raise_user(f"--input-shapes {text!r}: expected NAME:[D1,D2,...] separated by spaces")
        shapes[match.group(1)] = tuple(int(d) for d in match.group(2).split(",") if d.strip())
        at = match.end()
    return shapes


def _run(args):
    import numpy as np  # pylint: disable=import-outside-toplevel

    from . import UserError, run_model  # pylint: disable=import-outside-toplevel

    output = Path(args.outputs)
    if not output.parent.is_dir():
        raise UserError(f"output folder '{output.parent}' does not exist")
    try:
        with np.load(args.inputs) as data:
            inputs = dict(data)
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot read inputs '{args.inputs}': {exc}")
    if args.repeat < 0:
        raise UserError(f"--repeat {args.repeat}: a number of runs, 0 or more")
    outputs = run_model(args.library, inputs, args.repeat)
    if args.repeat:
        outputs, seconds = outputs
        print(f"seconds per run: {seconds:.6f}")
    partial = output.with_name(output.name + ".partial.npz")  # written whole, then moved in place
    np.savez(partial, **{f"output_{i}": o for i, o in enumerate(outputs)})
    os.replace(partial, output)


def raise_user(message):
    from . import UserError  # pylint: disable=import-outside-toplevel

    raise UserError(message)


def main(argv=None, prog: str = "python -m tvm_extension.relax") -> int:
    argv = sys.argv[1:] if argv is None else argv
    target_attrs = [m.groups() for m in map(_TARGET_ATTR.fullmatch, argv) if m]
    args = _parser(prog).parse_args([a for a in argv if not _TARGET_ATTR.fullmatch(a)])
    try:
        from . import UserError, build  # noqa: F401  pylint: disable=import-outside-toplevel
    except ImportError as exc:  # run with hhb-tvm's environment, or none
        sys.exit(f"error: the Relax engine needs apache-tvm 0.27 (its own environment: scripts/env.sh test "
                 f"creates .venv-relax); with hhb-tvm, compile with tvmc and run with python -m tvm_extension.mlf "
                 f"run ({exc})")
    try:
        _compile(args, target_attrs) if args.command == "compile" else _run(args)
    except UserError as err:
        sys.exit(f"error: {err}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
