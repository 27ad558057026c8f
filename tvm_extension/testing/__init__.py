"""What a backend's tests need, shared by the framework's and every backend's own tests: TVM's own
tvmc in a subprocess, the C of an MLF, the independent references (onnx.reference, TVM's CPU
build, TFLite's interpreter, ONNX Runtime), tolerances, inputs, and the example and real models
(``models``, ``model_zoo``).  A backend copied alone needs only this and an installed framework.
"""
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np

from . import build_cache, warm_tvmc
from .models import example_model, float_model, qdq_model
from .model_zoo import ModelFetchError, fetch

BIN = Path(sys.executable).parent


def run_tvmc(*args, cwd=None, env=None, module=False, reuse=False):
    """TVM's own tvmc console script (or ``python -m tvm.driver.tvmc``) in a process of its own:
    forked from one that has imported TVM already (``warm_tvmc``), or a new one where that
    would not be the same.  ``reuse``: a successful ``compile ... -o OUT`` may come from the
    build cache (``build_cache``: the same command, files and code); the result then has
    ``reused`` set."""
    if reuse and env is None and not module and build_cache.folder() is not None:
        return _reused_compile(args, cwd)
    from tvm_extension.cli import relay_engine  # pylint: disable=import-outside-toplevel

    relay = relay_engine()  # else apache-tvm: this project's tvmc, on the Relax engine
    command = [sys.executable, "-m", "tvm.driver.tvmc" if relay else "tvm_extension.relax"] if module else [
        str(BIN / "tvmc")]
    full_env = dict(os.environ)
    full_env.pop("TVM_EXTENSION_PATH", None)
    full_env.update(env or {})
    done = warm_tvmc.run(BIN / "tvmc", module, args, cwd=cwd, env=full_env, timeout=900) if relay else None
    if done is not None:
        return done
    return subprocess.run(
        command + [str(a) for a in args], cwd=cwd, env=full_env, capture_output=True, text=True, timeout=900
    )


def _reused_compile(args, cwd):
    args = [str(a) for a in args]
    out = Path(cwd or ".", args[args.index("-o") + 1])
    described = [Path(cwd or ".", a).resolve() if not a.startswith("-") and Path(cwd or ".", a).exists() else a
                 for a in args]
    described[args.index("-o") + 1] = "OUTPUT"  # the archive does not depend on its name
    result = {}

    def compile_into(entry):
        done = run_tvmc(*args, cwd=cwd)
        result["done"] = done
        if done.returncode != 0:
            raise _NotCached()
        shutil.copyfile(out, entry / "output")
        (entry / "result.json").write_text(json.dumps([done.returncode, done.stdout, done.stderr]))

    try:
        entry = build_cache.cached(build_cache.key("tvmc", *described), compile_into)
    except _NotCached:
        return result["done"]
    if "done" in result:
        result["done"].reused = False
        return result["done"]
    shutil.copyfile(entry / "output", out)
    code, stdout, stderr = json.loads((entry / "result.json").read_text())
    done = subprocess.CompletedProcess(["tvmc", *args], code, stdout, stderr)
    done.reused = True
    return done


class _NotCached(Exception):
    """A failed compile: returned as it is, never cached."""


