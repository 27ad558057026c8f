"""Command-line side of the integration.

* Two-phase parsing: ``--experimental-tvm-extension PATH`` is taken out of ``argv`` and
  the extensions are loaded *before* TVMC builds its parsers, so extension targets and
  their ``--target-<name>-<attr>`` options exist when ``--target`` is parsed.
* Embedded defaults: compiling an extension target to MLF without executor/runtime
  options gets AOT with the C interface and unpacked API (statically planned memory), the
  CRT runtime and no vectorisation; whatever the user passes wins, except what cannot
  work: offloaded functions are plain C functions, so only the AOT executor with the
  unpacked API and the MLF output can call them.
* Target strings: unknown names fail in one line, and a string naming only extension
  targets gets TVM's ``c`` target appended (``vanilla_accelerator`` -> ``vanilla_accelerator,c``).
"""
from typing import List, Sequence, Tuple

EXTENSION_FLAGS = ("--experimental-tvm-extension", "--experimental-tvmc-extension")  # the second: MLonMCU
HOST_TARGET = "c"


def split_extension_args(argv: Sequence[str]) -> Tuple[List[str], List[str]]:
    """(argv without extension flags, the extension paths in order)."""
    rest, paths = [], []
    args = iter(argv)
    for arg in args:
        flag, eq, value = arg.partition("=")
        if flag in EXTENSION_FLAGS:
            if not eq:
                value = next(args, None)
                if value is None:
                    raise ValueError(f"{flag} expects a folder holding a tvm_extension package")
            paths.append(value)
        else:
            rest.append(arg)
    return rest, paths


def _option_value(argv: Sequence[str], *names: str):
    for i, arg in enumerate(argv):
        for name in names:
            if arg == name and i + 1 < len(argv):
                return argv[i + 1]
            if name.startswith("--") and arg.startswith(name + "="):
                return arg[len(name) + 1:]
            if not name.startswith("--") and arg.startswith(name) and len(arg) > len(name):
                return arg[len(name):]
    return None


def _has_option(argv: Sequence[str], prefix: str) -> bool:
    return any(arg == prefix or arg.startswith(prefix + "=") or arg.startswith(prefix + "-") for arg in argv)


def target_names(target: str) -> List[str]:
    from tvm.driver.tvmc.target import parse_target  # pylint: disable=import-outside-toplevel

    return [t["name"] for t in parse_target(target)]


def with_embedded_defaults(argv: List[str], extension_targets: Sequence[str]) -> List[str]:
    """Add what an embedded MLF build needs when the user compiles an extension target to MLF."""
    if "compile" not in argv:
        return argv
    target = _option_value(argv, "--target")
    output_format = _option_value(argv, "--output-format", "-f")
    if not target:
        return argv
    try:
        names = target_names(target)
    except ValueError:
        return argv
    if not any(n in extension_targets for n in names):
        return argv
    if output_format != "mlf":
        raise ValueError("extension targets compile to Model Library Format: add -f mlf")
    executor = _option_value(argv, "--executor")
    unpacked = _option_value(argv, "--executor-aot-unpacked-api")
    if executor not in (None, "aot") or (unpacked is not None and unpacked.lower() in ("0", "false")):
        raise ValueError(
            "extension targets need the AOT executor with the unpacked API: "
            "drop --executor/--executor-aot-unpacked-api or use --executor aot --executor-aot-unpacked-api 1"
        )
    extra = [] if executor else ["--executor=aot"]
    if not _has_option(argv, "--executor-aot-interface-api"):
        extra += ["--executor-aot-interface-api=c"]
    if unpacked is None:
        extra += ["--executor-aot-unpacked-api=1"]
    if not _has_option(argv, "--runtime"):
        extra += ["--runtime=crt"]
    configs = " ".join(a for a in argv if a.startswith("tir.") or a.startswith("--pass-config="))
    if "tir.disable_vectorize" not in configs:
        extra += ["--pass-config=tir.disable_vectorize=1"]
    at = argv.index("compile") + 1
    return argv[:at] + extra + argv[at:]


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
    """``--target-<name>-<attr>`` for every attribute an extension backend registered."""
    for backend in backends:
        group = parser.add_argument_group(f"target {backend.target_name}")
        for attr, default in backend._target_attrs.items():
            kind = "true/false" if isinstance(default, bool) else type(default).__name__
            group.add_argument(
                f"--target-{backend.target_name}-{attr}",
                type=str,
                default=None,
                metavar=kind.upper().replace("/", "|"),
                help=f"target {backend.target_name} {attr} ({kind}, default: {default})",
            )


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
