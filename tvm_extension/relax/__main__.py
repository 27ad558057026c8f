"""tvmc on apache-tvm: TVM's own command line, as TVM 0.16's tvmc spells it, compiling through the Relax engine

    tvmc compile --target vanilla_accelerator --experimental-tvm-extension ./uma_vanilla \\
        model.onnx -f mlf -o out.tar        # an MLF of AOT C with the backend's C library
    tvmc compile --target vanilla_accelerator model.onnx -o model.so   # a library for the Relax VM
    tvmc run out.tar -i in.npz -o out.npz [--print-top N]   # built with gcc and run here
    tvmc run model.so -i in.npz -o out.npz                  # run by the Relax VM

apache-tvm has no tvmc since it removed Relay: this project's ``tvmc`` is this command there, and
TVM's own tvmc where TVM has one (hhb-tvm).  ``python -m tvm_extension.relax`` and ``tvm-extension``
are the same command.  A mistake the user can fix ends in one line on stderr and exit status 1,
nothing at the output; a tvmc option the Relax engine cannot honour is refused in one line that
says what to use instead.
"""
import argparse
import logging
import os
import re
import sys
from pathlib import Path
from typing import List

from tvm_extension.api.version import VersionAction
from tvm_extension.mlf import reproducible

from . import options
from .backends import UserError

EXTENSION_FLAGS = ("--experimental-tvm-extension", "--experimental-tvmc-extension", "--uma-backends")
DUMPS = ("relax", "c")  # what --dump-code writes beside the output (OUTPUT.relax, OUTPUT.c)
RELAY_ENGINE = "the Relay engine's tvmc (hhb-tvm on Python 3.10: README, 'Two engines')"
# tvmc options of TVM 0.16 the Relax engine does not take, and why.
NOT_TAKEN = {
    "--tuning-records": "nothing is tuned: the offloaded operators run in the backend's C library",
    "--cross-compiler": "an MLF (-f mlf) is C any cross compiler builds: python -m tvm_extension.mlf run --board",
    "--cross-compiler-options": "an MLF (-f mlf) is C: give the flags to the compiler that builds it",
    "--disabled-pass": "the Relax engine runs its own pass list",
    "--print-pass-times": "not measured by the Relax engine",
    "--print-ir-before": "--dump-code relax shows the module after offloading",
    "--print-ir-after": "--dump-code relax shows the module after offloading",
    "--mixed-precision": "Relay's mixed-precision pass has no Relax counterpart here",
    "--workspace-pools": "the MLF's workspace is one arena (its size in metadata.json)",
    "--config": "give the options on the command line",
    "--profile": "the Relax engine has no profiling executor",
    "--rpc-key": "runs here only", "--rpc-tracker": "runs here only",
    "--end-to-end": "runs here only: no transfers to time",
}


class _TvmFirst(VersionAction):
    tvm_first = True  # as tvmc prints it


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        sys.exit(f"error: {message}")


