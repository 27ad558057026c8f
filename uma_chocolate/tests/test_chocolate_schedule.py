"""Chocolate's loop orders (uma_chocolate.schedule): the plan moving the fewest bytes that fits,
and the scheduled TIR of each order: the loops around the core's calls, each operand tile
loaded where the order says, partitions checked by TVM."""
import dataclasses
import re

import pytest
import tvm
from tvm import tir

from uma_chocolate.schedule import ConvLayer, Core, Unfit, gemm_compute, plan_layer, plans, register_intrinsics, \
    schedule

# 5x5x3 input, 3x3 window, 6 channels: a GEMM of 25 x 6 x 27, ragged on every axis for 4x4x4.
LAYER = ConvLayer(ih=5, iw=5, ic=3, oh=5, ow=5, oc=6, kh=3, kw=3, stride_h=1, stride_w=1, pad_top=1, pad_left=1,
                  input_zp=-3, output_zp=2, act_min=-128, act_max=127)
SHAPES = {"input": (1, 5, 5, 3), "weights": (27, 6), "table": (3, 6)}


def core(spad, m=4, n=4, k=4):
    return Core(m, n, k, spad, 8, 32)


def lowered(plan, chip):
    func = schedule(LAYER, chip, plan, gemm_compute(LAYER, chip, SHAPES), register_intrinsics(chip, plan))
    passes = {"tir.add_lower_pass": [(3, tir.transform.LowerDeviceStorageAccessInfo())]}
    with tvm.transform.PassContext(config=passes):
        return tvm.lower(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}))["main"].script()


def test_the_order_follows_the_scratchpad():
    """7 row tiles, 2 column tiles, 7 depth tiles.  One tile of each (16 + 16 + 64 bytes) only
    streams; a column panel of B (7 tiles) makes each B tile move once, and beats a row panel of
    A (A moves 7 x 2 x 7 tiles instead of B); room for every B tile and a row panel of A moves
    every tile once."""
    chosen = {spad: plan_layer(LAYER, core(spad)) for spad in (96, 192, 400)}
    assert {spad: p.order for spad, p in chosen.items()} == {96: "stream", 192: "columns", 400: "weights"}
    assert [(p.a_tiles, p.b_tiles) for p in chosen.values()] == [(98, 98), (98, 14), (49, 14)]
    with pytest.raises(Unfit, match="one A, B and accumulator tile take 96 bytes, the scratchpad holds 92"):
        plan_layer(LAYER, core(92))


def test_rows_when_the_channels_outnumber_the_pixels():
    few_pixels = dataclasses.replace(LAYER, oh=3, ow=3, oc=32)  # 3 row tiles, 8 column tiles
    plan = plan_layer(few_pixels, core(400))
    assert plan.order == "rows" and (plan.a_tiles, plan.b_tiles) == (3 * 7, 3 * 8 * 7)


@pytest.mark.parametrize("spad", [96, 192, 208, 400, 1024])
def test_plan_moves_the_fewest_bytes_that_fit(spad):
    best = plan_layer(LAYER, core(spad))
    fitting = [p for p in plans(LAYER, core(spad)) if sum(p.partitions.values()) <= spad]
    assert best in fitting and best.dma_in_bytes == min(p.dma_in_bytes for p in fitting)


@pytest.mark.parametrize("spad, loads", [
    (96, [r"for m_0, n_0 in T.grid\(7, 2\):(\s+.*){4}\s+for k_0 in range\(7\):"]),
    (192, [r"for n_0 in range\(2\):\s+for ax0 in range\(7\):\s+status: T.int32 = T.call_extern\(\"int32\", "
           r"\"chocolate_dma_weights_s8_call\"", r"for m_0 in range\(7\):(\s+.*){4}\s+for k_0 in range\(7\):"]),
    (1024, [r"for r, j in T.grid\(7, 2\):\s+status: T.int32 = T.call_extern\(\"int32\", "
            r"\"chocolate_dma_weights_s8_call\"",
            r"for m_0 in range\(7\):\s+for ax0 in range\(7\):\s+status: T.int32 = T.call_extern\(\"int32\", "
            r"\"chocolate_dma_im2col_s8_call\""]),
])
def test_tir_has_the_loops_of_its_order(spad, loads):
    script = lowered(plan_layer(LAYER, core(spad)), core(spad))
    for pattern in loads:
        assert re.search(pattern, script), script
    assert script.count("chocolate_configure_s8") == 1 and script.count("chocolate_begin") == 1
    assert script.index("chocolate_configure_s8") < script.index("for ")  # hoisted out of the loops
    for call in ("chocolate_zero", "chocolate_matmul", "chocolate_store"):
        assert call in script


def test_tvm_checks_the_partitions():
    """A plan whose A partition is too small for its panel: TVM's StorageRewrite refuses it."""
    plan = plan_layer(LAYER, core(1024))
    small = dataclasses.replace(plan, partitions={**plan.partitions, "a": 16})
    with pytest.raises(tvm.TVMError, match="Allocation exceed bound of memory tag global.chocolate_a"):
        lowered(small, core(1024))
