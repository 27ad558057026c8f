"""``compile_model``: the Python entry point that compiles exactly as ``tvmc compile`` does.

    from tvm_extension.tvmc import compile_model

    compile_model("model.tflite", "vanilla_accelerator -max_kernel_size=5", "out.tar",
                  extensions=["./ext"], tflite_exact=True)

The options are ``tvmc compile``'s own, by their long names with ``_`` (``pass_config=[...]``,
``desired_layout="NHWC"``, ``tflite_exact=True``, ``target_vanilla_accelerator_cflags="-O3"``).
They are parsed by tvmc's own compile parser and run through the same command the command line
runs, so the defaults an extension target gets (AOT, unpacked C API, CRT, no vectorisation),
the checks and the offload report are the same; the output format defaults to MLF.
"""
import contextlib
import os
import tempfile
from typing import Iterable, List, Union


def _parser():
    import argparse  # pylint: disable=import-outside-toplevel

    from tvm.driver.tvmc import TVMCException, main  # pylint: disable=import-outside-toplevel

    parser = argparse.ArgumentParser(prog="tvmc", add_help=False)  # what tvmc's main parser has before its commands
    parser.add_argument("-v", "--verbose", action="count", default=0)
    parser.add_argument("--version", action="store_true")
    subparsers = parser.add_subparsers()
    for make_subparser in main.REGISTERED_PARSER:
        make_subparser(subparsers, parser, [])
    compile_parser = subparsers.choices["compile"]

    def error(message):
        raise TVMCException(f"tvmc compile: {message}")

    compile_parser.error = error  # an exception for Python callers, not a usage text and exit
    return compile_parser


def options_argv(compile_parser, options: dict) -> List[str]:
    """tvmc's flags for keyword options, found by the parser's own destinations."""
    flags = {a.dest: a for a in compile_parser._actions if a.option_strings}
    argv = []
    for dest, value in options.items():
        action = flags.get(dest)
        if action is None or dest in ("FILE", "output", "target", "help"):
            raise TypeError(f"compile_model() got an unexpected option '{dest}' (not a tvmc compile option)")
        flag = action.option_strings[-1]
        if action.nargs == 0:  # store_true
            argv += [flag] if value else []
        elif value is None:
            continue
        elif isinstance(value, (list, tuple)):
            repeated = type(action).__name__ == "_AppendAction"
            argv += [x for v in value for x in (flag, str(v))] if repeated else [flag, *map(str, value)]
        else:
            argv += [flag, str(value)]
    return argv


@contextlib.contextmanager
def _already_loaded(model):
    """tvmc's compile checks that its model file exists and loads it: hand it this model instead."""
    from tvm.driver.tvmc import frontends  # pylint: disable=import-outside-toplevel

    original = frontends.load_model
    frontends.load_model = lambda *args, **kwargs: model
    try:
        with tempfile.NamedTemporaryFile(prefix="tvmc-model-") as placeholder:
            yield placeholder.name
    finally:
        frontends.load_model = original


def compile_model(model: Union[str, os.PathLike, "TVMCModel"], target: str, package_path: Union[str, os.PathLike],
                  *, extensions: Iterable[Union[str, os.PathLike]] = (), **options):
    """Compile ``model`` (a path, or a ``TVMCModel`` from ``tvmc.load``, partitioned or not) for
    ``target`` into ``package_path`` as ``tvmc compile`` would; returns tvmc's ``TVMCPackage``.

    ``extensions``: folders holding a ``tvm_extension`` package (``--experimental-tvm-extension``).
    Raises ``TVMCException`` for what the command line reports in one line.

    On apache-tvm (no tvmc: the Relax engine) the same call compiles with this project's tvmc, whose
    options it takes, and returns the archive's path; ``model`` is a path there (no ``tvmc.load``),
    and ``tvm_extension.relax.UserError`` is what it raises.
    """
    from tvm_extension.cli import relay_engine  # pylint: disable=import-outside-toplevel

    if not relay_engine():
        return _relax_compile(model, target, package_path, extensions, options)
    from tvm.driver import tvmc  # pylint: disable=import-outside-toplevel
    from tvm.driver.tvmc import composite_target  # pylint: disable=import-outside-toplevel

    from tvm_extension import api, uma  # pylint: disable=import-outside-toplevel

    from . import integration, registry  # pylint: disable=import-outside-toplevel

    integration.install(tvmc)  # done at import by the start-up hook, unless TVM_EXTENSION_DISABLE=1
    try:
        registry.load_extensions([os.fspath(p) for p in extensions], composite_target.REGISTERED_CODEGEN)
    except (api.ExtensionError, uma.BackendError) as err:
        raise tvmc.TVMCException(str(err)) from None
    options.setdefault("output_format", "mlf")
    compile_parser = _parser()
    argv = ["--target", target, "-o", os.fspath(package_path)] + options_argv(compile_parser, options)
    with contextlib.ExitStack() as stack:
        stack.enter_context(uma.COMPILE_LOCK)  # _already_loaded patches tvmc for this compile only
        if isinstance(model, (str, os.PathLike)):
            path = os.fspath(model)
        elif options.get("tflite_exact"):
            raise tvmc.TVMCException("tflite_exact changes how the TFLite model is imported: pass its path, "
                                     "not a loaded model")
        else:
            path = stack.enter_context(_already_loaded(model))
        args = compile_parser.parse_args(argv + [path])
        args.func(args)
    return tvmc.TVMCPackage(os.fspath(package_path))


def _relax_compile(model, target, package_path, extensions, options):
    from tvm_extension.relax import UserError  # pylint: disable=import-outside-toplevel
    from tvm_extension.relax.__main__ import compile_with_options  # pylint: disable=import-outside-toplevel

    if not isinstance(model, (str, os.PathLike)):
        raise UserError("on apache-tvm compile_model takes a model file (TVMCModel and tvmc.load are the Relay "
                        "engine's: hhb-tvm)")
    options.setdefault("output_format", "mlf")
    for line in compile_with_options(model, target, package_path, extensions, options):
        print(line)
    return os.fspath(package_path)