def _parser(prog: str, parser_class=None):
    parser_class = parser_class or _Parser
    parser = parser_class(prog=prog, description=__doc__.splitlines()[0],
                     epilog="A backend's attributes: --target-NAME-ATTR VALUE (or =VALUE), or inline: "
                            "--target 'NAME -ATTR=VALUE, c'; python -m tvm_extension list shows them.")
    parser.add_argument("--version", action=_TvmFirst, help="print TVM's version and this project's, and exit")
    commands = parser.add_subparsers(dest="command", parser_class=parser_class)
    compile_ = commands.add_parser("compile", help="compile a model (ONNX, TFLite) into an MLF or a Relax VM library")
    compile_.add_argument("FILE", help="the model file")
    compile_.add_argument("--target", required=True,
                          help="the backend's target name, e.g. vanilla_accelerator, optionally with the host: "
                               "'vanilla_accelerator, c'; c (with -f mlf) or llvm: TVM's own kernels only")
    compile_.add_argument("-o", "--output", help="the file to write: module.tar (-f mlf), module.so (-f so)")
    compile_.add_argument("-f", "--output-format", choices=["so", "mlf"], default="so",
                          help="mlf: Model Library Format, AOT C with the backend's C library; so (default): "
                               "a shared library for the Relax VM on this host")
    compile_.add_argument(*EXTENSION_FLAGS, action="append", default=[], dest="extensions", metavar="FOLDER",
                          help="a folder holding backend packages (repeatable)")
    compile_.add_argument("--model-format", choices=["onnx", "tflite"],
                          help="the model's format (default: by its suffix)")
    compile_.add_argument("--input-shapes", help="'name:[1,3,224,224] other:[1,10]' fixes dynamic inputs")
    compile_.add_argument("--desired-layout", choices=["NCHW", "NHWC"],
                          help="convert the convs to this layout (kernels HWIO or OIHW) before partitioning")
    compile_.add_argument("--desired-layout-ops", nargs="+", default=["nn.conv2d"],
                          help="the operators --desired-layout converts: nn.conv2d")
    compile_.add_argument("--pass-config", action="append", default=[], metavar="NAME=VALUE",
                          help="a TVM pass configuration, e.g. tir.disable_vectorize=1 (tir.* is tirx.* here)")
    compile_.add_argument("--module-name", default="default",
                          help="the MLF's C names: tvmgen_NAME_run (default: default)")
    compile_.add_argument("--tflite-exact", action="store_true",
                          help="int8 TFLite models: compute exactly what TFLite's reference kernels compute (convs, "
                               "FULLY_CONNECTED, ADD, AVERAGE_POOL_2D, SOFTMAX, LOGISTIC, TANH, QUANTIZE); "
                               "operators it cannot make exact are listed")
    compile_.add_argument("--dump-code", metavar="FORMAT", default="",
                          help=f"comma-separated, each written to OUTPUT.FORMAT: {', '.join(DUMPS)} (c: -f mlf)")
    compile_.add_argument("--dump-offloads", metavar="FILE", default="",
                          help="which operators went to which target: '-' for the console, else a file")
    for option, default in (("--executor", None), ("--executor-aot-interface-api", None),
                            ("--executor-aot-unpacked-api", None), ("--runtime", None)):
        compile_.add_argument(option, default=default,
                              help="with -f mlf, what it makes (aot, c, 1, crt), accepted; else refused")
    compile_.add_argument("-O", "--opt-level", type=int, choices=range(4), default=3, metavar="[0-3]",
                          help="tvmc's; the Relax engine's passes are its own: accepted")
    compile_.add_argument("-v", "--verbose", action="count", default=0, help="say which backend compiles, and from where")
    run = commands.add_parser("run", help="run an MLF (built with gcc here) or a Relax VM library")
    run.add_argument("PATH", help="an MLF (tvmc compile -f mlf) or a library (-f so)")
    run.add_argument("--device", default="cpu", help="cpu (the only one here)")
    run.add_argument("-i", "--inputs", help=".npz of the inputs, by name (the others: --fill-mode)")
    run.add_argument("-o", "--outputs", help=".npz to write the outputs to (output_0, ...)")
    run.add_argument("--fill-mode", choices=["zeros", "ones", "random"], default="random",
                     help="inputs not given in --inputs (default: random)")
    run.add_argument("--print-top", metavar="N", type=int, help="print the top N values and indices of output 0")
    run.add_argument("--print-time", action="store_true", help="time --repeat x --number runs and print their summary")
    run.add_argument("--repeat", metavar="N", type=int, default=1, help="with --print-time (default 1)")
    run.add_argument("--number", metavar="N", type=int, default=1, help="runs per repeat, with --print-time (default 1)")
    run.add_argument("-v", "--verbose", action="count", default=0)
    commands.add_parser("tune", help="refused: nothing to tune (the offloaded operators are the backend's C)")
    parser.compile_parser = compile_
    return parser


def compile_with_options(model, target: str, output, extensions, given: dict) -> List[str]:
    """``tvmc compile`` from Python (``tvm_extension.tvmc.compile_model`` on apache-tvm): the options
    by their long names with ``_`` (``tflite_exact=True``, ``pass_config=[...]``); the report lines.
    UserError for what the command line reports in one line."""
    from tvm_extension.tvmc.python_flow import options_argv  # pylint: disable=import-outside-toplevel

    class Raising(_Parser):
        def error(self, message):
            raise UserError(f"tvmc compile: {message}")

    compile_parser = _parser("tvmc", Raising).compile_parser
    given, attrs = dict(given), []
    for name in (part.split()[0] for part in target.split(",") if part.strip()):  # target_NAME_ATTR=value
        for key in [k for k in given if k.startswith(f"target_{name}_")]:
            attrs.append(f"--target-{name}-{key[len(name) + 8:]}={given.pop(key)}")
    argv = ["--target", target, "-o", os.fspath(output), *options_argv(compile_parser, given), *attrs,
            os.fspath(model)]
    for folder in extensions:
        argv += [EXTENSION_FLAGS[0], os.fspath(folder)]
    argv, target_attrs = options.split_target_attrs(argv)
    _refuse_not_taken(argv)
    return _compile(compile_parser.parse_args(argv), target_attrs)


