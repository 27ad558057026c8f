"""QVanilla on the Relax engine (apache-tvm 0.27): the real int8 TFLite networks, whose convs TVM's
Relax frontend imports as ``dequantize -> conv2d -> add -> quantize -> clip``, become calls of
QVanilla's packed entries (uma_qvanilla/relax_patterns.py): under --tflite-exact in TFLite's
rounding, each call TFLite's reference kernel (BUILTIN_REF) bit for bit, every tensor kept;
without it in TVM's, the whole network the Relay engine's MLF bit for bit (the CPU's layers in
TVM's QNN integer arithmetic, as the Relay engine lowers them).  The engine runs in .venv-relax
(tests/test_relax_engine.py); TFLite and the Relay engine run here.
"""
import re
import subprocess

import numpy as np
import pytest

from conftest import ROOT, run_tvmc
from test_relax_engine import RELAX_PYTHON, assert_mlf_refuses, patterns_matched, relax_engine, report_line
from tvm_extension.mlf import build
from tvm_extension.testing import fetch, tflite_interpreter

# the DS-CNN fixture: compiled once (pytest-xdist runs the module in one worker)
pytestmark = pytest.mark.xdist_group("relax_int8")

QVANILLA_EXT = ROOT / "uma_qvanilla"
KERNELS = ("qvanilla_conv2d_nhwc_packed_s8_linked", "qvanilla_depthwise_conv2d_nhwc_packed_s8_linked",
           "qvanilla_conv2d_nhwc_packed8_s8_linked")
CONVS = ("CONV_2D", "DEPTHWISE_CONV_2D")

# Runs a library with the Relax VM, keeping the output of every call (its last argument, the
# destination): {"output_0": ..., "<n>_<PrimFunc>": ...} in the order the VM made the calls.
RUN_KEEPING_CALLS = """
import sys
import numpy as np
import tvm
from tvm import relax
vm = relax.VirtualMachine(tvm.runtime.load_module(sys.argv[1]), tvm.cpu())
kept = {}
def keep(func, symbol, before, ret, *args):
    if not before and args and not str(symbol).startswith("vm.builtin"):
        kept[f"{len(kept)}_{symbol}"] = args[-1].numpy()
    return 0
vm.set_instrument(keep)
with np.load(sys.argv[2]) as inputs:
    names = [vm._get_function_param_name("main", i) for i in range(vm._get_function_arity("main"))]
    kept["output_0"] = vm["main"](*[tvm.runtime.tensor(inputs[n]) for n in names]).numpy()
np.savez(sys.argv[3], **kept)
"""

def compile_relax(model, output, cwd, *options):
    done = relax_engine("compile", str(model), "--target", "qvanilla", *options, "--experimental-tvm-extension",
                        str(QVANILLA_EXT), "-o", str(output), cwd=cwd)
    assert done.returncode == 0, done.stderr
    return done.stdout


