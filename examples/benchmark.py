"""Side-by-side figures: a model compiled for the extension's backend versus plain TVM's C build and the frameworks.

    python examples/benchmark.py [MODEL ...] [--compile-repeat N] [--runs N] [--skip-int8] [--cflags FLAGS]
                                 [--tflite-exact]

Float networks (the conv-heavy example network and real models of examples/model_zoo.py) are
compiled for Vanilla, int8 networks for QVanilla, each also with plain TVM (``--target c``);
both go through TVM's own tvmc to an AOT MLF (same executor, runtime and pass options), are
built with the same gcc flags and run on the same input. ``--cflags "-march=native"`` adds flags
to every C source of both builds: gcc gets them for all of each MLF's C, and the extension's
kernel library also through its backend's ``cflags`` target attribute if it registers one (as a
user would pass them: ``--target-vanilla_accelerator-cflags=-march=native``). Beside them, on
that input, run what a user would pick instead (examples/bench_references.py): TFLite's
interpreter with XNNPACK and with builtin kernels only for a .tflite model, ONNX Runtime for an
.onnx model. One thread each.

* compile wall time of ``tvmc compile`` (median of --compile-repeat runs, interleaved);
* the host program's code size (``size``: text) and the MLF's workspace and constants;
* time per inference: --runs rounds, each running every runtime in turn (A, B, C, A, B, C ...)
  for a batch of repeated runs of about 0.2 s; the median over rounds;
* the model's multiply-accumulates (conv2d and dense/matmul) and GMAC/s per runtime.

This is a benchmark, not a test: it prints ratios measured in one run on one machine.
"""
import argparse
import functools
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Dict, List

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_references as refs  # noqa: E402
from tvm_extension.testing.model_zoo import ModelFetchError, fetch  # noqa: E402
from tvm_extension.mlf import HostBuildError, build  # noqa: E402

TVMC = Path(sys.executable).parent / "tvmc"
EMBEDDED = ["--executor", "aot", "--executor-aot-interface-api", "c", "--executor-aot-unpacked-api", "1",
            "--runtime", "crt", "--pass-config", "tir.disable_vectorize=1"]
FLOAT_MODELS = {
    "vgg": {"input": (1, 3, 48, 48)},  # examples/models/vgg.onnx, conv-heavy
    "blazeface": {"input": (1, 128, 128, 3)},
    "kws_on_off_float32": {"serving_default_input_1:0": (1, 98, 1, 104)},
    "mtcnn_pnet": {"input_1": (1, 24, 24, 3)},
    "mtcnn_onet": {"input_3": (1, 48, 48, 3)},
}
INT8_MODELS = {
    "kws_dscnn_int8": {"input_1": (1, 50, 10, 1)},  # int8 inside, float32 input and output
    "kws_on_off_int8": {"serving_default_input_1:0": (1, 98, 1, 104)},
}
MODELS = {**FLOAT_MODELS, **INT8_MODELS}
BUILDS = {  # the example backends are installed (scripts/env.sh): tvmc finds them without an extension flag
    "vanilla": ["--target", "vanilla_accelerator"],
    "qvanilla": ["--target", "qvanilla"],
    "plain": ["--target", "c"],
}
BUILDS.update({f"{kind} exact": BUILDS[kind] + ["--tflite-exact"] for kind in ("plain", "qvanilla")})
KINDS = {"float": ("vanilla", FLOAT_MODELS), "int8": ("qvanilla", INT8_MODELS)}  # kind: extension build, models
PLAIN = "TVM C"
BATCH_SECONDS = 0.2
BASE_CFLAGS = ["-O2"]  # gcc flags of every host build, before --cflags


@functools.lru_cache(maxsize=None)
def cflags_options() -> frozenset:
    """The ``--target-NAME-cflags`` options tvmc accepts with the extensions loaded."""
    done = subprocess.run([str(TVMC), "compile", "--help"], capture_output=True, text=True)
    return frozenset(re.findall(r"--target-\w+-cflags", done.stdout))


