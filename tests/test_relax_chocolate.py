"""Chocolate on the Relax engine (apache-tvm 0.27): the same planner and the same program of DMA
transfers and core calls as on the Relay engine (uma_chocolate/relax_patterns.py, program.py), so
the same network at the same core shape gives the Relay engine's MLF outputs bit for bit and the
same hardware counters (DMA bytes and calls, core calls, MACs, cycles, scratchpad peak).

The Relay engine's program comes from ``tir.Schedule`` (schedule.py), the Relax engine's is built
directly from the plan (program.py): the first test runs both, for every plan of two ragged layers
(every loop order and source of A tiles), and compares the C calls they make, arguments and
scratchpad addresses included."""
import json
import os
import subprocess

import numpy as np
import pytest

from conftest import ROOT, run_tvmc
from test_relax_engine import RELAX_PYTHON, TVMC, assert_mlf_refuses, call_sites, patterns_matched, relax_engine, report_line
from tvm_extension.mlf import build
from tvm_extension.testing.model_zoo import fetch

CHOCOLATE_EXT = ROOT / "uma_chocolate"

# The C calls a lowered body makes, in order, loops run, every status 0, pointers as "ptr": the
# same code for tvm.tir (Relay engine) and apache-tvm's tvm.tirx nodes.
TRACE = '''
def trace(stmt):
    calls, env = [], {}
    binary = {"Add": lambda a, b: a + b, "Sub": lambda a, b: a - b, "Mul": lambda a, b: a * b,
              "FloorDiv": lambda a, b: a // b, "FloorMod": lambda a, b: a % b, "Min": min, "Max": max,
              "EQ": lambda a, b: a == b, "NE": lambda a, b: a != b, "LT": lambda a, b: a < b}

    def value(e):
        kind = type(e).__name__
        if kind in ("IntImm", "FloatImm"):
            return e.value
        if kind == "Var":
            return env.get(e, "ptr")
        if kind in binary:
            return binary[kind](value(e.a), value(e.b))
        if kind == "Call" and e.op.name.endswith("call_extern"):
            name = e.args[0].value
            for suffix in ("_linked", "_call"):
                name = name[:-len(suffix)] if name.endswith(suffix) else name
            calls.append((name, [value(a) for a in e.args[1:]]))
            return 0
        raise TypeError(f"{kind}: {e}")

    def run(s):
        kind = type(s).__name__
        if kind == "SeqStmt":
            for x in s.seq:
                run(x)
        elif kind == "For":
            for i in range(value(s.min), value(s.min) + value(s.extent)):
                env[s.loop_var] = i
                run(s.body)
        elif kind in ("LetStmt", "Bind"):
            env[s.var] = value(s.value)
            if kind == "LetStmt":
                run(s.body)
        elif kind == "IfThenElse":
            if value(s.condition):
                run(s.then_case)
            elif s.else_case is not None:
                run(s.else_case)
        elif kind == "Evaluate":
            value(s.value)
        else:
            raise TypeError(kind)
    run(stmt)
    return calls
'''

RELAX_TRACES = TRACE + '''
import json, sys
from tvm import tirx
from uma_chocolate import program
from uma_chocolate.schedule import ConvLayer, Core, plans
layer, core = ConvLayer(**json.loads(sys.argv[1])), Core(*json.loads(sys.argv[2]))
host = {role: tirx.Var(role, "handle") for role in ("input", "weights", "table", "output")}
extern = lambda name, *args: tirx.Evaluate(tirx.call_extern("int32", name, *args))
print(json.dumps([trace(program.build(layer, core, plan, host, extern)) for plan in plans(layer, core, layer.dtype)]))
'''

# 5x5x3 input, 3x3 window, 6 channels (int8, 4x4x4 tiles: ragged on every axis); a strided float
# layer on 2x3x4 tiles.  A scratchpad where every plan fits.
LAYERS = [
    (dict(ih=5, iw=5, ic=3, oh=5, ow=5, oc=6, kh=3, kw=3, stride_h=1, stride_w=1, pad_top=1, pad_left=1, input_zp=-3,
          output_zp=2), (4, 4, 4, 4096, 8, 32)),
    (dict(ih=9, iw=7, ic=5, oh=4, ow=3, oc=19, kh=3, kw=3, stride_h=2, stride_w=2, pad_top=0, pad_left=1,
          dtype="float32", lo=0.0), (2, 3, 4, 8192, 8, 32)),
]


