"""Command-line side of the integration.

* Two-phase parsing: ``--experimental-tvm-extension PATH`` is taken out of ``argv`` and
  the extensions are loaded *before* TVMC builds its parsers, so extension targets and
  their ``--target-<name>-<attr>`` options exist when ``--target`` is parsed.
* Embedded defaults, on the parsed arguments (so a ``--config`` file counts like the
  command line): compiling an extension target to MLF without executor/runtime options
  gets AOT with the C interface and unpacked API (statically planned memory), the CRT
  runtime and no vectorisation; whatever the user passes wins, except what cannot work:
  offloaded functions are plain C functions, so only the AOT executor with the unpacked
  API and the MLF output can call them.
* Target strings: unknown names fail in one line, and a string naming only extension
  targets gets TVM's ``c`` target appended (``vanilla_accelerator`` -> ``vanilla_accelerator,c``).
"""
import argparse
from typing import List, Sequence, Tuple

# Aliases after the first: MLonMCU's spelling, and the one the UMA-in-TVMC discussion proposed.
EXTENSION_FLAGS = ("--experimental-tvm-extension", "--experimental-tvmc-extension", "--uma-backends")
HOST_TARGET = "c"


def split_early_args(argv: Sequence[str]) -> Tuple[List[str], List[str], int]:
    """(argv without extension flags, the extension paths in order, the -v count): what must be
    known before TVMC builds its parsers.  ``-v`` stays in argv for TVMC."""
    flags = argparse.ArgumentParser(add_help=False, allow_abbrev=False, exit_on_error=False)
    flags.add_argument(*EXTENSION_FLAGS, dest="paths", action="append", default=[])
    verbosity = argparse.ArgumentParser(add_help=False, allow_abbrev=False, exit_on_error=False)
    verbosity.add_argument("-v", "--verbose", action="count", default=0)
    try:
        early, rest = flags.parse_known_args(argv)
        verbose = verbosity.parse_known_args(argv)[0].verbose
    except argparse.ArgumentError:
        raise ValueError(f"{EXTENSION_FLAGS[0]} expects a folder holding a tvm_extension package") from None
    return rest, early.paths, verbose


def target_names(target: str) -> List[str]:
    from tvm.driver.tvmc.target import parse_target  # pylint: disable=import-outside-toplevel

    return [t["name"] for t in parse_target(target)]


# TVMC's defaults for options an extension target decides differently; the compile parser's
# default becomes None (unless --config sets them), so "not given" can be told from "given".
DEFERRED_DEFAULTS = {"executor": "graph", "runtime": "cpp"}


def defer_defaults(compile_parser, config_values):
    from_config = {key for entry in config_values for key in entry}
    for action in compile_parser._actions:
        if action.dest in DEFERRED_DEFAULTS and action.dest not in from_config:
            action.default = None


DUMPS = ("relay", "tir", "c")  # what --dump-code can show of an MLF of C


def apply_embedded_defaults(args, extension_targets: Sequence[str]) -> List[str]:
    """Complete parsed ``tvmc compile`` arguments (command line and --config alike) with what an
    embedded MLF build needs when an extension target is compiled; returns the options applied."""
    try:
        names = target_names(args.target) if isinstance(args.target, str) else []
    except ValueError:
        names = []  # TVMC reports malformed target strings itself
    if not any(n in extension_targets for n in names):
        for dest, default in DEFERRED_DEFAULTS.items():
            if getattr(args, dest, None) is None:
                setattr(args, dest, default)
        return []
    if args.output_format != "mlf":
        raise ValueError("extension targets compile to Model Library Format: add -f mlf")
    unpacked = getattr(args, "executor_aot_unpacked_api", None)
    if args.executor not in (None, "aot") or (unpacked is not None and str(unpacked).lower() in ("0", "false")):
        raise ValueError(
            "extension targets need the AOT executor with the unpacked API: "
            "drop --executor/--executor-aot-unpacked-api or use --executor aot --executor-aot-unpacked-api 1"
        )
    wrong_dumps = [d.strip() for d in (getattr(args, "dump_code", None) or "").split(",") if d.strip()
                   and d.strip() not in DUMPS]
    if wrong_dumps:
        raise ValueError(f"--dump-code {','.join(wrong_dumps)}: extension targets generate C, not LLVM or assembly "
                         f"(choose from {', '.join(DUMPS)})")
    applied = []
    for dest, value in (("executor", "aot"), ("executor_aot_interface_api", "c"),
                        ("executor_aot_unpacked_api", 1), ("runtime", "crt")):
        if getattr(args, dest, None) is None:
            setattr(args, dest, value)
            applied.append(f"--{dest.replace('_', '-')} {value}")
    configs = list(args.pass_config or [])
    if not any(c.split("=")[0].strip() == "tir.disable_vectorize" for c in configs):
        args.pass_config = configs + ["tir.disable_vectorize=1"]
        applied.append("--pass-config tir.disable_vectorize=1")
    return applied


