"""Chocolate's RTL (uma_chocolate/rtl/*.v): lint clean under ``verilator --lint-only -Wall``; each
module simulated by Verilator against its model, bit for bit (C++ testbenches in tests/rtl/): the
output stage against the C model's requantization on every edge of its arguments and random ones,
the scratchpad against an array, the core with its scratchpad against the C model (uma_chocolate/c)
on random tiles at random addresses for two tile shapes; Yosys's synthesis of the core grows with
its tiles and holds at least their registers."""
import subprocess
from pathlib import Path

import pytest

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
