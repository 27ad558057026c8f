"""What examples/benchmark.py compares against: framework runtimes, and a model's multiply-accumulates.

Every runner times one thread on one fixed input: ``seconds_per_run(repeat)`` runs the model
``repeat`` times back to back (no I/O inside the loop) and returns the mean time of one run.

* TFLite's interpreter, its current runtime (ai-edge-litert), ``num_threads=1``, with its default
  delegate (XNNPACK) or with builtin kernels only (``BUILTIN_WITHOUT_DEFAULT_DELEGATES``); its
  reference kernels (``BUILTIN_REF``) from the interpreter the tests take them from;
* ONNX Runtime, ``CPUExecutionProvider``, one intra-op and one inter-op thread, sequential.
"""
import contextlib
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Mapping

import numpy as np


class ReferenceError(Exception):
    """A reference runtime is missing or fails on the model (one line for the user)."""


class Runner:
    """One way of running a model: its outputs (in the model's order) and a timer."""

    def __init__(self, outputs: List[np.ndarray], seconds_per_run: Callable[[int], float], note: str = ""):
        self.outputs = outputs
        self.seconds_per_run = seconds_per_run
        self.note = note  # printed beside the figures, e.g. that a delegate took nothing


@contextlib.contextmanager
def _without_delegate_banner():
    """TFLite's C++ side prints "INFO: Created TensorFlow Lite XNNPACK delegate for CPU." on fd 2; keep other lines."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            for line in sink.read().decode(errors="replace").splitlines():
                if not line.startswith("INFO: Created TensorFlow Lite XNNPACK delegate"):
                    print(line, file=sys.stderr)


def _loop(step: Callable[[], object]) -> Callable[[int], float]:
    def seconds_per_run(repeat: int) -> float:
        start = time.perf_counter()
        for _ in range(repeat):
            step()
        return (time.perf_counter() - start) / repeat
    return seconds_per_run


def _missing(package: str, pip_name: str) -> ReferenceError:
    return ReferenceError(f"the reference runtime {package} is not installed (pip install {pip_name})")


def _interpreter(reference_kernels: bool):
    """TFLite's interpreter module: its current runtime, ai-edge-litert, for timing; for the reference
    kernels the one the tests take (``tvm_extension.testing.tflite_interpreter``)."""
    try:
        if reference_kernels:
            from tvm_extension.testing import tflite_interpreter  # pylint: disable=import-outside-toplevel
            return tflite_interpreter()
        from ai_edge_litert import interpreter  # pylint: disable=import-outside-toplevel
        return interpreter
    except ImportError:
        raise _missing("ai_edge_litert", "ai-edge-litert") from None


def tflite(model: Path, inputs: Mapping[str, np.ndarray], xnnpack: bool, reference_kernels: bool = False) -> Runner:
    runtime = _interpreter(reference_kernels)
    Interpreter, OpResolverType = runtime.Interpreter, runtime.OpResolverType
    resolver = (OpResolverType.AUTO if xnnpack else OpResolverType.BUILTIN_REF if reference_kernels
                else OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    try:
        with _without_delegate_banner():
            interpreter = Interpreter(model_path=str(model), num_threads=1, experimental_op_resolver_type=resolver)
            interpreter.allocate_tensors()
            for detail in interpreter.get_input_details():
                interpreter.set_tensor(detail["index"], np.asarray(inputs[detail["name"]], dtype=detail["dtype"]))
            interpreter.invoke()
    except (ValueError, RuntimeError, KeyError) as exc:
        raise ReferenceError(f"TFLite cannot run {model.name}: {str(exc).strip().splitlines()[-1]}") from None
    outputs = [interpreter.get_tensor(d["index"]).copy() for d in interpreter.get_output_details()]
    note = ""
    if xnnpack:
        try:  # a private API: the graph's nodes, a delegated part shows as a node named DELEGATE
            if not any(op["op_name"] == "DELEGATE" for op in interpreter._get_ops_details()):
                note = "XNNPACK took no node: builtin kernels ran"
        except Exception:
            pass
    return Runner(outputs, _loop(interpreter.invoke), note)


def tflite_reference_kernels(model: Path, inputs: Mapping[str, np.ndarray]) -> List[np.ndarray]:
    """The outputs of TFLite's reference kernels (``BUILTIN_REF``): what ``--tflite-exact`` computes."""
    return tflite(model, inputs, xnnpack=False, reference_kernels=True).outputs


