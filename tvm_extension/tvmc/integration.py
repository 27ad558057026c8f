"""Patching TVM's own tvmc, once, right after ``tvm.driver.tvmc`` is imported.

Nothing in TVM's files changes; the functions TVMC looks up at call time are wrapped:

* ``main._main``: two-phase argument handling and one-line errors for extension problems;
* ``composite_target.get_codegen_*``: the merged codegen registry;
* ``target.generate_target_args`` / ``reconstruct_target_args``: extension target attributes;
* ``target.target_from_cli``: unknown-target check and the automatic host target;
* ``model.export_model_library_format``: MLF export without native microTVM;
* ``runner.run_module``: ``tvmc run --device cpu`` of an MLF builds and runs it on the host;
* ``te_compiler.libinfo``: cached (compile speed);
* ``frontends.OnnxFrontend.load``: QLinearConv imported as QDQ (``onnx_qlinear``);
* ``frontends.TFLiteFrontend.load``, ``compiler.build``: ``--tflite-exact`` (``tflite_exact``);
* ``compiler.save_dumps``, ``analyze_operations_distribution``: ``--dump-code``, ``--dump-offloads`` (``dumps``).
"""
import functools
import logging
import sys

from tvm_extension import api, uma
from tvm_extension.api import stages
from tvm_extension.api.version import VersionAction
from tvm_extension.mlf import reproducible
from tvm_extension.mlf.export import export_model_library_format

from . import arguments, dumps, errors, onnx_qlinear, registry, tflite_exact

_installed = False


def _extension_backends():
    return [entry["backend"] for entry in registry.extension_codegens().values()]


def install(tvmc):
    global _installed
    if _installed:
        return
    _installed = True
    from tvm.driver.tvmc import autotuner, compiler, composite_target, main, model, target
    from tvm.target import Target

    builtin = list(composite_target.REGISTERED_CODEGEN)
    names, by_target = registry.merge_into(composite_target)
    composite_target.get_codegen_names = names
    composite_target.get_codegen_by_target = by_target
    target.get_codegen_names = names
    target.get_codegen_by_target = by_target

    original_generate = target.generate_target_args
    original_reconstruct = target.reconstruct_target_args
    original_from_cli = target.target_from_cli

    @functools.wraps(original_generate)
    def generate_target_args(parser):
        original_generate(parser)
        arguments.add_target_attr_args(parser, _extension_backends())

    @functools.wraps(original_reconstruct)
    def reconstruct_target_args(args):
        options = original_reconstruct(args)
        options.update(arguments.read_target_attr_args(args, _extension_backends()))
        return options

    @functools.wraps(original_from_cli)
    def target_from_cli(target_text, additional_target_options=None):
        if isinstance(target_text, str) and target_text.strip() and not _is_file_or_json(target, target_text):
            try:
                target_text = arguments.complete_target(
                    target_text, Target.list_kinds(), names(), list(registry.extension_codegens())
                )
            except LookupError as err:
                raise tvmc.TVMCException(str(err)) from None
            except ValueError:
                pass  # TVMC reports malformed strings itself
        return original_from_cli(target_text, additional_target_options)

    for module in (target, compiler, autotuner):
        module.generate_target_args = generate_target_args
        module.reconstruct_target_args = reconstruct_target_args
        module.target_from_cli = target_from_cli

    if model.export_model_library_format is None:
        model.export_model_library_format = export_model_library_format

    from tvm.driver.tvmc import runner

    runner.run_module = _run_mlf_on_host(runner.run_module, tvmc)
    tvmc.run = runner.run_module

    _cache_libinfo()
    _provide_extensions_module(tvmc)
    from tvm.driver.tvmc import frontends

    onnx_qlinear.install(frontends)
    errors.install(frontends, tvmc)  # after onnx_qlinear: its failures are the frontend's too
    tflite_exact.install(frontends, compiler, tvmc.TVMCException)
    dumps.install(compiler)
    compiler.compile_model = _compile_with_settings(compiler.compile_model, tvmc)
    tvmc.compile = compiler.compile_model
    main.register_parser(_extend_parsers)
    main._main = _two_phase_main(main._main, builtin, tvmc)