def _refuse_not_taken(argv):
    for token in argv:
        option = token.split("=")[0]
        if option in NOT_TAKEN:
            raise UserError(f"{option}: {NOT_TAKEN[option]} (on the Relax engine; {RELAY_ENGINE} takes it)")


def _compile(args, target_attrs) -> List[str]:
    """The compile the arguments ask for; the offload report's lines."""
    from . import compile_model  # pylint: disable=import-outside-toplevel

    options.check_executor(args)
    if args.output_format == "mlf":
        try:
            reproducible.build_time()  # a malformed SOURCE_DATE_EPOCH stops tvmc before it compiles
        except reproducible.BuildTimeError as err:
            raise UserError(str(err)) from None
    targets = options.read_targets(args.target, target_attrs, args.output_format)
    dumps = [d.strip() for d in args.dump_code.split(",") if d.strip()]
    wrong = [d for d in dumps if d not in DUMPS or (d == "c" and args.output_format != "mlf")]
    if wrong:
        raise UserError(f"--dump-code {wrong[0]}: the Relax engine writes {', '.join(DUMPS)} (c with -f mlf)")
    unknown_ops = [op for op in args.desired_layout_ops if op != "nn.conv2d"]
    if unknown_ops:
        raise UserError(f"--desired-layout-ops {unknown_ops[0]}: the Relax engine converts nn.conv2d")
    output = Path(args.output or ("module.tar" if args.output_format == "mlf" else "module.so"))
    target = targets.backend or ("c" if args.output_format == "mlf" else "llvm")
    if args.verbose:
        print(f"tvmc (Relax engine, TVM {_tvm_version()}): {target} -> {output} ({args.output_format})", file=sys.stderr)
        # what the backends log of each layer's plan (its lower bound of DMA bytes), as tvmc -v on Relay
        logging.basicConfig(stream=sys.stderr, format="%(name)s: %(message)s")
        logging.getLogger("tvm_extension").setLevel(logging.INFO)
    shapes = _input_shapes(args.input_shapes) if args.input_shapes else None
    made = {}
    lines = compile_model(args.FILE, target, output, args.extensions, targets.attrs, shapes=shapes,
                          tflite_exact=args.tflite_exact, output_format=args.output_format, fmt=args.model_format,
                          host=targets.host, desired_layout=args.desired_layout,
                          pass_config=options.pass_config(args.pass_config), module_name=args.module_name,
                          dumps=made)
    for dump in dumps:
        Path(f"{output}.{dump}").write_text(made[dump])
    if args.dump_offloads:
        _dump_offloads(made.get("offloads"), args.dump_offloads)
    return lines


def _dump_offloads(report, where: str):
    """As tvmc's --dump-offloads: the operators by target, then what each target took."""
    if report is None:
        lines = ["Total number of operators and distribution by targets", "(nothing offloaded: TVM's own kernels)"]
    else:
        offloaded, on_cpu = sum(report.offloaded.values()), sum(report.on_cpu.values())
        lines = ["Total number of operators and distribution by targets", f"Total: {offloaded + on_cpu}",
                 f"{report.target}: {offloaded}", f"generic: {on_cpu}", ""]
        lines += [f"{report.target:<20} <- {op} x{n}" for op, n in report.offloaded.most_common()]
        lines += [f"{'generic':<20} <- {op} x{n}" for op, n in report.on_cpu.most_common()]
    text = "\n".join(lines) + "\n"
    if where == "-":
        sys.stdout.write(text)
    else:
        Path(where).write_text(text)


_SHAPE = re.compile(r"\s*([^\s:]+):\[([0-9,\s]*)\]\s*")


def _input_shapes(text: str) -> dict:
    """tvmc's --input-shapes spelling: {name: shape}; a malformed one is the user's one line."""
    shapes, at = {}, 0
    while at < len(text):
        match = _SHAPE.match(text, at)
        if match is None:
            raise UserError(f"--input-shapes {text!r}: expected NAME:[D1,D2,...] separated by spaces")
        shapes[match.group(1)] = tuple(int(d) for d in match.group(2).split(",") if d.strip())
        at = match.end()
    return shapes