def target_cflags(kind, cflags: List[str]) -> List[str]:
    """tvmc options giving ``cflags`` to the kernel library of ``kind``'s backend, if it takes them."""
    option = f"--target-{BUILDS[kind][1]}-cflags"
    return [f"{option}={' '.join(cflags)}"] if cflags and option in cflags_options() else []


def compile_once(kind, model, shapes, out, cflags: List[str]):
    shape_text = " ".join(f"{n}:[{','.join(map(str, s))}]" for n, s in shapes.items())
    command = [str(TVMC), "compile", *BUILDS[kind], *target_cflags(kind, cflags), *EMBEDDED,
               "--input-shapes", shape_text, str(model), "-f", "mlf", "-o", str(out)]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        raise SystemExit(f"error: tvmc compile of {model.name} for {kind} ({' '.join(BUILDS[kind][:2])}) failed: {reason}")
    return seconds


def text_size(executable):
    line = subprocess.run(["size", str(executable)], capture_output=True, text=True, check=True).stdout.splitlines()[1]
    return int(line.split()[0])


def memory(mlf):
    with tarfile.open(mlf) as archive:
        metadata = json.load(archive.extractfile("./metadata.json"))
    (module,) = metadata["modules"].values()
    main = module["memory"]["functions"]["main"][0]
    return int(main["workspace_size_bytes"]), int(main.get("constants_size_bytes", 0))


def source_flags(mlf) -> Dict[str, str]:
    """Extra flags the MLF asks for per C source (``codegen/host/src/NAME.cflags``, by ``NAME.c``)."""
    with tarfile.open(mlf) as archive:
        return {Path(member.name).with_suffix(".c").name: archive.extractfile(member).read().decode().strip()
                for member in archive.getmembers() if member.name.endswith(".cflags")}


def model_path(name):
    local = Path(__file__).resolve().parent / "models" / f"{name}.onnx"
    return local if local.is_file() else fetch(name)


def make_inputs(program, shapes, seed=0):
    """One input per model input, of the model's dtype: normal floats, integers over the whole range."""
    rng = np.random.default_rng(seed)
    dtypes = {t.name: np.dtype(t.dtype) for t in program.inputs}
    inputs = {}
    for name, shape in shapes.items():
        dtype = dtypes[name]
        if np.issubdtype(dtype, np.integer):
            info = np.iinfo(dtype)
            inputs[name] = rng.integers(info.min, info.max, shape, endpoint=True).astype(dtype)
        else:
            inputs[name] = rng.standard_normal(shape).astype(dtype)
    return inputs


def host_runner(program, inputs):
    outputs, _ = program.run(inputs)
    return refs.Runner(list(outputs.values()), lambda repeat: program.run(inputs, repeat=repeat)[1])


def batch_size(runner):
    """Runs per batch of about BATCH_SECONDS (after a warm-up run)."""
    first = runner.seconds_per_run(1)
    probe = max(1, int(0.02 / max(first, 1e-7)))
    return max(1, round(BATCH_SECONDS / max(runner.seconds_per_run(probe), 1e-7)))


def interleaved(runners: Dict[str, refs.Runner], rounds: int) -> Dict[str, float]:
    """Median seconds per run of each runner; each round times one batch of every runner in turn."""
    repeats = {label: batch_size(runner) for label, runner in runners.items()}
    samples = {label: [] for label in runners}
    for _ in range(rounds):
        for label, runner in runners.items():
            samples[label].append(runner.seconds_per_run(repeats[label]))
    return {label: statistics.median(times) for label, times in samples.items()}


def max_difference(ours: List[np.ndarray], theirs: List[np.ndarray]):
    """Largest absolute difference over all outputs (in the output's units), None if they do not match up."""
    if len(ours) != len(theirs) or any(a.size != b.size for a, b in zip(ours, theirs)):
        return None
    return max(float(np.max(np.abs(a.astype(np.float64).ravel() - b.astype(np.float64).ravel()))) for a, b in zip(ours, theirs))