def relay_traces(layer, core):
    import tvm
    from tvm import tir

    from uma_chocolate.schedule import ConvLayer, Core, gemm_compute, plans, register_intrinsics, schedule

    namespace = {}
    exec(TRACE, namespace)  # pylint: disable=exec-used
    layer, core = ConvLayer(**layer), Core(*core)
    rows, channels, depth = layer.gemm
    shapes = {"input": (1, layer.ih, layer.iw, layer.ic), "weights": (depth, channels),
              "table": (3 if layer.dtype == "int8" else 1, channels)}
    traces = []
    for plan in plans(layer, core, layer.dtype):
        func = schedule(layer, core, plan, gemm_compute(layer, core, shapes), register_intrinsics(core, plan))
        passes = {"tir.add_lower_pass": [(3, tir.transform.LowerDeviceStorageAccessInfo())]}
        with tvm.transform.PassContext(config=passes):
            body = tvm.lower(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}))["main"].body
        traces.append((plan.order, plan.patch, namespace["trace"](body)))
    return traces


@pytest.mark.parametrize("layer, core", [pytest.param(*LAYERS[0], id="int8", marks=pytest.mark.quick),
                                         pytest.param(*LAYERS[1], id="float")])
@pytest.mark.relay
def test_the_same_calls_as_the_relay_engines_schedule(tmp_path, layer, core):
    """Every plan (stream, rows, columns, weights, blocks, blocks_stream; im2col DMA, whole input
    or bands): the same C calls in the same order with the same arguments."""
    relay = relay_traces(layer, core)
    environment = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run([str(RELAX_PYTHON), "-c", RELAX_TRACES, json.dumps(layer), json.dumps(core)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300, env=environment)
    assert done.returncode == 0, done.stderr
    relax = json.loads(done.stdout)
    orders = {(order, patch) for order, patch, _ in relay}
    assert {"blocks", "blocks_stream", "columns", "weights"} <= {order for order, _ in orders}, orders
    assert len(relax) == len(relay) > 12
    for (order, patch, want), got in zip(relay, relax):
        assert [[name, list(args)] for name, args in want] == got, (order, patch)


def counters(path):
    return dict(line.split(": ") for line in path.read_text().splitlines())


def relax_run(library, inputs, work):
    """Outputs and the hardware model's counters of one run with the Relax VM."""
    np.savez(work / "in.npz", **inputs)
    report = work / "relax_counters.txt"
    report.unlink(missing_ok=True)
    environment = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run([str(TVMC), "run", str(library), "-i", "in.npz", "-o", "out.npz"], cwd=work,
                          capture_output=True, text=True, timeout=600,
                          env={**environment, "CHOCOLATE_REPORT": str(report)})
    assert done.returncode == 0, done.stderr
    with np.load(work / "out.npz") as out:
        return [out[f"output_{i}"] for i in range(len(out.files))], counters(report)


def compile_both(model, work, tile, shapes=None):
    """The model compiled by the Relax engine (library) and by the Relay engine (MLF, built here)."""
    attrs = [f"--target-chocolate-tile_{d}={t}" for d, t in zip("mnk", tile)]
    shape_option = ["--input-shapes", shapes] if shapes else []
    done = relax_engine("compile", str(model), "--target", "chocolate", "--experimental-tvm-extension",
                        str(CHOCOLATE_EXT), *shape_option, *attrs, "-o", "m.so", cwd=work)
    assert done.returncode == 0, done.stderr
    relay = run_tvmc("compile", "--target", "chocolate,c", "--experimental-tvm-extension", CHOCOLATE_EXT, *attrs,
                     *shape_option, model, "-f", "mlf", "-o", work / "m.tar", "-v")
    assert relay.returncode == 0, relay.stderr[-2000:]
    return work / "m.so", build(work / "m.tar", work / "mlf"), done.stdout, relay.stdout + relay.stderr


def assert_same_as_relay(library, mlf, inputs, work, monkeypatch):
    outputs, relax_counters = relax_run(library, inputs, work)
    monkeypatch.setenv("CHOCOLATE_REPORT", str(work / "relay_counters.txt"))
    (work / "relay_counters.txt").unlink(missing_ok=True)
    expected = list(mlf.run(inputs)[0].values())
    assert len(outputs) == len(expected)
    for got, want in zip(outputs, expected):
        assert np.array_equal(got.reshape(want.shape), want)
    relay_counters = counters(work / "relay_counters.txt")
    assert relax_counters == relay_counters and int(relax_counters["chocolate.core_calls"]) > 0
    return relax_counters


@pytest.mark.real_model
@pytest.mark.relay  # compares with the Relay engine
def test_int8_dscnn_as_on_the_relay_engine(tmp_path, monkeypatch):
    """DS-CNN keyword spotting (int8 TFLite) at 8x8x8: its five dense conv chains on the core (the
    table of bias, multiplier and shift computed from the chain's scales as the Relay engine does,
    TVM's rounding), the four depthwise ones on the CPU; on three inputs the network's outputs
    equal the Relay engine's MLF's bit for bit, and every counter."""
    library, mlf, report, _ = compile_both(fetch("kws_dscnn_int8"), tmp_path, (8, 8, 8))
    assert patterns_matched(report, "chocolate") == {"conv2d_int8_bias_clip": 5}, report
    assert report_line(report, "not offloaded", "chocolate") == \
        "nn.conv2d: depthwise (not a matrix product; stays on the CPU) x4", report
    assert call_sites(library, "chocolate_matmul_call_linked") > 0
    rng = np.random.default_rng(7)
    for _ in range(3):
        inputs = {"input_1": rng.uniform(-40, 80, (1, 50, 10, 1)).astype(np.float32)}  # the input scale's range
        seen = assert_same_as_relay(library, mlf, inputs, tmp_path, monkeypatch)
    assert (seen["chocolate.layers"], seen["chocolate.core_calls"], seen["chocolate.dma_in_bytes"]) == \
        ("5", "4736", "51444")


@pytest.mark.real_model
@pytest.mark.parametrize("tile, orders", [((8, 8, 8), "blocks_stream"), ((4, 16, 8), "blocks")],
                         ids=["8x8x8", "4x16x8"])
@pytest.mark.relay  # compares with the Relay engine
def test_float_onet_as_on_the_relay_engine(tmp_path, monkeypatch, tile, orders):
    """MTCNN O-Net (float ONNX, NCHW: transposed around the core's program on the CPU), its 4 convs
    with their bias on the core, the PReLUs on the CPU; its second conv's weights and input do not
    fit the 64 KiB scratchpad (the blocks orders).  Outputs equal the Relay engine's MLF's bit for
    bit, and every counter."""
    library, mlf, report, log = compile_both(fetch("mtcnn_onet"), tmp_path, tile, "input_3:[1,48,48,3]")
    assert f"order {orders}," in log, log
    assert patterns_matched(report, "chocolate") == {"conv2d_bias": 4}, report
    assert "conv2d" not in report_line(report, "on the CPU", "chocolate"), report
    inputs = {"input_3": np.random.default_rng(12).standard_normal((1, 48, 48, 3)).astype(np.float32)}
    seen = assert_same_as_relay(library, mlf, inputs, tmp_path, monkeypatch)
    assert seen["chocolate.layers"] == "4"


# Compiles with one weight transfer left out of every layer's program (a broken backend).
COMPILE_WITHOUT_A_TRANSFER = """
import sys
from uma_chocolate import program
from tvm_extension.relax import compile_model
build = program.build
def without_weights(layer, core, plan, host, extern):
    return build(layer, core, plan, host, lambda name, *args: extern(name, *args) if "weights" not in name else
                 extern("chocolate_zero_call", 0))
program.build = without_weights
compile_model(sys.argv[1], "chocolate", sys.argv[2], [sys.argv[3]])
compile_model(sys.argv[1], "chocolate", "m.tar", [sys.argv[3]], output_format="mlf")
"""


def test_a_refused_call_stops_the_inference_in_one_line(tmp_path):
    done = subprocess.run([str(RELAX_PYTHON), "-c", COMPILE_WITHOUT_A_TRANSFER,
                           str(ROOT / "examples/models/cnn.onnx"), "m.so", str(CHOCOLATE_EXT)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300,
                          env={k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")})
    assert done.returncode == 0, done.stderr
    np.savez(tmp_path / "in.npz", input=np.ones((1, 3, 16, 16), np.float32))
    run = relax_engine("run", "m.so", "-i", "in.npz", "-o", "out.npz", cwd=tmp_path)
    assert run.returncode == 1 and not (tmp_path / "out.npz").exists()
    assert "that nothing has written since the layer began" in run.stderr, run.stderr
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("error: running 'm.so' failed: chocolate: a call refused its arguments"), run.stderr
    # The MLF: tvmgen_default_run returns the device's own status (CHOCOLATE_EUNWRITTEN), no later call made.
    assert_mlf_refuses(tmp_path / "m.tar", {"input": np.ones((1, 3, 16, 16), np.float32)},
                       "inference failed with status 10 ")


def test_attributes_that_do_not_describe_a_chip_are_one_line(tmp_path):
    done = relax_engine("compile", str(ROOT / "examples/models/cnn.onnx"), "--target", "chocolate",
                        "--experimental-tvm-extension", str(CHOCOLATE_EXT),
                        "--target-chocolate-scratchpad_bytes=100", "-o", "m.so", cwd=tmp_path)
    assert done.returncode == 1 and len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("error: target 'chocolate': scratchpad_bytes 100 must be a multiple of 4"), done.stderr
    assert not (tmp_path / "m.so").exists()
