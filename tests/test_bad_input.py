"""Every kind of bad input a user can give, through plain ``tvmc compile`` and
``python -m tvm_extension.mlf run``: each ends in one line on stderr naming the file, extension
or attribute and the cause, a non-zero exit, and nothing at the output path.

What counts as "one line": the non-empty stderr lines other than TVM's own logging warnings
(``WARNING:...``) are exactly one, it starts with ``Error: `` and the cause, and no traceback
is printed anywhere.
"""
import subprocess
import sys
import textwrap
from pathlib import Path

import flatbuffers
import numpy as np
import onnx
import pytest
pytest.importorskip("tvm.relay", reason="the Relay engine's tests (hhb-tvm, Python 3.10): not installed here")
import tflite
from onnx import TensorProto, helper

from conftest import MODELS, VANILLA_EXT, assert_one_line_error, run_tvmc
from tvm_extension import api, uma

CNN = MODELS / "cnn.onnx"
EXT = ["--experimental-tvm-extension", str(VANILLA_EXT)]


def tiny_tflite() -> bytes:
    """A valid TFLite flatbuffer (one float tensor, the input and the output), written with the
    tflite package's builders: cut in half, it is a truncated TFLite file."""
    b = flatbuffers.Builder(0)
    name = b.CreateString("x")
    tflite.TensorStartShapeVector(b, 2)
    b.PrependInt32(4)
    b.PrependInt32(1)
    shape = b.EndVector()
    tflite.TensorStart(b)
    tflite.TensorAddShape(b, shape)
    tflite.TensorAddType(b, tflite.TensorType.FLOAT32)
    tflite.TensorAddName(b, name)
    tensor = tflite.TensorEnd(b)
    vectors = []
    for start, items in ((tflite.SubGraphStartTensorsVector, [tensor]), (tflite.SubGraphStartInputsVector, [0]),
                         (tflite.SubGraphStartOutputsVector, [0])):
        start(b, len(items))
        for item in items:
            (b.PrependUOffsetTRelative if item is tensor else b.PrependInt32)(item)
        vectors.append(b.EndVector())
    tflite.SubGraphStart(b)
    tflite.SubGraphAddTensors(b, vectors[0])
    tflite.SubGraphAddInputs(b, vectors[1])
    tflite.SubGraphAddOutputs(b, vectors[2])
    subgraph = tflite.SubGraphEnd(b)
    tflite.ModelStartSubgraphsVector(b, 1)
    b.PrependUOffsetTRelative(subgraph)
    subgraphs = b.EndVector()
    tflite.BufferStart(b)
    buffer = tflite.BufferEnd(b)
    tflite.ModelStartBuffersVector(b, 1)
    b.PrependUOffsetTRelative(buffer)
    buffers = b.EndVector()
    tflite.ModelStart(b)
    tflite.ModelAddVersion(b, 3)
    tflite.ModelAddSubgraphs(b, subgraphs)
    tflite.ModelAddBuffers(b, buffers)
    b.Finish(tflite.ModelEnd(b), b"TFL3")
    return bytes(b.Output())


def unsupported_onnx() -> onnx.ModelProto:
    """A valid ONNX model whose only operator (Det) TVM's ONNX frontend does not import."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    graph = helper.make_graph([helper.make_node("Det", ["x"], ["y"])], "det", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    return model


EXTENSION = """
from tvm_extension.api import TVMExtension
from uma_vanilla import VanillaAcceleratorBackend

class {cls}(TVMExtension):
    def uma_backends(self):
        return {returns}