def measure(name, ext, compile_repeat, runs, work, cflags):
    shapes, model = MODELS[name], model_path(name)
    times = {kind: [] for kind in (ext, "plain")}
    for _ in range(compile_repeat):
        for kind in times:
            times[kind].append(compile_once(kind, model, shapes, work / f"{name}-{kind}.tar", cflags))
    gcc_flags = BASE_CFLAGS + cflags
    programs = {kind: build(work / f"{name}-{kind}.tar", work / f"{name}-{kind}", cflags=gcc_flags) for kind in times}
    inputs = make_inputs(programs["plain"], shapes)
    runners = {ext: host_runner(programs[ext], inputs), PLAIN: host_runner(programs["plain"], inputs),
               **refs.references(model, inputs)}
    framework = next(label for label in runners if label not in (ext, PLAIN))
    return dict(
        macs=refs.count_macs(model, shapes),
        compile={kind: statistics.median(t) for kind, t in times.items()},
        text={kind: text_size(p.executable) for kind, p in programs.items()},
        workspace={kind: memory(work / f"{name}-{kind}.tar")[0] for kind in times},
        seconds=interleaved(runners, runs),
        notes={label: runner.note for label, runner in runners.items()},
        diff_plain=max_difference(runners[ext].outputs, runners[PLAIN].outputs),
        diff_framework=max_difference(runners[ext].outputs, runners[framework].outputs),
        flags={kind: source_flags(work / f"{name}-{kind}.tar") for kind in times},
    )


def ratio(ours, theirs, digits=1):
    return f"{ours:.{digits}f} / {theirs:.{digits}f} = " + (f"{ours / theirs:.2f}x" if theirs else "n/a")


def flags_line(ext, cflags, flags):
    """What gcc got in each build: ``flags`` maps build -> C source -> its extra flags from the MLF."""
    gcc = " ".join(BASE_CFLAGS + cflags)
    described = []
    for kind, label in ((ext, ext), ("plain", PLAIN)):
        own = "; ".join(f"{source} also {extra} (the MLF's src/{Path(source).stem}.cflags)"
                        for source, extra in sorted(flags[kind].items()))
        described.append(f"{label}: gcc {gcc} for all C" + (f", {own}" if own else ""))
    attribute = target_cflags(ext, cflags)
    via = (f"; tvmc {ext} compile given {shlex.join(attribute)}" if attribute else
           f"; {BUILDS[ext][1]} registers no cflags target attribute (its library gets the gcc flags above)"
           if cflags else "")
    return "compiler flags: " + "; ".join(described) + " (both also -std=c11 and section GC)" + via


def print_table(kind, names, compile_repeat, runs, work, cflags):
    ext, _ = KINDS[kind]
    others = [PLAIN] + [label for label in ("LiteRT XNNPACK", "LiteRT builtin", "ONNX Runtime")
                        if any(label in refs.reference_labels(model_path(n)) for n in names)]
    header = ["model", "MMAC", f"compile s ({ext} / plain = ratio)", "text bytes (ratio)", "workspace bytes (ratio)",
              "max abs diff vs TVM C / vs framework", f"{ext}: ms, GMAC/s",
              *(f"{label}: ms, GMAC/s, {ext} speed-up" for label in others)]
    print(f"\n{kind} networks ({ext} = the extension's build; speed-up = runtime's ms / {ext}'s ms)\n")
    print("| " + " | ".join(header) + " |")
    print("|" + " --- |" * len(header), flush=True)
    flags = {ext: {}, "plain": {}}
    for name in names:
        row = measure(name, ext, compile_repeat, runs, work, cflags)
        s, macs = row["seconds"], row["macs"]
        for build_kind, per_source in row["flags"].items():
            flags[build_kind].update(per_source)

        def speed(label):
            return f"{s[label] * 1e3:.3g} ms, {macs / s[label] / 1e9:.2f} GMAC/s"

        diffs = " / ".join("n/a" if d is None else f"{d:.2g}" for d in (row["diff_plain"], row["diff_framework"]))
        cells = [
            name, f"{macs / 1e6:.2f}",
            ratio(row["compile"][ext], row["compile"]["plain"]),
            ratio(row["text"][ext], row["text"]["plain"], 0),
            ratio(row["workspace"][ext], row["workspace"]["plain"], 0),
            diffs, speed(ext),
            *(f"{speed(label)}, {s[label] / s[ext]:.2f}x" + (f" ({row['notes'][label]})" if row["notes"][label] else "")
              if label in s else "–" for label in others),
        ]
        print("| " + " | ".join(cells) + " |", flush=True)
    print(f"\n{flags_line(ext, cflags, flags)}", flush=True)