def _run(args):
    import numpy as np  # pylint: disable=import-outside-toplevel

    if args.device != "cpu":
        raise UserError(f"--device {args.device}: the Relax engine's tvmc runs on this CPU (--device cpu); an MLF "
                        "runs on a board with python -m tvm_extension.mlf run --board")
    if (args.print_top is not None and args.print_top < 1) or min(args.repeat, args.number) < 1:
        raise UserError("--print-top, --repeat and --number take a number of 1 or more")
    path = Path(args.PATH)
    if not path.is_file():
        raise UserError(f"'{path}' does not exist or is not a file")
    if args.outputs and not Path(args.outputs).parent.is_dir():
        raise UserError(f"output folder '{Path(args.outputs).parent}' does not exist")
    given = {}
    if args.inputs:
        try:
            with np.load(args.inputs) as data:
                given = dict(data)
        except (OSError, ValueError) as exc:
            raise UserError(f"cannot read inputs '{args.inputs}': {exc}")
    runs = args.repeat * args.number if args.print_time else 0
    from tvm_extension.mlf.host import is_mlf  # pylint: disable=import-outside-toplevel

    outputs, seconds = (_run_mlf if is_mlf(path) else _run_library)(path, given, args.fill_mode, runs)
    if args.outputs:
        partial = Path(args.outputs + ".partial.npz")  # written whole, then moved in place
        np.savez(partial, **{f"output_{i}": o for i, o in enumerate(outputs)})
        os.replace(partial, args.outputs)
    if args.print_time:
        print(f"Execution time summary:\n mean (ms) of {runs} runs\n {seconds * 1e3:.4f}")
    if args.print_top:
        flat = np.asarray(outputs[0]).reshape(len(outputs[0]) if np.ndim(outputs[0]) else 1, -1)
        order = np.argsort(flat[0], kind="stable")[::-1][:args.print_top]
        print(np.array([order, flat[0][order]]))


def _run_mlf(path: Path, given: dict, fill_mode: str, runs: int):
    import tempfile  # pylint: disable=import-outside-toplevel

    from tvm_extension.mlf import HostBuildError, build  # pylint: disable=import-outside-toplevel

    with tempfile.TemporaryDirectory(prefix="tvmc-run-") as work:
        try:
            program = build(path, work)
            feeds = program.filled_inputs(fill_mode)
            feeds.update(given)
            outputs, seconds = program.run(feeds, repeat=runs)
        except HostBuildError as err:
            raise UserError(str(err))
    return list(outputs.values()), seconds


def _run_library(path: Path, given: dict, fill_mode: str, runs: int):
    from . import run_model  # pylint: disable=import-outside-toplevel

    del fill_mode  # a VM library's inputs are all given: it does not say their shapes
    result = run_model(path, given, runs)
    return result if runs else (result, 0.0)


def _tvm_version() -> str:
    import tvm  # pylint: disable=import-outside-toplevel

    return tvm.__version__


def main(argv=None, prog: str = "tvmc") -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        argv, target_attrs = options.split_target_attrs(argv)
        _refuse_not_taken(argv)
    except UserError as err:
        sys.exit(f"error: {err}")
    if argv[:1] == ["tune"]:
        sys.exit("error: tvmc tune: nothing to tune on the Relax engine (the offloaded operators run in the "
                 "backend's C library, the rest is TVM's C): compile without tuning, tvmc compile --target NAME "
                 "MODEL -f mlf -o out.tar")
    args = _parser(prog).parse_args(argv)
    if args.command is None:
        _parser(prog).print_help()
        return 2
    try:
        from . import build  # noqa: F401  pylint: disable=import-outside-toplevel
    except ImportError as exc:  # run with hhb-tvm's environment, or none
        sys.exit(f"error: the Relax engine needs apache-tvm 0.27 (pip install 'tvm-uma-extensions[relax]'); with "
                 f"hhb-tvm, TVM's own tvmc compiles ({exc})")
    try:
        if args.command == "compile":
            print("\n".join(_compile(args, target_attrs)))
        else:
            _run(args)
    except UserError as err:
        sys.exit(f"error: {err}")
    return 0


if __name__ == "__main__":
    sys.exit(main(prog="python -m tvm_extension.relax"))
