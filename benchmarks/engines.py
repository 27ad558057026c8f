"""The two engines side by side: compile time and run time of each network on the Relax engine
(apache-tvm 0.27) with the backend's offload and without (``--target llvm``), and on the Relay
engine (hhb-tvm: tvmc -> MLF -> gcc -O2 host program), as ratios to the Relay engine.

    python benchmarks/engines.py                          # cnn, mtcnn_pnet, kws_dscnn_int8; 3 rounds
    python benchmarks/engines.py --networks blazeface kws_on_off_float32 --rounds 5

Measured interleaved (round 1: A, B, C; round 2: A, B, C; ...), medians over the rounds, one
thread (TVM_NUM_THREADS=1; the MLF's host program is single-threaded), the same input for every
side.  Compile time: the whole command, as a user runs it (interpreter start-up and import
included: `tvmc compile` and `tvmc compile`).  Run time: seconds per inference over
--repeat runs inside one process (the Relax VM; the MLF's program), after one untimed run.
Every output is checked against the Relay engine's (int8: a few steps apart, see docs/relax.md).
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from tvm_extension.testing import example_model, fetch

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
RELAX_BIN = ROOT / ".venv-relax" / "bin"
# name: (where it comes from, the backend, --input-shapes or None)
NETWORKS = {
    "cnn": (lambda: example_model("cnn"), "vanilla_accelerator", None),
    "mtcnn_pnet": (lambda: fetch("mtcnn_pnet"), "vanilla_accelerator", "input_1:[1,24,24,3]"),
    "blazeface": (lambda: fetch("blazeface"), "vanilla_accelerator", None),
    "kws_on_off_float32": (lambda: fetch("kws_on_off_float32"), "vanilla_accelerator", None),
    "kws_dscnn_int8": (lambda: fetch("kws_dscnn_int8"), "qvanilla", None),
}
SIDES = ("relax offload", "relax llvm", "relay mlf")


def _timed(command, env) -> tuple:
    started = time.perf_counter()
    done = subprocess.run([str(c) for c in command], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, command[:3]))} failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
    return time.perf_counter() - started, done.stdout + done.stderr


def _compile(side, model, target, shapes, out, env):
    extra = ["--input-shapes", shapes] if shapes else []
    if side == "relay mlf":
        return _timed([BIN / "tvmc", "compile", "--target", f"{target},c", *extra, model, "-f", "mlf", "-o", out], env)
    return _timed([RELAX_BIN / "tvmc", "compile", model, "--target", target if side == "relax offload" else "llvm",
                   *extra, "-o", out], env)


def _run(side, artefact, inputs, outputs, repeat, env) -> float:
    if side == "relay mlf":
        command = [BIN / "python", "-m", "tvm_extension.mlf", "run", artefact, "-i", inputs, "-o", outputs,
                   "--repeat", str(repeat)]
        _, text = _timed(command, env)
        return float(re.search(r"seconds per run: ([0-9.]+)", text).group(1))
    command = [RELAX_BIN / "tvmc", "run", artefact, "-i", inputs, "-o", outputs, "--print-time", "--repeat", str(repeat)]
    _, text = _timed(command, env)
    return float(re.search(r"mean \(ms\) of \d+ runs\n ([0-9.]+)", text).group(1)) / 1e3


def _inputs(model: Path, shapes, path: Path):
    """One random input per model input (int8 over its range), by name, for every side."""
    from tvm.driver import tvmc  # pylint: disable=import-outside-toplevel
    from tvm.driver.tvmc.shape_parser import parse_shape_string  # pylint: disable=import-outside-toplevel

    from tvm import relay  # pylint: disable=import-outside-toplevel

    loaded = tvmc.load(str(model), shape_dict=parse_shape_string(shapes) if shapes else None)
    mod = relay.transform.InferType()(loaded.mod)  # the TFLite frontend leaves the types to infer
    rng = np.random.default_rng(0)
    arrays = {}
    for param in mod["main"].params:
        if param.name_hint in loaded.params:
            continue
        shape, dtype = [int(d) for d in param.checked_type.shape], param.checked_type.dtype
        arrays[param.name_hint] = (rng.integers(-128, 128, shape).astype(dtype) if dtype == "int8"
                                   else rng.standard_normal(shape).astype(dtype))
    np.savez(path, **arrays)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--networks", nargs="+", default=["cnn", "mtcnn_pnet", "kws_dscnn_int8"], choices=list(NETWORKS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=50, help="inferences per run-time measurement")
    args = parser.parse_args(argv)
    if not (RELAX_BIN / "tvmc").is_file():
        raise SystemExit(f"{RELAX_BIN / 'tvmc'} is missing: source scripts/env.sh test sets up the Relax engine")
    env = {**os.environ, "TVM_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    env.pop("PYTHONPATH", None)
    print(f"# {time.strftime('%Y-%m-%d')}, {os.uname().nodename}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; "
          f"{args.rounds} interleaved rounds, medians; run time over {args.repeat} inferences, one thread")
    print("| network | backend | compile s: Relax offload / Relax llvm / Relay MLF | ratio to Relay | "
          "run ms: Relax offload / Relax llvm / Relay MLF | ratio to Relay |")
    print("|---|---|---|---|---|---|")
    for name in args.networks:
        source, target, shapes = NETWORKS[name]
        model = source()
        with tempfile.TemporaryDirectory(prefix=f"engines-{name}-") as work:
            work = Path(work)
            _inputs(model, shapes, work / "in.npz")
            artefacts = {"relax offload": work / "offload.so", "relax llvm": work / "plain.so",
                         "relay mlf": work / "model.tar"}
            compile_s = {side: [] for side in SIDES}
            run_s = {side: [] for side in SIDES}
            for _ in range(args.rounds):
                for side in SIDES:
                    compile_s[side].append(_compile(side, model, target, shapes, artefacts[side], env)[0])
            outputs = {}
            for _ in range(args.rounds):
                for side in SIDES:
                    out = work / f"out-{side.replace(' ', '-')}.npz"
                    run_s[side].append(_run(side, artefacts[side], work / "in.npz", out, args.repeat, env))
                    with np.load(out) as data:
                        outputs[side] = [data[k] for k in data.files]
            worst = max(float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64))))
                        for side in SIDES[:2] for a, b in zip(outputs[side], outputs["relay mlf"]))
            c = {side: statistics.median(v) for side, v in compile_s.items()}
            r = {side: statistics.median(v) for side, v in run_s.items()}
            ratio = lambda m: " / ".join(f"{m[s] / m['relay mlf']:.2f}" for s in SIDES[:2])
            print(f"| {name} | {target} | {' / '.join(f'{c[s]:.1f}' for s in SIDES)} | {ratio(c)} | "
                  f"{' / '.join(f'{1000 * r[s]:.3f}' for s in SIDES)} | {ratio(r)} |  <!-- max |relax - relay| {worst:.3g} -->")
    return 0


if __name__ == "__main__":
    sys.exit(main())