QUANTIZED_TWINS = [("kws_on_off_int8", "kws_on_off_float32", {"serving_default_input_1:0": (1, 98, 1, 104)})]


def int8_compile_ratios(repeat, work, cflags):
    """Compile time of an int8 network versus its float32 twin, plain TVM and with the backends."""
    print("\n| int8 model | float twin | plain tvmc: int8 / float | with the extensions: qvanilla int8 / vanilla float |")
    print("| --- | --- | --- | --- |", flush=True)
    for int8_name, float_name, shapes in QUANTIZED_TWINS:
        int8_model, float_model = fetch(int8_name), fetch(float_name)
        times = {key: [] for key in ("plain8", "plain32", "ext8", "ext32")}
        for _ in range(repeat):
            times["plain8"].append(compile_once("plain", int8_model, shapes, work / "p8.tar", cflags))
            times["plain32"].append(compile_once("plain", float_model, shapes, work / "p32.tar", cflags))
            times["ext8"].append(compile_once("qvanilla", int8_model, shapes, work / "e8.tar", cflags))
            times["ext32"].append(compile_once("vanilla", float_model, shapes, work / "e32.tar", cflags))
        t = {k: statistics.median(v) for k, v in times.items()}
        print(f"| {int8_name} | {float_name} | {ratio(t['plain8'], t['plain32'])} | {ratio(t['ext8'], t['ext32'])} |",
              flush=True)


def tflite_exact_table(names, compile_repeat, runs, work, cflags):
    """The cost of ``--tflite-exact``: compile and run time with and without it, on the CPU and
    with QVanilla, interleaved; the exact builds' outputs against TFLite's reference kernels."""
    kinds = ["plain", "plain exact", "qvanilla", "qvanilla exact"]
    print("\n--tflite-exact: compile s and run ms (exact / TVM's arithmetic = ratio); exact builds' max abs diff "
          "from TFLite's reference kernels\n")
    print("| int8 model | CPU compile s | CPU run ms | QVanilla compile s | QVanilla run ms | diff CPU / QVanilla |")
    print("| --- | --- | --- | --- | --- | --- |", flush=True)
    for name in names:
        shapes, model = MODELS[name], model_path(name)
        times = {kind: [] for kind in kinds}
        for _ in range(compile_repeat):
            for kind in kinds:
                times[kind].append(compile_once(kind, model, shapes, work / f"{name}-{kind}.tar", cflags))
        programs = {kind: build(work / f"{name}-{kind}.tar", work / f"{name}-{kind}", cflags=BASE_CFLAGS + cflags)
                    for kind in kinds}
        inputs = make_inputs(programs["plain"], shapes)
        runners = {kind: host_runner(programs[kind], inputs) for kind in kinds}
        seconds = interleaved(runners, runs)
        reference = refs.tflite_reference_kernels(model, inputs)
        compile_s = {kind: statistics.median(t) for kind, t in times.items()}
        diffs = " / ".join(f"{max_difference(runners[k].outputs, reference):.2g}" for k in ("plain exact", "qvanilla exact"))
        cells = [name, ratio(compile_s["plain exact"], compile_s["plain"]),
                 ratio(seconds["plain exact"] * 1e3, seconds["plain"] * 1e3, 2),
                 ratio(compile_s["qvanilla exact"], compile_s["qvanilla"]),
                 ratio(seconds["qvanilla exact"] * 1e3, seconds["qvanilla"] * 1e3, 2), diffs]
        print("| " + " | ".join(cells) + " |", flush=True)


