"""Chocolate's RTL (uma_chocolate/rtl/*.v): lint clean under ``verilator --lint-only -Wall``; each
module simulated by Verilator against its model, bit for bit (C++ testbenches in tests/rtl/): the
output stage against the C model's requantization on every edge of its arguments and random ones,
the scratchpad against an array, the core with its scratchpad against the C model (uma_chocolate/c)
on random tiles at random addresses for two tile shapes; Yosys's synthesis of the core grows with
its tiles and holds at least their registers; and the zoo's int8 networks, compiled by plain tvmc,
run on the RTL (``mlf run --device rtl``) at two tile shapes: every core call compared with the C
model's, the outputs equal to the C model's run."""
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tvm_extension.mlf import HostBuildError, build
from tvm_extension.testing import fetch, run_tvmc
from uma_chocolate import rtl

BENCHES = Path(__file__).resolve().parent / "rtl"


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("rtl")


def simulate(simulator, *arguments):
    done = subprocess.run([str(simulator), *map(str, arguments)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout


def test_rtl_is_lint_clean():
    assert rtl.lint("chocolate_top") == ""  # every module: the top instantiates them all


def test_output_stage_equals_the_c_models(work):
    simulator = rtl.build("chocolate_output_stage", BENCHES / "tb_output_stage.cpp", work)
    assert simulate(simulator, 7, 300_000).startswith("ok 300000")


def test_scratchpad_equals_an_array(work):
    simulator = rtl.build("chocolate_spad", BENCHES / "tb_spad.cpp", work, dict(WORDS=64, AW=6))
    assert simulate(simulator, 3, 200_000).startswith("ok 200000")


@pytest.mark.parametrize("tiles", [(8, 8, 8), (4, 8, 16)], ids=lambda t: "x".join(map(str, t)))
def test_core_equals_the_c_model(work, tiles):
    tile_m, tile_n, tile_k = tiles
    params = dict(TILE_M=tile_m, TILE_N=tile_n, TILE_K=tile_k, SPAD_BYTES=4096)
    simulator = rtl.build("chocolate_top", BENCHES / "tb_core.cpp", work, params, sorted(rtl.KERNEL_DIR.glob("*.c")))
    out = simulate(simulator, 11, 200)
    assert out.startswith(f"ok 200 trials, tiles {tile_m}x{tile_n}x{tile_k}"), out
    # the RTL's cycles per MATMUL: operands a byte a cycle, TILE_K of multiply-adds, accumulators
    # read and written back (the C model estimates TILE_K: a systolic array fed as fast as it computes)
    expected = tile_m * tile_k + tile_k * tile_n + 2 + tile_k + 2 * tile_m * tile_n
    assert f"matmul {expected} cycles (model {tile_k})" in out, out


def test_synthesized_core_grows_with_its_tiles():
    small, large = rtl.area(2, 2, 2), rtl.area(4, 4, 4)
    for (m, n, k), area in (((2, 2, 2), small), ((4, 4, 4), large)):
        registers = 8 * (m * k + k * n + m * n) + 32 * m * n  # operand tiles, outputs, sums
        assert registers <= area.flip_flops <= registers + 400, (m, n, k, area)
    assert large.cells > small.cells


NETWORKS = {"kws_dscnn_int8": [(8, 8, 8), (4, 8, 16)], "kws_on_off_int8": [(8, 8, 8), (4, 8, 16)]}
# The framework's default run: one network at the non-square shape (kws_on_off's residual ADDs
# stay on the CPU, beside the core's calls, as in the C model's tests); the others: exhaustive
DEFAULT_RUN = {("kws_dscnn_int8", (4, 8, 16))}


@pytest.mark.real_model
@pytest.mark.parametrize("net, tiles", [pytest.param(n, t, marks=[] if (n, t) in DEFAULT_RUN else pytest.mark.exhaustive)
                                        for n, shapes in NETWORKS.items() for t in shapes],
                         ids=lambda v: v if isinstance(v, str) else "x".join(map(str, v)))
def test_zoo_network_on_the_rtl_equals_the_c_model(tmp_path, monkeypatch, net, tiles):
    tile_m, tile_n, tile_k = tiles
    mlf = tmp_path / "model.tar"
    done = run_tvmc("compile", "--target", "chocolate", fetch(net), f"--target-chocolate-tile_m={tile_m}",
                    f"--target-chocolate-tile_n={tile_n}", f"--target-chocolate-tile_k={tile_k}", "-f", "mlf", "-o", mlf)
    assert done.returncode == 0, done.stderr[-3000:]
    model = build(mlf, tmp_path / "model")
    rng = np.random.default_rng(5)
    inputs = {t.name: rng.integers(-128, 128, t.shape).astype(t.dtype) if t.dtype == "int8"
              else rng.uniform(-40, 80, t.shape).astype(t.dtype) for t in model.inputs}
    expected, _ = model.run(inputs)
    np.savez(tmp_path / "in.npz", **inputs)
    report = tmp_path / "report.txt"
    monkeypatch.setenv("CHOCOLATE_REPORT", str(report))
    done = subprocess.run([sys.executable, "-m", "tvm_extension.mlf", "run", "--device", "rtl", str(mlf),
                           "-i", str(tmp_path / "in.npz"), "-o", str(tmp_path / "out.npz")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    with np.load(tmp_path / "out.npz") as got:
        assert all(np.array_equal(got[name], value) for name, value in expected.items())
    counters = {k.split(".", 1)[1]: int(v) for k, v in (line.split(": ") for line in report.read_text().splitlines())}
    # every core call ran on the RTL (none of a float layer), at the cycles its design takes
    assert counters["rtl_matmul_calls"] == counters["core_calls"] > 100 and counters["rtl_float_calls_on_the_model"] == 0
    per_call = tile_m * tile_k + tile_k * tile_n + 2 + tile_k + 2 * tile_m * tile_n
    assert counters["rtl_matmul_cycles"] == per_call * counters["core_calls"]
    assert counters["rtl_store_calls"] == counters["dma_out_calls"] and counters["rtl_zero_calls"] == counters["zero_calls"]


def test_device_refuses_an_mlf_without_chocolate(tmp_path):
    mlf = tmp_path / "plain.tar"
    done = run_tvmc("compile", "--target", "c", "--executor", "aot", "--executor-aot-interface-api", "c",
                    "--executor-aot-unpacked-api", "1", "--runtime", "crt", "--pass-config", "tir.disable_vectorize=1",
                    fetch("kws_dscnn_int8"), "-f", "mlf", "-o", mlf)
    assert done.returncode == 0, done.stderr[-3000:]
    np.savez(tmp_path / "in.npz", input_1=np.zeros((1, 50, 10, 1), np.float32))
    done = subprocess.run([sys.executable, "-m", "tvm_extension.mlf", "run", "--device", "rtl", str(mlf),
                           "-i", str(tmp_path / "in.npz"), "-o", str(tmp_path / "out.npz")], capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr == "Error: the MLF powers up no Chocolate core: nothing to run on its RTL\n"
    assert not (tmp_path / "out.npz").exists()


@pytest.mark.real_model
def test_a_core_that_computes_wrong_stops_the_network_in_one_line(tmp_path, monkeypatch):
    """The comparison is real: a core whose products lose their sign (a one-line RTL bug) stops the
    network at its first core call that sees a negative product, naming it."""
    mutated = tmp_path / "rtl"
    shutil.copytree(rtl.RTL_DIR, mutated)
    core = mutated / "chocolate_core.v"
    text = core.read_text()
    assert "product = {{16{p[15]}}, p};" in text
    core.write_text(text.replace("product = {{16{p[15]}}, p};", "product = {16'd0, p};"))
    monkeypatch.setattr(rtl, "RTL_DIR", mutated)
    monkeypatch.setattr(rtl, "BRIDGE", mutated / "chocolate_rtl.cpp")
    mlf = tmp_path / "model.tar"
    done = run_tvmc("compile", "--target", "chocolate", fetch("kws_dscnn_int8"), "-f", "mlf", "-o", mlf)
    assert done.returncode == 0, done.stderr[-3000:]
    program = build(mlf, tmp_path / "rtl-build", device=rtl.DEVICE)
    inputs = {t.name: np.random.default_rng(1).uniform(-40, 80, t.shape).astype(t.dtype) for t in program.inputs}
    with pytest.raises(HostBuildError, match=r"^chocolate rtl: matmul call 1: accumulator word at \d+: the RTL gives "
                                             r"-?\d+, the C model -?\d+$"):
        program.run(inputs)