def run_keeping_calls(library, inputs, work):
    np.savez(work / "in.npz", **inputs)
    done = subprocess.run([str(RELAX_PYTHON), "-c", RUN_KEEPING_CALLS, str(library), "in.npz", "calls.npz"], cwd=work,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    with np.load(work / "calls.npz") as kept:
        calls = [(name.split("_", 1)[1], kept[name]) for name in sorted(kept, key=lambda n: int(n.split("_")[0])
                                                                       if n[0].isdigit() else -1) if name[0].isdigit()]
        return kept["output_0"], calls


def reference_kernels(model, inputs):
    """TFLite's reference kernels, every tensor kept: (outputs, [(operator, its output), ...] in
    the order TFLite runs them, the indices of the tensors an ADD reads)."""
    tflite = tflite_interpreter()
    Interpreter, OpResolverType = tflite.Interpreter, tflite.OpResolverType

    interpreter = Interpreter(model_path=str(model), experimental_op_resolver_type=OpResolverType.BUILTIN_REF,
                              experimental_preserve_all_tensors=True)
    interpreter.allocate_tensors()
    for detail in interpreter.get_input_details():
        interpreter.set_tensor(detail["index"], inputs[detail["name"]])
    interpreter.invoke()
    ops = interpreter._get_ops_details()
    results = [(op["op_name"], op["outputs"][0], interpreter.get_tensor(op["outputs"][0])) for op in ops]
    added = {i for op in ops if op["op_name"] == "ADD" for i in op["inputs"]}
    outputs = [interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()]
    return outputs, [(name, tensor, value) for name, tensor, value in results], added


def model_inputs(model, rng, float_range):
    Interpreter = tflite_interpreter().Interpreter

    interpreter = Interpreter(model_path=str(model))
    return {d["name"]: (rng.uniform(*float_range, d["shape"]) if d["dtype"] == np.float32
                        else rng.integers(-128, 128, d["shape"])).astype(d["dtype"])
            for d in interpreter.get_input_details()}


def relay_engine(model, work):
    """The Relay engine's MLF of ``model`` for QVanilla (tvmc), built for this host (test_tflite_exact's
    compile too: the run's build cache has it once)."""
    done = run_tvmc("compile", "--target", "qvanilla", model, "-f", "mlf", "-o", work / "relay.tar", reuse=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return build(work / "relay.tar", work / "relay")


def kernel_call_sites(library):
    code = subprocess.run(["objdump", "-d", str(library)], capture_output=True, text=True, check=True).stdout
    return {k: len(re.findall(rf"call\s+\S+\s+<{k}(?:@plt)?>", code)) for k in KERNELS}


@pytest.fixture(scope="module")
def dscnn(tmp_path_factory):
    work = tmp_path_factory.mktemp("relax-int8")
    model = fetch("kws_dscnn_int8")
    return model, work / "dscnn.so", compile_relax(model, work / "dscnn.so", work, "--tflite-exact")


@pytest.mark.real_model
def test_every_conv_is_a_call_of_qvanillas_packed_entries(dscnn):
    _, library, report = dscnn
    assert patterns_matched(report, "qvanilla") == {"conv2d_int8_bias_clip": 9}, report
    assert "conv2d" not in report_line(report, "on the CPU", "qvanilla"), report
    # The first conv, the four depthwise and the four pointwise ones: three PrimFuncs (equal calls are shared).
    sites = kernel_call_sites(library)
    assert sites[KERNELS[0]] >= 1 and sites[KERNELS[1]] >= 1 and sites[KERNELS[2]] == 0, sites


def conv_outputs(calls):
    return [value for name, value in calls if name.startswith("conv2d_int8")]


@pytest.mark.real_model
def test_offloaded_convs_are_tflites_reference_kernels_bit_for_bit(dscnn, tmp_path):
    """Under --tflite-exact each of the 9 calls gives what TFLite's reference CONV_2D /
    DEPTHWISE_CONV_2D gives (its two roundings); without the flag (TVM's rounding) they do not."""
    model, library, _ = dscnn
    plain = tmp_path / "plain.so"
    compile_relax(model, plain, tmp_path)
    rng, differs = np.random.default_rng(24), 0
    for _ in range(3):
        inputs = model_inputs(model, rng, (-40, 80))  # the input scale, 0.88, covers about [0, 225]
        _, ops, _ = reference_kernels(model, inputs)
        expected = [value for name, _, value in ops if name in CONVS]
        _, calls = run_keeping_calls(library, inputs, tmp_path)
        got = conv_outputs(calls)
        assert len(got) == len(expected) == 9
        for i, (g, e) in enumerate(zip(got, expected)):
            assert g.dtype == e.dtype and np.array_equal(g, e), f"conv {i}: {np.count_nonzero(g != e)} values differ"
        _, calls = run_keeping_calls(plain, inputs, tmp_path)
        differs += sum(not np.array_equal(g, e) for g, e in zip(conv_outputs(calls), expected))
    assert differs > 0, "TVM's rounding gave TFLite's results too: the test shows nothing"


@pytest.mark.real_model
def test_int8_weights_call_the_packed8_entry_with_the_same_results(dscnn, tmp_path):
    """--target-qvanilla-int8_weights=1 (for Helium): the dense convs call the packed8 entry (int8
    weights), the depthwise ones the packed entry, and every call still gives TFLite's reference
    kernels' output."""
    model, _, _ = dscnn
    library = tmp_path / "int8.so"
    compile_relax(model, library, tmp_path, "--tflite-exact", "--target-qvanilla-int8_weights=1")
    sites = kernel_call_sites(library)
    assert sites[KERNELS[2]] >= 1 and sites[KERNELS[1]] >= 1 and sites[KERNELS[0]] == 0, sites
    inputs = model_inputs(model, np.random.default_rng(25), (-40, 80))
    _, ops, _ = reference_kernels(model, inputs)
    expected = [value for name, _, value in ops if name in CONVS]
    got = conv_outputs(run_keeping_calls(library, inputs, tmp_path)[1])
    assert len(got) == len(expected) == 9
    assert all(np.array_equal(g, e) for g, e in zip(got, expected))


@pytest.mark.real_model
@pytest.mark.relay  # compares with the Relay engine
@pytest.mark.parametrize("name, patterns", [
    ("kws_dscnn_int8", {"conv2d_int8_bias_clip": 9}),
    # 24 of its convs end in a residual ADD, left on the CPU: TVM's qnn.add on both engines
    ("kws_on_off_int8", {"conv2d_int8_bias": 25, "conv2d_int8_bias_clip": 54})])
def test_without_the_flag_the_network_is_the_relay_engines(tmp_path, name, patterns):
    """Without --tflite-exact, every conv offloaded and the output the Relay engine's MLF (tvmc
    compile --target qvanilla) bit for bit: TVM's rounding in the calls, the CPU's layers (the
    residual ADDs, FULLY_CONNECTED) in TVM's QNN integer arithmetic.  TFLite's reference kernels
    compute another output on some input (what --tflite-exact is for)."""
    model = fetch(name)
    library = tmp_path / "plain.so"
    report = compile_relax(model, library, tmp_path)
    assert patterns_matched(report, "qvanilla") == patterns, report
    assert "conv2d" not in report_line(report, "on the CPU", "qvanilla"), report
    relay = relay_engine(model, tmp_path)
    rng, from_tflite = np.random.default_rng(3), 0
    for _ in range(3):
        inputs = model_inputs(model, rng, (-40, 80))
        output, _ = run_keeping_calls(library, inputs, tmp_path)
        (expected,) = relay.run(inputs)[0].values()
        assert output.dtype == expected.dtype and np.array_equal(output, expected), \
            f"{np.count_nonzero(output != expected)} of {output.size} values differ from the Relay engine's"
        (reference,), _, _ = reference_kernels(model, inputs)
        from_tflite += not np.array_equal(output, reference)
    assert from_tflite > 0, "TVM's arithmetic gave TFLite's outputs on every input: the test shows nothing"


# Compiles a QDQ conv with QVanilla given 1 byte of scratch (a broken backend): the kernel refuses.
COMPILE_WITHOUT_SCRATCH = """
import sys
from tvm import tirx
from tvm_extension.relax import backends, compile_model
from tvm_extension.testing.models import qdq_model
qvanilla = backends.find("qvanilla")
kernel_call = qvanilla.kernel_call
def without_scratch(match, attrs):
    status, scratch = kernel_call(match, attrs)
    name, *args = status.args  # call_extern's: the C name, then the entry's (..., scratch, its size, ...)
    return tirx.call_extern("int32", name.value, *args[:5], tirx.IntImm("int32", 1), *args[6:]), scratch
qvanilla.kernel_call = without_scratch
qdq_model("qdq.onnx", per_channel=True, relu=True)
compile_model("qdq.onnx", "qvanilla", "m.tar", [sys.argv[1]], output_format="mlf")
"""


def test_a_refused_call_returns_the_kernels_status_from_the_mlf(tmp_path):
    """tvmgen_default_run returns the kernel's own status (QVANILLA_ESCRATCH), as on the Relay engine."""
    done = subprocess.run([str(RELAX_PYTHON), "-c", COMPILE_WITHOUT_SCRATCH, str(QVANILLA_EXT)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    inputs = {"x": np.ones((1, 4, 10, 10), np.int8)}
    assert_mlf_refuses(tmp_path / "m.tar", inputs, "inference failed with status 10 ")