def assert_one_line_error(done, *fragments):
    """A user error: non-zero exit, one line on stderr naming the problem, no traceback."""
    assert done.returncode != 0, done.stdout + done.stderr
    lines = [l for l in done.stderr.splitlines() if l.strip() and not l.startswith("WARNING:")]
    assert "Traceback" not in done.stderr, done.stderr
    assert len(lines) == 1, done.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def relay_modules_loaded_by(*modules: str) -> list:
    """The ``tvm.relay`` modules a fresh interpreter has loaded after importing ``modules``."""
    code = (f"import sys\nimport {', '.join(modules)}\n"
            "print(sorted(m for m in sys.modules if m == 'tvm.relay' or m.startswith('tvm.relay.')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return eval(done.stdout)  # noqa: S307  (a list of names, printed just above)


def assert_relay_free(package: str, *extra: str):
    """A backend's description apart from Relay (issue 22, item 5): its TIR pass, target and
    codegen modules (and ``extra`` ones) import without loading ``tvm.relay``, so a second engine
    can reuse them; its patterns module does load it (so the check sees Relay where it is)."""
    assert relay_modules_loaded_by(*(f"{package}.{m}" for m in ("passes", "target", "codegen", *extra))) == []
    assert "tvm.relay" in relay_modules_loaded_by(f"{package}.patterns")


def assert_registers_target(backend, target):
    """The backend registers its target.py: name, attribute defaults and bounds in one place."""
    assert backend.target_name == target.NAME
    assert backend._target_attrs == target.ATTRIBUTES
    assert dict(getattr(backend, "target_attr_ranges", None) or {}) == getattr(target, "ATTR_RANGES", {})


def mlf_sources(archive_path):
    """{member name: text} of the generated and library C in an MLF."""
    with tarfile.open(archive_path) as archive:
        return {
            m.name: archive.extractfile(m).read().decode()
            for m in archive.getmembers()
            if m.isfile() and m.name.startswith("./codegen/host/") and m.name.endswith((".c", ".h"))
        }


def kernel_calls(archive_path, kernel: str):
    """Calls of the entry points matching the regular expression ``kernel`` (assigned to a status,
    or a statement of their own) in the MLF's generated C."""
    return sum(
        len(re.findall(rf"(?:= |^\s+){kernel}\(", text, re.MULTILINE))
        for text in mlf_sources(archive_path).values() if "// offloaded to" in text
    )


def onnx_reference(model_path, inputs):
    from onnx.reference import ReferenceEvaluator

    return ReferenceEvaluator(str(model_path)).run(None, inputs)


CPU_TARGET = "llvm -mtriple=x86_64-linux-gnu"


def tvm_cpu_reference(model_path, inputs, integer_graph=False):
    """TVM's own CPU build (llvm, x86-64, graph executor) of the same model, loaded as tvmc does;
    the build comes from the build cache when one is set (``build_cache``).

    ``integer_graph``: first turn dequantize/op/quantize (ONNX QDQ) into integer QNN ops with
    TVM's FakeQuantizationToInteger, the graph an int8 backend offloads.
    """
    import tvm
    from tvm.contrib import graph_executor

    shapes = {name: list(value.shape) for name, value in inputs.items()}
    entry = build_cache.cached(
        build_cache.key("tvm-cpu", Path(model_path), shapes, integer_graph, CPU_TARGET),
        lambda folder: _cpu_build(model_path, shapes, integer_graph).export_library(str(folder / "model.so")))
    lib = _cpu_build(model_path, shapes, integer_graph) if entry is None else \
        tvm.runtime.load_module(str(entry / "model.so"))
    runtime = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    runtime.set_input(**inputs)
    runtime.run()
    return [runtime.get_output(i).numpy() for i in range(runtime.get_num_outputs())]


def _cpu_build(model_path, shapes, integer_graph):
    import tvm
    from tvm import relay
    from tvm.driver import tvmc

    model = tvmc.load(str(model_path), shape_dict=shapes)
    mod, params = model.mod, model.params
    if integer_graph:
        mod = relay.transform.FakeQuantizationToInteger()(relay.transform.InferType()(mod))
    with tvm.transform.PassContext(opt_level=3):
        return relay.build(mod, target=CPU_TARGET, params=params)


def tflite_interpreter():
    """TFLite's interpreter module: tflite-runtime's (wheels up to Python 3.11), else its successor's,
    ai-edge-litert (the same ``Interpreter`` and ``OpResolverType``)."""
    try:
        from tflite_runtime import interpreter
    except ImportError:
        from ai_edge_litert import interpreter
    return interpreter


def tflite_reference(model_path, inputs):
    """TFLite's own interpreter, outputs in the model's order."""
    interpreter = tflite_interpreter().Interpreter(model_path=str(model_path))
    interpreter.allocate_tensors()
    for detail in interpreter.get_input_details():
        interpreter.set_tensor(detail["index"], inputs[detail["name"]])
    interpreter.invoke()
    return [interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()]


def onnxruntime_reference(model_path, inputs):
    import onnxruntime

    session = onnxruntime.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    return session.run(None, inputs)


def assert_close(got, expected, rel=1e-4, what=""):
    """max |got - expected| <= rel * max(1, max |expected|): float32 noise, scaled to the output."""
    got, expected = np.asarray(got, np.float64), np.asarray(expected, np.float64)
    assert got.shape == expected.shape, f"{what}: shape {got.shape} vs {expected.shape}"
    error, scale = float(np.max(np.abs(got - expected))), max(1.0, float(np.max(np.abs(expected))))
    assert error <= rel * scale, f"{what}: max error {error:.3g} > {rel} x {scale:.3g}"
    return error


def random_inputs(model_path, seed=0):
    """A deterministic standard-normal array for every input of an ONNX model."""
    import onnx  # pylint: disable=import-outside-toplevel
    from onnx import helper  # pylint: disable=import-outside-toplevel

    model = onnx.load(model_path)
    initialisers = {i.name for i in model.graph.initializer}
    rng = np.random.default_rng(seed)
    inputs = {}
    for value in model.graph.input:
        if value.name in initialisers:
            continue
        tensor = value.type.tensor_type
        shape = [d.dim_value for d in tensor.shape.dim]
        dtype = helper.tensor_dtype_to_np_dtype(tensor.elem_type)
        inputs[value.name] = rng.standard_normal(shape).astype(dtype)
    return inputs



def edited_mlf(mlf, out, edit):
    """A copy of the MLF with ``edit(name, text) -> text`` applied to its generated sources."""
    with tarfile.open(mlf) as source, tarfile.open(out, "w") as target:
        for member in source.getmembers():
            data = source.extractfile(member).read() if member.isfile() else None
            if data is not None and member.name.startswith("./codegen/host/src/"):
                data = edit(member.name, data.decode()).encode()
                member.size = len(data)
            target.addfile(member, io.BytesIO(data) if data is not None else None)
    return out


def run_program(program, inputs, work):
    """Run the built program directly, for its whole stderr."""
    args = [str(program.executable)]
    for i, tensor in enumerate(program.inputs):
        path = work / f"in{i}.bin"
        np.ascontiguousarray(inputs[tensor.name], dtype=tensor.dtype).tofile(path)
        args.append(str(path))
    args += [str(work / f"out{i}.bin") for i in range(len(program.outputs))]
    return subprocess.run(args, capture_output=True, text=True)


__all__ = ["run_tvmc", "assert_one_line_error", "mlf_sources", "kernel_calls", "onnx_reference", "tvm_cpu_reference",
           "tflite_reference", "onnxruntime_reference", "assert_close", "random_inputs", "example_model", "float_model", "qdq_model", "edited_mlf", "run_program",
           "fetch", "ModelFetchError"]


# TVM's own C as an embedded MLF, what an extension target gets by default, spelled out (both engines take it).
PLAIN_C = ["--target", "c", "--executor", "aot", "--executor-aot-interface-api", "c", "--executor-aot-unpacked-api",
           "1", "--runtime", "crt", "--pass-config", "tir.disable_vectorize=1"]


def assert_offloads_and_matches_plain_c(target, model, work: Path, *options, int8=False, rounds=2):
    """On the engine at hand (tvmc: TVM 0.16's, or this project's on apache-tvm): ``model`` compiled
    for ``target`` offloads some of it, and its MLF computes what TVM's own C computes, bit for bit
    for ``int8`` models, else within float rounding.  The report is returned."""
    done = run_tvmc("compile", "--target", target, model, *options, "-f", "mlf", "-o", work / "offloaded.tar")
    assert done.returncode == 0, done.stderr[-3000:]
    offloaded = re.search(rf"\[{target}\] offloaded: .* in (\d+) functions", done.stdout)
    assert offloaded and int(offloaded.group(1)) > 0, done.stdout
    plain = run_tvmc("compile", *PLAIN_C, model, *options, "-f", "mlf", "-o", work / "plain.tar")
    assert plain.returncode == 0, plain.stderr[-3000:]
    from tvm_extension.mlf import build  # pylint: disable=import-outside-toplevel

    ours, theirs = build(work / "offloaded.tar", work / "offloaded"), build(work / "plain.tar", work / "plain")
    rng = np.random.default_rng(6)
    for _ in range(rounds):
        inputs = {t.name: (rng.integers(-128, 128, t.shape) if int8 else rng.standard_normal(t.shape)).astype(t.dtype)
                  for t in ours.inputs}
        got, expected = ours.run(inputs)[0], theirs.run(inputs)[0]
        assert list(got) == list(expected)
        for name in got:
            if int8:
                np.testing.assert_array_equal(got[name], expected[name], err_msg=name)
            else:
                assert_close(got[name], expected[name], what=name)
    return done.stdout
