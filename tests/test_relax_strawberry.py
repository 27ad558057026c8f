"""Strawberry on the Relax engine (apache-tvm 0.27): the same tiling and the same program of DMA
transfers and engine calls as on the Relay engine (uma_strawberry/relax_patterns.py), so the
same network at the same scratchpad size gives the Relay engine's MLF outputs bit for bit and
the same hardware counters (DMA bytes and transfers, engine calls, scratchpad peak), also where
the tiles split columns and input channels (4 KiB)."""
import os
import subprocess

import numpy as np
import pytest

from conftest import ROOT, run_tvmc
from test_relax_engine import RELAX_PYTHON, TVMC, assert_mlf_refuses, call_sites, relax_engine, report_line
from tvm_extension.mlf import build
from tvm_extension.testing.model_zoo import fetch

STRAWBERRY_EXT = ROOT / "uma_strawberry"


def counters(path):
    return dict(line.split(": ") for line in path.read_text().splitlines())


def relax_run(library, inputs, work):
    """Outputs and the hardware model's counters of one run with the Relax VM."""
    np.savez(work / "in.npz", **inputs)
    report = work / "relax_counters.txt"
    environment = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run([str(TVMC), "run", str(library), "-i", "in.npz", "-o", "out.npz"], cwd=work,
                          capture_output=True, text=True, timeout=600, env={**environment, "STRAWBERRY_REPORT": str(report)})
    assert done.returncode == 0, done.stderr
    with np.load(work / "out.npz") as out:
        return [out[f"output_{i}"] for i in range(len(out.files))], counters(report)


@pytest.mark.real_model
@pytest.mark.parametrize("name, shapes, scratchpad", [
    ("mtcnn_pnet", "input_1:[1,24,24,3]", 4096),  # NCHW, PReLU; columns and input channels split
    ("blazeface", "input:[1,128,128,3]", 16384),  # NHWC, depthwise, 16 residual adds
])
@pytest.mark.relay  # compares with the Relay engine
def test_same_outputs_and_counters_as_the_relay_engine(tmp_path, monkeypatch, name, shapes, scratchpad):
    model, attr = fetch(name), f"--target-strawberry-scratchpad_bytes={scratchpad}"
    done = relax_engine("compile", str(model), "--target", "strawberry", "--experimental-tvm-extension",
                        str(STRAWBERRY_EXT), "--input-shapes", shapes, attr, "-o", "m.so", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "conv2d" not in report_line(done.stdout, "on the CPU", "strawberry"), done.stdout
    assert call_sites(tmp_path / "m.so", "strawberry_dma_in_call_linked") > 0
    input_name, shape = shapes.split(":")
    inputs = {input_name: np.random.default_rng(5).standard_normal(eval(shape)).astype(np.float32)}
    outputs, relax_counters = relax_run(tmp_path / "m.so", inputs, tmp_path)

    done = run_tvmc("compile", "--target", "strawberry,c", "--experimental-tvm-extension", STRAWBERRY_EXT, attr,
                    "--input-shapes", shapes, model, "-f", "mlf", "-o", tmp_path / "m.tar")
    assert done.returncode == 0, done.stderr[-2000:]
    monkeypatch.setenv("STRAWBERRY_REPORT", str(tmp_path / "relay_counters.txt"))
    expected = list(build(tmp_path / "m.tar", tmp_path / "mlf").run(inputs)[0].values())
    assert len(outputs) == len(expected)
    for got, want in zip(outputs, expected):
        assert np.array_equal(got.reshape(want.shape), want)
    relay_counters = counters(tmp_path / "relay_counters.txt")
    assert relax_counters == relay_counters and int(relax_counters["strawberry.spad_bytes"]) == scratchpad


def test_attributes_that_do_not_describe_a_chip_are_one_line(tmp_path):
    done = relax_engine("compile", str(ROOT / "examples/models/cnn.onnx"), "--target", "strawberry",
                        "--experimental-tvm-extension", str(STRAWBERRY_EXT), "--target-strawberry-ifmap_percent=60",
                        "--target-strawberry-weights_percent=50", "-o", "m.so", cwd=tmp_path)
    assert done.returncode == 1 and len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("error: target 'strawberry': ifmap_percent 60 and weights_percent 50"), done.stderr
    assert not (tmp_path / "m.so").exists()


# Compiles with every weight transfer left out of the layers' programs (a broken backend).
COMPILE_WITHOUT_WEIGHTS = """
import sys
from tvm import tirx
from uma_strawberry import program
from tvm_extension.relax import compile_model
build = program.build
def without_weights(layer, plan, config, host, lo, hi, extern):
    def call(name, *args):
        moves_weights = name == "strawberry_dma_in_call" and args[1].same_as(host["weights"])
        return tirx.Evaluate(0) if moves_weights else extern(name, *args)
    return build(layer, plan, config, host, lo, hi, call)
program.build = without_weights
compile_model(sys.argv[1], "strawberry", sys.argv[2], [sys.argv[3]])
compile_model(sys.argv[1], "strawberry", "m.tar", [sys.argv[3]], output_format="mlf")
"""


@pytest.mark.quick
def test_a_refused_call_stops_the_inference_in_one_line(tmp_path):
    """The mock refuses the first engine call (its weights were never transferred); no later call
    is made, and the run fails in one line with the model's reason above it."""
    done = subprocess.run([str(RELAX_PYTHON), "-c", COMPILE_WITHOUT_WEIGHTS, str(ROOT / "examples/models/cnn.onnx"),
                           "m.so", str(STRAWBERRY_EXT)], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")})
    assert done.returncode == 0, done.stderr
    np.savez(tmp_path / "in.npz", input=np.ones((1, 3, 16, 16), np.float32))
    run = relax_engine("run", "m.so", "-i", "in.npz", "-o", "out.npz", cwd=tmp_path)
    assert run.returncode == 1 and not (tmp_path / "out.npz").exists()
    reasons = [line for line in run.stderr.splitlines() if "nothing has written since the layer began" in line]
    assert len(reasons) == 1 and "weights" in reasons[0], run.stderr
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("error: running 'm.so' failed: strawberry: a call refused its arguments"), run.stderr
    # The MLF: tvmgen_default_run returns the device's own status (STRAWBERRY_EUNWRITTEN), no later call made.
    assert_mlf_refuses(tmp_path / "m.tar", {"input": np.ones((1, 3, 16, 16), np.float32)},
                       "inference failed with status 11 ")
