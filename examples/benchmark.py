"""Side-by-side figures: a model compiled for Vanilla versus plain TVM's C build.

    python examples/benchmark.py [MODEL ...] [--compile-repeat N] [--runs N]

For the conv-heavy example network and each real model (examples/model_zoo.py) both builds go through TVM's own tvmc to an
AOT MLF (same executor, runtime and pass options), are built with the same gcc flags and
run on the same input:

* compile wall time of ``tvmc compile`` (median of --compile-repeat runs, interleaved);
* the host program's code size (``size``: text) and the MLF's workspace and constants;
* time per inference (median of --runs batches of repeated runs of the host program).

This is a benchmark, not a test: it prints ratios measured in one run on one machine.
"""
import argparse
import json
import platform
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from model_zoo import fetch  # noqa: E402
from tvm_extension.mlf import build  # noqa: E402

EXT = Path(__file__).resolve().parent / "ext"
TVMC = Path(sys.executable).parent / "tvmc"
EMBEDDED = ["--executor", "aot", "--executor-aot-interface-api", "c", "--executor-aot-unpacked-api", "1",
            "--runtime", "crt", "--pass-config", "tir.disable_vectorize=1"]
MODELS = {
    "vgg": {"input": (1, 3, 48, 48)},  # examples/models/vgg.onnx, conv-heavy
    "blazeface": {"input": (1, 128, 128, 3)},
    "kws_on_off_float32": {"serving_default_input_1:0": (1, 98, 1, 104)},
    "mtcnn_pnet": {"input_1": (1, 24, 24, 3)},
    "mtcnn_onet": {"input_3": (1, 48, 48, 3)},
}
BUILDS = {
    "vanilla": ["--target", "vanilla_accelerator", "--experimental-tvm-extension", str(EXT)],
    "plain": ["--target", "c"],
}


def compile_once(kind, model, shapes, out):
    shape_text = " ".join(f"{n}:[{','.join(map(str, s))}]" for n, s in shapes.items())
    command = [str(TVMC), "compile", *(BUILDS[kind] if isinstance(kind, str) else kind), *EMBEDDED, "--input-shapes", shape_text,
               str(model), "-f", "mlf", "-o", str(out)]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"error: compile of {model.name} ({command[2:4]}) failed: {done.stderr.strip().splitlines()[-1]}")
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


def measure(name, compile_repeat, runs, work):
    shapes = MODELS[name]
    local = Path(__file__).resolve().parent / "models" / f"{name}.onnx"
    model = local if local.is_file() else fetch(name)
    times = {kind: [] for kind in BUILDS}
    for _ in range(compile_repeat):
        for kind in BUILDS:
            times[kind].append(compile_once(kind, model, shapes, work / f"{name}-{kind}.tar"))
    rng = np.random.default_rng(0)
    inputs = {n: rng.standard_normal(s).astype(np.float32) for n, s in shapes.items()}
    row = {}
    for kind in BUILDS:
        mlf = work / f"{name}-{kind}.tar"
        program = build(mlf, work / f"{name}-{kind}")
        outputs, first = program.run(inputs, repeat=1)
        repeat = max(1, int(0.2 / max(first, 1e-6)))  # batches of about 0.2 s
        per_run = statistics.median(program.run(inputs, repeat=repeat)[1] for _ in range(runs))
        row[kind] = dict(compile=statistics.median(times[kind]), text=text_size(program.executable),
                         memory=memory(mlf), run=per_run, outputs=outputs)
    error = max(float(np.max(np.abs(a - b))) for a, b in zip(row["vanilla"]["outputs"].values(),
                                                            row["plain"]["outputs"].values()))
    return row, error


QUANTIZED_TWINS = [("kws_on_off_int8", "kws_on_off_float32", {"serving_default_input_1:0": (1, 98, 1, 104)})]
QVANILLA = ["--target", "qvanilla", "--experimental-tvm-extension", str(EXT)]


def int8_compile_ratios(repeat, work):
    """Compile time of an int8 network versus its float32 twin, plain TVM and with the backends."""
    print("\nint8 model | float twin | plain tvmc: int8 / float | with extension (qvanilla int8 / vanilla float)")
    print("--- | --- | --- | ---")
    for int8_name, float_name, shapes in QUANTIZED_TWINS:
        int8_model, float_model = fetch(int8_name), fetch(float_name)
        times = {key: [] for key in ("plain8", "plain32", "ext8", "ext32")}
        for _ in range(repeat):
            times["plain8"].append(compile_once("plain", int8_model, shapes, work / "p8.tar"))
            times["plain32"].append(compile_once("plain", float_model, shapes, work / "p32.tar"))
            times["ext8"].append(compile_once(QVANILLA, int8_model, shapes, work / "e8.tar"))
            times["ext32"].append(compile_once("vanilla", float_model, shapes, work / "e32.tar"))
        t = {k: statistics.median(v) for k, v in times.items()}
        print(f"{int8_name} | {float_name} | {t['plain8']:.1f} / {t['plain32']:.1f} = {t['plain8'] / t['plain32']:.2f}x"
              f" | {t['ext8']:.1f} / {t['ext32']:.1f} = {t['ext8'] / t['ext32']:.2f}x", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("models", nargs="*", metavar="MODEL", help=f"default: all of {', '.join(MODELS)}")
    parser.add_argument("--compile-repeat", type=int, default=1)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--skip-int8", action="store_true", help="leave out the int8/float compile-time table")
    args = parser.parse_args()
    cpu = next((l.split(":", 1)[1].strip() for l in Path("/proc/cpuinfo").read_text().splitlines()
                if l.startswith("model name")), platform.processor())
    print(f"machine: {cpu}, {platform.system()} {platform.machine()}, gcc -O2, one thread")
    header = ("model", "compile s (vanilla/plain = ratio)", "text bytes (ratio)", "workspace bytes (ratio)",
              "ms per run (speed-up)", "max |diff|")
    print(" | ".join(header))
    print(" | ".join("---" for _ in header))
    with tempfile.TemporaryDirectory(prefix="bench-") as work:
        for name in args.models or list(MODELS):
            row, error = measure(name, args.compile_repeat, args.runs, Path(work))
            v, p = row["vanilla"], row["plain"]
            print(" | ".join([
                name,
                f"{v['compile']:.1f} / {p['compile']:.1f} = {v['compile'] / p['compile']:.2f}x",
                f"{v['text']} / {p['text']} = {v['text'] / p['text']:.2f}x",
                f"{v['memory'][0]} / {p['memory'][0]} = {v['memory'][0] / max(1, p['memory'][0]):.2f}x",
                f"{v['run'] * 1e3:.2f} / {p['run'] * 1e3:.2f} = {p['run'] / v['run']:.1f}x faster",
                f"{error:.2g}",
            ]), flush=True)
        if not args.skip_int8:
            int8_compile_ratios(args.compile_repeat, Path(work))


if __name__ == "__main__":
    main()