def refuse_tuning(args, extension_targets: Sequence[str]):
    """``tvmc tune`` has nothing to tune for an extension target: its offloaded functions call the
    backend's C library, and the host part is TVM's C for microcontrollers, which this TVM build
    cannot measure (no microTVM)."""
    try:
        names = target_names(args.target) if isinstance(args.target, str) else []
    except ValueError:
        return  # TVMC reports malformed target strings itself
    for name in names:
        if name in extension_targets:
            raise ValueError(
                f"tvmc tune: target '{name}' has nothing to tune (its operators run in the backend's C library, the "
                "rest is TVM's C for microcontrollers): compile without tuning records, "
                f"tvmc compile --target {name} MODEL -f mlf -o out.tar"
            )


# tvmc options taking one or more values: an argparse list swallows the model path that follows it.
LIST_OPTIONS = ("--desired-layout", "--desired-layout-ops", "--mixed-precision-ops")


def model_path_first(argv: Sequence[str], exists=None) -> List[str]:
    """``tvmc compile --desired-layout NCHW model.onnx``: tvmc would read the model as a second layout.
    A value of a list option that is an existing file is the model: it is moved to just after the
    subcommand, where argparse takes it as the positional argument."""
    import os  # pylint: disable=import-outside-toplevel

    exists = exists or os.path.isfile
    argv = list(argv)
    if not argv or argv[0] not in ("compile", "tune"):
        return argv
    in_list = False
    for index, token in enumerate(argv[1:], start=1):
        if token.startswith("-"):
            in_list = token.split("=")[0] in LIST_OPTIONS and "=" not in token
        elif in_list and exists(token):
            return [argv[0], token] + argv[1:index] + argv[index + 1:]
    return argv


def complete_target(target: str, tvm_kinds: Sequence[str], codegens: Sequence[str], extensions: Sequence[str]) -> str:
    """Check every name of a plain target string and append the host target when none is given."""
    names = target_names(target)
    for name in names:
        if name not in tvm_kinds and name not in codegens:
            known = ", ".join(sorted(extensions)) or "none loaded"
            raise LookupError(
                f"unknown target '{name}': neither a TVM target kind nor a codegen "
                f"(extension targets: {known}; load one with --experimental-tvm-extension PATH)"
            )
    if all(name in codegens for name in names):
        return f"{target}, {HOST_TARGET}"  # the space keeps ",c" out of a last option value
    return target


def add_target_attr_args(parser, backends):
    """``--target-<name>-<attr>`` for every attribute an extension backend registered, its help
    giving the type, the default and the backend's declared range (``target_attr_ranges``)."""
    from tvm_extension.uma.attrs import attr_ranges  # pylint: disable=import-outside-toplevel

    for backend in backends:
        group = parser.add_argument_group(f"target {backend.target_name}")
        ranges = attr_ranges(backend)  # the class's, or what register_target set on the backend
        for attr, default in backend._target_attrs.items():
            kind = "true/false" if isinstance(default, bool) else type(default).__name__
            allowed = _range_text(ranges.get(attr))
            group.add_argument(
                f"--target-{backend.target_name}-{attr}",
                type=str,
                default=None,
                metavar=kind.upper().replace("/", "|"),
                help=f"target {backend.target_name} {attr} ({kind}, default: {default}{allowed})",
            )


def _range_text(allowed) -> str:
    """``, range 1..8`` for (low, high) integers, ``, one of 'a', 'b'`` for allowed strings."""
    if not allowed:
        return ""
    if all(isinstance(a, str) for a in allowed):
        return ", one of " + ", ".join(repr(a) for a in allowed)
    return f", range {allowed[0]}..{allowed[1]}"


def read_target_attr_args(args, backends) -> dict:
    options = {}
    for backend in backends:
        values = {}
        for attr in backend._target_attrs:
            value = getattr(args, f"target_{backend.target_name}_{attr}".replace("-", "_"), None)
            if value is not None:
                values[attr] = value
        if values:
            options[backend.target_name] = values
    return options