def machine_line(runs, compile_repeat, cflags):
    cpu = next((l.split(":", 1)[1].strip() for l in Path("/proc/cpuinfo").read_text().splitlines()
                if l.startswith("model name")), platform.processor())
    gcc = subprocess.run(["gcc", "-dumpfullversion"], capture_output=True, text=True).stdout.strip() or "?"
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (f"machine: {cpu}, {os.cpu_count()} cores, {platform.system()} {platform.machine()}, load {load:.2f} at start; "
            f"C built with gcc {gcc} {' '.join(BASE_CFLAGS + cflags)}; one thread each (TFLite num_threads=1, "
            f"ONNX Runtime 1 intra-op and 1 inter-op thread, sequential; {refs.versions()}); one input per model; "
            f"times: median of {runs} interleaved rounds of ~{BATCH_SECONDS} s batches, compile: median of {compile_repeat}")


def glued_cflags(argv: List[str]) -> List[str]:
    """``--cflags -march=native`` as ``--cflags=-march=native``: argparse takes no value starting with -."""
    glued = list(argv)
    for i, arg in enumerate(glued[:-1]):
        if arg == "--cflags":
            glued[i:i + 2] = [f"--cflags={glued[i + 1]}"]
            break
    return glued


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("models", nargs="*", metavar="MODEL",
                        help=f"default: all of {', '.join(FLOAT_MODELS)} and, unless --skip-int8, {', '.join(INT8_MODELS)}")
    parser.add_argument("--compile-repeat", type=int, default=1, help="compiles per build, interleaved (default 1)")
    parser.add_argument("--runs", type=int, default=5, help="interleaved timing rounds (default 5)")
    parser.add_argument("--skip-int8", action="store_true",
                        help="leave out the int8/float compile-time table, and the int8 networks unless named")
    parser.add_argument("--cflags", default="", metavar="FLAGS",
                        help=f"extra gcc flags for all C of both builds, after {' '.join(BASE_CFLAGS)} "
                             "(e.g. \"-march=native\"); the kernel library also gets them through its backend's "
                             "cflags target attribute")
    parser.add_argument("--tflite-exact", action="store_true",
                        help="also the cost of tvmc compile --tflite-exact on the int8 networks (CPU and QVanilla)")
    args = parser.parse_args(glued_cflags(sys.argv[1:]))
    cflags = shlex.split(args.cflags)
    unknown = [name for name in args.models if name not in MODELS]
    if unknown or args.runs < 1 or args.compile_repeat < 1:
        sys.exit(f"error: unknown model {', '.join(unknown)} (known: {', '.join(MODELS)})" if unknown
                 else "error: --runs and --compile-repeat must be at least 1")
    selected = args.models or list(FLOAT_MODELS) + ([] if args.skip_int8 else list(INT8_MODELS))
    try:
        for name in selected:
            refs.require(model_path(name))
        print(machine_line(args.runs, args.compile_repeat, cflags), flush=True)
        with tempfile.TemporaryDirectory(prefix="bench-") as work:
            for kind, (_, models) in KINDS.items():
                names = [name for name in selected if name in models]
                if names:
                    print_table(kind, names, args.compile_repeat, args.runs, Path(work), cflags)
            if not args.skip_int8:
                int8_compile_ratios(args.compile_repeat, Path(work), cflags)
            if args.tflite_exact:
                names = [name for name in selected if name in INT8_MODELS] or list(INT8_MODELS)
                tflite_exact_table(names, args.compile_repeat, args.runs, Path(work), cflags)
    except (ModelFetchError, HostBuildError, refs.ReferenceError) as err:
        sys.exit(f"error: {err}")


if __name__ == "__main__":
    main()