def _provide_extensions_module(tvmc):
    """``from tvm.driver.tvmc.extensions import TVMCExtension`` (MLonMCU's patch) works unchanged."""
    import types  # pylint: disable=import-outside-toplevel

    module = types.ModuleType("tvm.driver.tvmc.extensions", "TVMC extensions (provided by tvm_extension.api)")
    module.TVMExtension = module.TVMCExtension = api.TVMExtension
    sys.modules[module.__name__] = module
    tvmc.extensions = module


def _cache_libinfo():
    """TVM's lowering asks ``libinfo()`` (a dict rebuilt from the C++ side) once per tensor
    dimension; on an int8 network that was a noticeable share of compile time.  The answer
    never changes in a process."""
    from tvm.relay.backend import te_compiler

    te_compiler.libinfo = functools.lru_cache(maxsize=None)(te_compiler.libinfo)


def _run_mlf_on_host(original_run, tvmc):
    """``tvmc run --device cpu`` (and ``tvmc.run``) of an MLF: build it with gcc and run it here."""

    @functools.wraps(original_run)
    def run_module(tvmc_package, device, *args, inputs=None, fill_mode="random", repeat=10, number=10, **kwargs):
        if getattr(tvmc_package, "type", None) != "mlf" or device != "cpu":
            return original_run(tvmc_package, device, *args, inputs=inputs, fill_mode=fill_mode,
                                repeat=repeat, number=number, **kwargs)
        import tempfile  # pylint: disable=import-outside-toplevel

        from tvm_extension.mlf import HostBuildError, build  # pylint: disable=import-outside-toplevel

        with tempfile.TemporaryDirectory(prefix="tvmc-run-") as work:
            try:
                program = build(tvmc_package.package_path, work)
                feeds = program.filled_inputs(fill_mode)
                feeds.update(dict(inputs or {}))
                times = []
                outputs = None
                for _ in range(max(1, repeat)):
                    outputs, seconds = program.run(feeds, repeat=max(1, number))
                    times.append(seconds)
            except HostBuildError as err:
                raise tvmc.TVMCException(str(err)) from None
        from tvm.runtime.module import BenchmarkResult  # pylint: disable=import-outside-toplevel

        # Keyed as tvmc's own runner keys them (--print-top and -o out.npz read "output_0"...).
        keyed = {f"output_{i}": value for i, value in enumerate(outputs.values())}
        return tvmc.TVMCResult(keyed, BenchmarkResult(times))

    return run_module


def _is_file_or_json(target_module, text):
    import os  # pylint: disable=import-outside-toplevel

    return os.path.isfile(text) or target_module.is_inline_json(text)


def _extend_parsers(subparsers, main_parser, config_values):
    """Runs after TVMC's own parsers are built: show the extension flag in ``--help`` (it is
    parsed earlier), and let ``compile`` complete its parsed arguments for extension targets."""
    help_text = (
        "folder holding a tvm_extension package to load UMA backends from (repeatable; "
        f"{', '.join(arguments.EXTENSION_FLAGS[1:])} are aliases; also from "
        + ", ".join(f"${v}" for v in api.discovery.ENV_VARS) + ", PYTHONPATH and installed packages)"
    )
    for parser in [main_parser] + [p for n, p in subparsers.choices.items() if n in ("compile", "tune")]:
        parser.add_argument(*arguments.EXTENSION_FLAGS, metavar="PATH", action="append", help=help_text)
    version = main_parser._option_string_actions["--version"]  # TVMC's store_true: print ours too
    version.__class__, version.tvm_first = VersionAction, True
    compile_parser = subparsers.choices["compile"]
    compile_parser.add_argument(tflite_exact.FLAG, action="store_true", help=tflite_exact.HELP)
    arguments.defer_defaults(compile_parser, config_values)
    compile_parser.set_defaults(func=_drive_compile(compile_parser.get_default("func")))
    if "tune" in subparsers.choices:
        tune_parser = subparsers.choices["tune"]
        tune_parser.set_defaults(func=_drive_tune(tune_parser.get_default("func")))


