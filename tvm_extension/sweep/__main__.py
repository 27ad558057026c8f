"""``python -m tvm_extension.sweep [PLAN.toml] [options] -o OUT``: see tvm_extension/sweep/__init__.py
and docs/sweeps.md.  A user's error (bad TOML, unknown backend, model or attribute, empty list)
ends in one line before anything runs."""
import argparse
import sys
from pathlib import Path

from .engine import EngineError
from .grid import GridError


def _cli_values(text: str):
    """``16K..512K*2`` stays a range; ``4,8,16`` is a list (integers where they are)."""
    from .grid import _NUMBER, _number  # pylint: disable=import-outside-toplevel

    if ".." in text:
        return text
    return [_number(v) if _NUMBER.match(v) else v for v in text.split(",")] if text else []


def plan_from(args) -> dict:
    plan = {}
    if args.plan:
        try:
            import tomli  # pylint: disable=import-outside-toplevel
        except ImportError:  # Python 3.11+
            import tomllib as tomli  # pylint: disable=import-outside-toplevel
        try:
            plan = tomli.loads(Path(args.plan).read_text())
        except OSError as err:
            raise GridError(f"cannot read {args.plan}: {err.strerror}") from None
        except tomli.TOMLDecodeError as err:
            raise GridError(f"{args.plan} is not valid TOML: {err}") from None
    if args.model:
        plan["models"] = list(plan.get("models", [])) + args.model
    if args.board:
        plan["board"] = args.board
    if args.device:
        plan["device"] = args.device
    if args.engine:
        plan["engine"] = args.engine
    backends = plan.setdefault("backends", {})
    if not isinstance(backends, dict):
        raise GridError("'backends' is a table: [backends.NAME]")
    for name in args.backend:
        backends.setdefault(name, {})
    for option in args.attr:
        target, _, spec = option.partition("=")
        backend, _, name = target.partition(".")
        if not (backend and name and _):
            raise GridError(f"--attr {option}: expected BACKEND.ATTRIBUTE=VALUES")
        backends.setdefault(backend, {})[name] = _cli_values(spec)
    return plan


def main(argv=None, prog: str = "python -m tvm_extension.sweep") -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n")[0])
    parser.add_argument("plan", nargs="?", help="a TOML plan: models = [...], [backends.NAME] attribute = values")
    parser.add_argument("-o", "--output", required=True, type=Path,
                        help="folder for results.csv, results.parquet, figures/ and report.md")
    parser.add_argument("--model", action="append", default=[], help="a model file or zoo name (repeatable)")
    parser.add_argument("--backend", action="append", default=[], help="a backend, at its default attributes")
    parser.add_argument("--attr", action="append", default=[], metavar="BACKEND.NAME=VALUES",
                        help="values of one attribute: 4,8,16 or a range 16K..512K*2 (FROM..TO*FACTOR, FROM..TO+STEP)")
    parser.add_argument("--cache", type=Path, help="cache folder (default $TVM_EXTENSION_SWEEP_CACHE or "
                        "~/.cache/tvm-uma-extensions/sweeps)")
    parser.add_argument("--address", help="join this Ray cluster (ray start --head prints it; else $RAY_ADDRESS if "
                        "set) instead of starting a Ray of the sweep's own here")
    parser.add_argument("--workers", type=int, help="points at once on this machine (default: its cores)")
    parser.add_argument("--no-ray", action="store_true", help="a local process pool instead of Ray")
    parser.add_argument("--board", help="also build each point for this emulated Cortex-M board (mps2-an386, ...) "
                        "and record ROM, RAM and instructions per inference (QEMU)")
    parser.add_argument("--device", help="also run each point against this device (rtl: Chocolate's core in "
                        "Verilog under Verilator) and record its cycles and cost (the core's Yosys area)")
    parser.add_argument("--engine", choices=["relay", "relax"],
                        help="compile with TVM's own tvmc (relay, the default) or the Relax engine (apache-tvm)")
    parser.add_argument("--keep-work", action="store_true", help="keep each point's folder (MLF, build) in the cache")
    args = parser.parse_args(argv)
    if args.output.exists() and not args.output.is_dir():
        sys.stderr.write(f"error: {args.output} exists and is not a folder\n")
        return 2
    from . import run_sweep  # pylint: disable=import-outside-toplevel

    try:
        records = run_sweep(plan_from(args), args.output, args.cache, args.address, args.workers,
                            use_ray=not args.no_ray, keep_work=args.keep_work)
    except (GridError, EngineError) as err:
        sys.stderr.write(f"error: {err}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("\ninterrupted: the finished points are cached; the same command resumes\n")
        return 130
    failed = sum(bool(r.get("error")) for r in records)
    print(f"{len(records)} points, {failed} failed: {args.output / 'report.md'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