def onnxruntime(model: Path, inputs: Mapping[str, np.ndarray]) -> Runner:
    try:
        import onnxruntime as ort
    except ImportError:
        raise _missing("onnxruntime", "onnxruntime") from None
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    try:
        session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
        feeds = {i.name: np.ascontiguousarray(inputs[i.name]) for i in session.get_inputs()}
        outputs = session.run(None, feeds)
    except Exception as exc:  # onnxruntime raises its own exception classes
        raise ReferenceError(f"ONNX Runtime cannot run {model.name}: {str(exc).strip().splitlines()[-1]}") from None
    return Runner(outputs, _loop(lambda: session.run(None, feeds)))


def references(model: Path, inputs: Mapping[str, np.ndarray]) -> Dict[str, Runner]:
    """The runtimes a user would pick for this model file, by column label."""
    if model.suffix == ".tflite":
        return {"LiteRT XNNPACK": tflite(model, inputs, True), "LiteRT builtin": tflite(model, inputs, False)}
    if model.suffix == ".onnx":
        return {"ONNX Runtime": onnxruntime(model, inputs)}
    raise ReferenceError(f"no reference runtime for {model.name}")


def reference_labels(model: Path) -> List[str]:
    return {".tflite": ["LiteRT XNNPACK", "LiteRT builtin"], ".onnx": ["ONNX Runtime"]}.get(model.suffix, [])


def require(model: Path) -> None:
    """Fail early, in one line, when a reference runtime this model needs is not installed."""
    for module, pip_name in {".tflite": [("ai_edge_litert.interpreter", "ai-edge-litert")],
                             ".onnx": [("onnxruntime", "onnxruntime")]}.get(model.suffix, []):
        try:
            __import__(module)
        except ImportError:
            raise _missing(module.split(".")[0], pip_name) from None


def versions() -> str:
    found = []
    for module, label in (("ai_edge_litert", "ai-edge-litert"), ("onnxruntime", "onnxruntime")):
        try:
            found.append(f"{label} {__import__(module).__version__}")
        except ImportError:
            found.append(f"{label} missing")
    return ", ".join(found)


CONVOLUTIONS = ("nn.conv2d", "qnn.conv2d")
MATRIX_PRODUCTS = ("nn.dense", "qnn.dense", "nn.matmul", "nn.batch_matmul")


def count_macs(model: Path, shapes: Mapping[str, tuple]) -> int:
    """Multiply-accumulates of the model's conv2d (dense, depthwise, grouped) and dense/matmul calls.

    Counted on the Relay module as tvmc loads it, with checked types: a conv contributes
    output elements x (input channels / groups) x kernel height x kernel width; a matrix
    product output elements x reduction length.
    """
    import tvm
    from tvm import relay
    from tvm.driver import tvmc

    try:
        mod = relay.transform.InferType()(tvmc.load(str(model), shape_dict=dict(shapes)).mod)
    except Exception as exc:  # a frontend's errors have many classes
        raise ReferenceError(f"TVM cannot load {model.name} to count its MACs: {str(exc).strip().splitlines()[-1]}") from None
    total = 0

    def dims(expr) -> List[int]:
        return [int(x) for x in expr.checked_type.shape]

    def visit(expr):
        nonlocal total
        if not (isinstance(expr, relay.Call) and isinstance(expr.op, tvm.ir.Op)):
            return
        if expr.op.name in CONVOLUTIONS:
            attrs, weight = expr.attrs, dims(expr.args[1])
            channels = dims(expr.args[0])[attrs.data_layout.index("C")] // int(attrs.groups)
            window = weight[attrs.kernel_layout.index("H")] * weight[attrs.kernel_layout.index("W")]
            total += int(np.prod(dims(expr))) * channels * window
        elif expr.op.name in MATRIX_PRODUCTS:
            left = dims(expr.args[0])
            reduction = left[-2] if getattr(expr.attrs, "transpose_a", False) else left[-1]
            total += int(np.prod(dims(expr))) * reduction

    relay.analysis.post_order_visit(mod["main"], visit)
    return total
