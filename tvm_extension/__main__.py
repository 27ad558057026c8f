"""The project's commands: list the backends found, scaffold a new one, sweeps; tvmc's compile and run.

    python -m tvm_extension list [--experimental-tvm-extension PATH ...]   # alias: --uma-backends PATH
    python -m tvm_extension new NAME [--directory DIR] [--int8 | --like EXAMPLE]
    python -m tvm_extension examples      # the folder holding the example backends (uma_vanilla, ...)
    python -m tvm_extension sweep ...     # design-space sweeps: python -m tvm_extension.sweep
    python -m tvm_extension --version     # this project's version and TVM's
    python -m tvm_extension compile|run   # tvmc's (the console script tvm-extension is this command)

Either engine: on apache-tvm (the Relax engine) ``list`` shows the backends that engine finds
(a package with a ``relax_patterns.py``), on hhb-tvm (Relay) the extensions TVM's tvmc loads.
"""
import argparse
import sys

from tvm_extension import api
from tvm_extension.api.version import VersionAction


def list_relax_backends(paths) -> int:
    """The backends the Relax engine finds, where from, their target attributes; failures last."""
    from tvm_extension.relax.backends import UserError, listed  # pylint: disable=import-outside-toplevel

    try:
        found = listed(paths)
    except UserError as err:
        sys.stderr.write(f"Error: {err}\n")
        return 2
    for target, module, where, _ in (f for f in found if f[3] is None):
        ranges = getattr(module, "TARGET_ATTR_RANGES", {})
        attrs = ", ".join(f"{k}={v!r}" + (f" (range {ranges[k][0]}..{ranges[k][1]})" if k in ranges else "")
                          for k, v in module.TARGET_ATTRS.items()) or "no attributes"
        print(f"{module.__name__.split('.')[0]} (Relax engine)\n  from: {where}\n  target {target}: {attrs}")
    failed = [f for f in found if f[3] is not None]
    for name, _, where, error in failed:
        print(f"FAILED {name}\n  from: {where}\n  why: {error}")
    if not found:
        print("no backends found for the Relax engine (a package holding relax_patterns.py); add a folder with "
              "--experimental-tvm-extension DIR, or pip install one; python -m tvm_extension new NAME creates one")
    return 1 if failed else 0


def list_extensions(paths) -> int:
    """Each extension, where it came from, its backends and their target attributes; failures last
    (worded as tvmc compile words them); where it looked when nothing was found."""
    found = api.discover(paths, strict=False)
    failed = [e for e in found if e.error]
    for extension in (e for e in found if not e.error):
        print(f"{extension.name}\n  from: {extension.origin} ({extension.location})")
        for backend in extension.backends():
            attrs = ", ".join(f"{k}={v!r}" for k, v in backend._target_attrs.items()) or "no attributes"
            print(f"  target {backend.target_name}: {attrs}")
    for extension in failed:
        print(f"FAILED {extension.name}\n  from: {extension.origin}\n  why: {extension.error}")
    if not found:
        print("no extensions found; looked in:")
        for place in api.searched_places(paths):
            print(f"  {place}")
        print("add a folder holding tvm_extension/<name>/__init__.py with --experimental-tvm-extension DIR "
              "(or --uma-backends DIR, or TVM_EXTENSION_PATH=DIR), or pip install a package that ships one; "
              "python -m tvm_extension new NAME creates one")
    return 1 if failed else 0


def main(argv=None, prog: str = "python -m tvm_extension") -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["sweep"]:  # its own options (python -m tvm_extension.sweep --help)
        from tvm_extension.sweep.__main__ import main as sweep  # pylint: disable=import-outside-toplevel

        return sweep(argv[1:])
    if argv[:1] in (["compile"], ["run"], ["tune"]):  # tvmc's
        from tvm_extension.cli import tvmc  # pylint: disable=import-outside-toplevel

        return tvmc(argv)
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n")[0])
    parser.add_argument("--version", action=VersionAction, help="print this project's version and TVM's, and exit")
    sub = parser.add_subparsers(dest="command", required=True)
    listing = sub.add_parser("list", help="list the extensions found and where they come from")
    listing.add_argument("--experimental-tvm-extension", "--experimental-tvmc-extension", "--uma-backends",
                         dest="paths", metavar="PATH", action="append", default=[],
                         help="also load this folder (repeatable; --experimental-tvmc-extension, MLonMCU's "
                              "spelling, and --uma-backends are aliases; folders are also read from "
                              + ", ".join(f"${v}" for v in api.discovery.ENV_VARS) + ")")
    new = sub.add_parser("new", help="create a working backend project for a new accelerator")
    new.add_argument("name", help="the accelerator's name: a Python identifier, also its target name")
    new.add_argument("--directory", default=".", help="where to create the NAME folder (default: here)")
    new.add_argument("--int8", action="store_true",
                     help="an int8 backend (TFLite's quantized convs, both roundings) instead of the float32 one")
    new.add_argument("--like", metavar="EXAMPLE", choices=["vanilla", "qvanilla", "strawberry", "chocolate"],
                     help="start from a copy of an example backend (vanilla, qvanilla, strawberry, chocolate), "
                          "renamed: its target, package, classes, C symbols and tests")
    sub.add_parser("sweep", help="design-space sweeps of target attributes over models (sweep --help)")
    sub.add_parser("examples", help="print the folder holding the example backends (uma_vanilla...), each an extension folder")
    sub.add_parser("compile", help="compile a model: tvmc compile (compile --help)")
    sub.add_parser("run", help="run a compiled model: tvmc run (run --help)")
    args = parser.parse_args(argv)
    if args.command == "list":
        from tvm_extension.cli import relay_engine  # pylint: disable=import-outside-toplevel

        return list_extensions(args.paths) if relay_engine() else list_relax_backends(args.paths)
    if args.command == "examples":
        from tvm_extension.api.resources import data_folder  # pylint: disable=import-outside-toplevel

        print(data_folder("tvm_extension.scaffold", "examples", "."))
        return 0
    from tvm_extension.scaffold import ScaffoldError, create, create_like, next_steps  # pylint: disable=import-outside-toplevel

    if args.like and args.int8:
        parser.error("--like and --int8 are two different starting points: give one")
    try:
        project = create_like(args.name, args.like, args.directory) if args.like else \
            create(args.name, args.directory, int8=args.int8)
    except ScaffoldError as err:
        sys.stderr.write(f"Error: {err}\n")
        return 2
    print(next_steps(project, args.name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