"""

# Extension folders: {folder: {package: source of its __init__.py}}.
EXTENSIONS = {
    "returns_none": {"returns_none": EXTENSION.format(cls="NoneExtension", returns="None")},
    "returns_backend": {"returns_backend": EXTENSION.format(cls="BareExtension", returns="VanillaAcceleratorBackend()")},
    "returns_names": {"returns_names": EXTENSION.format(cls="NamesExtension", returns='["vanilla_accelerator"]')},
    "raises": {"raising": "import os\n\nraise RuntimeError('no device found')\n"},
    "twin_a": {"twin": EXTENSION.format(cls="TwinA", returns="[VanillaAcceleratorBackend()]")},
    "twin_b": {"twin": EXTENSION.format(cls="TwinB", returns="[VanillaAcceleratorBackend()]")},
}


def compile_case(model, *options, ext=EXT):
    return ["tvmc", "compile", "--target", "vanilla_accelerator", *options, *ext, model, "-f", "mlf", "-o", "{out}/o.tar"]


def with_extension(*folders):
    return compile_case(str(CNN), ext=[a for f in folders for a in ("--experimental-tvm-extension", f"{{d}}/{f}")])


def run_case(mlf, inputs, out="{out}/out.npz"):
    return ["mlf", "run", mlf, "-i", inputs, "-o", out]


# (id, argv, what the line starts with after "Error: ", fragments it also holds); {d}: the folder
# of the bad files, {out}: a fresh, existing output folder, {mlf}: a good MLF of cnn.onnx.
CASES = [
    ("onnx-truncated", compile_case("{d}/truncated.onnx"), "{d}/truncated.onnx is not a readable onnx model", []),
    ("onnx-garbage", compile_case("{d}/garbage.onnx"), "{d}/garbage.onnx is not a readable onnx model", []),
    ("onnx-empty", compile_case("{d}/empty.onnx"), "{d}/empty.onnx is empty", []),
    ("tflite-truncated", compile_case("{d}/truncated.tflite"), "{d}/truncated.tflite is not a readable tflite", []),
    ("tflite-garbage", compile_case("{d}/garbage.tflite"), "{d}/garbage.tflite: input file not tflite", []),
    ("onnx-unsupported-op", compile_case("{d}/det.onnx"), "{d}/det.onnx: TVM's onnx frontend cannot import it",
     ["not supported", "Det"]),
    ("uma_backends-None", with_extension("returns_none"), "extension tvm_extension.returns_none:NoneExtension",
     ["uma_backends() returned NoneType None, not a list of UMABackend instances"]),
    ("uma_backends-bare", with_extension("returns_backend"), "extension tvm_extension.returns_backend:BareExtension",
     ["returned VanillaAcceleratorBackend, not a list"]),
    ("uma_backends-names", with_extension("returns_names"), "extension tvm_extension.returns_names:NamesExtension",
     ["a list holding str 'vanilla_accelerator', not a UMABackend instance"]),
    ("extension-raises", with_extension("raises"), "extension tvm_extension.raising failed to import",
     ["{d}/raises/tvm_extension/raising/__init__.py:3", "RuntimeError: no device found"]),
    ("extension-module-twice", with_extension("twin_a", "twin_b"), "extension module tvm_extension.twin of '{d}/twin_b'",
     ["already imported from {d}/twin_a/tvm_extension/twin/__init__.py", "names must be unique"]),
    ("output-folder-missing", compile_case(str(CNN))[:-1] + ["{out}/missing/o.tar"],
     "output folder {out}/missing of -o {out}/missing/o.tar does not exist", []),
    ("output-is-a-folder", compile_case(str(CNN))[:-1] + ["{out}"], "output path {out} is a folder", []),
    ("mlf-run-wrong-shape", run_case("{mlf}", "{d}/wrong_shape.npy"), "input 'input' in {d}/wrong_shape.npy",
     ["has shape (1, 3, 15, 15), the model expects (1, 3, 16, 16) float32"]),
    ("mlf-run-garbage-inputs", run_case("{mlf}", "{d}/garbage.npz"), "cannot read inputs from {d}/garbage.npz", []),
    ("mlf-run-missing-input", run_case("{mlf}", "{d}/wrong_name.npz"), "missing input 'input' in {d}/wrong_name.npz",
     []),
    ("mlf-run-output-folder-missing", run_case("{mlf}", "{d}/input.npy", "{out}/missing/out.npz"),
     "output folder {out}/missing of -o {out}/missing/out.npz does not exist", []),
    ("mlf-run-not-an-mlf", run_case("{d}/not_mlf.tar", "{d}/input.npy"), "{d}/not_mlf.tar holds no metadata.json", []),
    ("mlf-run-garbage-archive", run_case("{d}/garbage.onnx", "{d}/input.npy"), "cannot read MLF archive {d}/garbage.onnx",
     []),
]


def _example_attribute_ranges():
    """(target, attribute, value) just outside both ends of every range an example backend
    declares (``target_attr_ranges``), or a value outside a list of allowed strings."""
    before = set(sys.modules)
    try:
        found = api.discover([str(VANILLA_EXT)], environ={}, python_path=False, entry_points=False)
        backends = [b for e in found for b in e.backends()]
    finally:  # the example modules are imported afresh by the tests that need them
        for name in set(sys.modules) - before:
            if name.startswith("tvm_extension.") and name.split(".")[1] not in api.RESERVED_NAMES:
                del sys.modules[name]
    for backend in backends:
        for attr, allowed in uma.attr_ranges(backend).items():
            if all(isinstance(a, str) for a in allowed):
                yield backend.target_name, attr, "not-one-of-them"
            else:
                yield backend.target_name, attr, allowed[0] - 1
                yield backend.target_name, attr, allowed[1] + 1


_RANGE_CASES = list(_example_attribute_ranges())
assert ("vanilla_accelerator", "max_kernel_size", 9) in _RANGE_CASES, _RANGE_CASES  # the ranges were read
for _target, _attr, _value in _RANGE_CASES:
    CASES.append((
        f"{_target}-{_attr}={_value}",
        ["tvmc", "compile", "--target", _target, f"--target-{_target}-{_attr}", str(_value), *EXT, str(CNN),
         "-f", "mlf", "-o", "{out}/o.tar"],
        f"target '{_target}'", [f"'{_attr}'", str(_value)],
    ))


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("bad_input")
    good_onnx = CNN.read_bytes()
    (d / "truncated.onnx").write_bytes(good_onnx[: len(good_onnx) // 2])
    (d / "garbage.onnx").write_text("this is not a model\n")
    (d / "empty.onnx").write_bytes(b"")
    good_tflite = tiny_tflite()
    (d / "truncated.tflite").write_bytes(good_tflite[: len(good_tflite) // 2])
    (d / "garbage.tflite").write_text("this is not a model either\n")
    onnx.save(unsupported_onnx(), d / "det.onnx")
    for folder, packages in EXTENSIONS.items():
        for package, source in packages.items():
            (d / folder / "tvm_extension" / package).mkdir(parents=True)
            (d / folder / "tvm_extension" / package / "__init__.py").write_text(textwrap.dedent(source))
    np.save(d / "input.npy", np.zeros((1, 3, 16, 16), np.float32))
    np.save(d / "wrong_shape.npy", np.zeros((1, 3, 15, 15), np.float32))
    np.savez(d / "wrong_name.npz", data=np.zeros((1, 3, 16, 16), np.float32))
    (d / "garbage.npz").write_text("not numpy\n")
    subprocess.run(["tar", "cf", str(d / "not_mlf.tar"), "-C", str(d), "input.npy"], check=True)
    mlf = d / "cnn.tar"
    done = run_tvmc("compile", "--target", "vanilla_accelerator", *EXT, CNN, "-f", "mlf", "-o", mlf)
    assert done.returncode == 0, done.stderr
    return d


def _fill(text, **places):
    for key, value in places.items():
        text = text.replace("{" + key + "}", str(value))
    return text


@pytest.mark.parametrize("argv, lead, fragments", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_ends_in_one_line(bad_files, tmp_path, argv, lead, fragments):
    out = tmp_path / "out"
    out.mkdir()
    places = {"d": bad_files, "out": out, "mlf": bad_files / "cnn.tar"}
    argv = [_fill(a, **places) for a in argv]
    if argv[0] == "tvmc":
        done = run_tvmc(*argv[1:])
    else:
        done = subprocess.run([sys.executable, "-m", "tvm_extension.mlf", *argv[1:]], capture_output=True, text=True)
    line = assert_one_line_error(done, *(_fill(f, **places) for f in fragments))
    assert line.startswith("Error: " + _fill(lead, **places)), line
    assert list(out.iterdir()) == [], "something was left at the output path"
    assert "offloaded" not in done.stdout, "the compile started before the error was found"


# tvmc on the Relax engine (apache-tvm): what it refuses, each in one line, nothing written.
RELAX_REFUSALS = [
    ("tune", ["tune", "--target", "vanilla_accelerator", str(CNN)], "tvmc tune: nothing to tune on the Relax engine"),
    ("tuning records", ["compile", "--tuning-records", "x.log"], "--tuning-records: nothing is tuned"),
    ("relay pass config", ["compile", "--pass-config", "relay.backend.use_auto_scheduler=0"],
     "--pass-config relay.backend.use_auto_scheduler (a Relay engine option)"),
    ("graph executor in an MLF", ["compile", "-f", "mlf", "--executor", "graph"],
     "--executor graph: the Relax engine's MLF is AOT C"),
    ("packed API", ["compile", "-f", "mlf", "--executor-aot-unpacked-api", "0"], "--executor-aot-unpacked-api 0"),
    ("aot without an MLF", ["compile", "--runtime", "crt"], "--runtime crt: -f so builds a library for the Relax VM"),
    ("relay dump", ["compile", "-f", "mlf", "--dump-code", "relay"], "--dump-code relay: the Relax engine writes"),
    ("two accelerators", ["compile", "--target", "vanilla_accelerator, qvanilla, c", "-f", "mlf"],
     "--target 'vanilla_accelerator, qvanilla, c': one accelerator target at a time"),
    ("llvm host of an MLF", ["compile", "--target", "vanilla_accelerator, llvm", "-f", "mlf"],
     "--target 'vanilla_accelerator, llvm': an MLF holds C for any CPU"),
    ("unknown host attribute", ["compile", "-f", "mlf", "--target-c-no_such", "1"], "target c has no attribute 'no_such'"),
    ("module name of a library", ["compile", "--module-name", "net"], "--module-name net: names the C functions of an MLF"),
    ("keras model format", ["compile", "--model-format", "keras"], "argument --model-format: invalid choice: 'keras'"),
    ("device", ["run", "--device", "cuda", str(CNN)], "--device cuda: the Relax engine's tvmc runs on this CPU"),
]


@pytest.mark.parametrize("argv, message", [c[1:] for c in RELAX_REFUSALS], ids=[c[0] for c in RELAX_REFUSALS])
def test_relax_engine_tvmc_refusals_are_one_line(tmp_path, argv, message):
    from test_relax_engine import relax_engine  # pylint: disable=import-outside-toplevel

    if argv[0] == "compile":
        target = [] if "--target" in argv else ["--target", "vanilla_accelerator"]
        argv = [*argv, *target, str(CNN), "-o", str(tmp_path / "out.bin")]
    done = relax_engine(*argv, cwd=tmp_path)
    assert done.returncode != 0 and done.stderr.startswith("error: " + message), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr, done.stderr
    assert list(tmp_path.iterdir()) == [], "something was written"