def _drive_compile(original):
    from tvm.driver.tvmc import TVMCException  # pylint: disable=import-outside-toplevel

    @functools.wraps(original)
    def drive_compile(args):
        try:
            applied = arguments.apply_embedded_defaults(args, list(registry.extension_codegens()))
            reproducible.build_time()  # a malformed SOURCE_DATE_EPOCH stops tvmc before it compiles
            errors.check_output_path(args.output)  # before compiling, not after
        except ValueError as err:
            raise TVMCException(str(err)) from None
        try:  # a bad target attribute fails before the model is loaded
            from tvm.driver.tvmc.target import reconstruct_target_args  # pylint: disable=import-outside-toplevel

            settings = registry.compile_settings(args.target, reconstruct_target_args(args),
                                                 getattr(args, "tflite_exact", False))
        except uma.BackendError as err:
            raise TVMCException(str(err)) from None
        if applied:
            stages.logger.info("embedded defaults for %s: %s", args.target, ", ".join(applied))
        with uma.compiling(settings), stages.stage("compiling"):
            return original(args)

    return drive_compile


def _compile_with_settings(original, tvmc):
    """TVMC's ``compile_model`` (the command line's and ``tvmc.compile``'s) runs in one compile's
    settings: the extension targets' attributes parsed once; ``--tflite-exact`` from the command
    line's settings, when it set them."""
    import inspect  # pylint: disable=import-outside-toplevel

    signature = inspect.signature(original)

    @functools.wraps(original)
    def compile_model(*args, **kwargs):
        bound = signature.bind(*args, **kwargs).arguments
        outer = uma.current()
        try:
            settings = registry.compile_settings(bound.get("target"), bound.get("additional_target_options"),
                                                 outer is not None and outer.tflite_exact)
        except uma.BackendError as err:
            raise tvmc.TVMCException(str(err)) from None
        with uma.compiling(settings):
            return original(*args, **kwargs)

    return compile_model


def _drive_tune(original):
    from tvm.driver.tvmc import TVMCException  # pylint: disable=import-outside-toplevel

    @functools.wraps(original)
    def drive_tune(args):
        try:
            arguments.refuse_tuning(args, list(registry.extension_codegens()))
        except ValueError as err:
            raise TVMCException(str(err)) from None
        return original(args)

    return drive_tune


def _log_to_tvmc_logger(verbose: int):
    """-v logs discovery, the defaults applied and each stage with its time; -vv each offloaded
    function and its TIR after the backend's passes."""
    logging.basicConfig(stream=sys.stdout)  # what tvmc's main does, a little earlier
    stages.logger.setLevel(30 - min(verbose, 2) * 10)


def _two_phase_main(original_main, builtin, tvmc):
    @functools.wraps(original_main)
    def _main(argv):
        try:
            argv, paths, verbose = arguments.split_early_args(argv)
            argv = arguments.model_path_first(argv)
            _log_to_tvmc_logger(verbose)
            registry.load_extensions(paths, builtin)
        except (ValueError, api.ExtensionError, uma.BackendError) as err:
            sys.stderr.write(f"Error: {err}\n")
            return 4
        try:
            return original_main(argv)
        except Exception as exc:  # a backend's code failed inside TVM's build: say which, in one line
            failure = uma.backend_failure(exc)
            if failure is None:
                raise
            sys.stderr.write(f"Error: {failure}\n")
            return 4

    return _main
