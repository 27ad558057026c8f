"""Chocolate's loop orders (uma_chocolate.schedule): the plan moving the fewest bytes that fits,
and the scheduled TIR of each order: the loops around the core's calls, each operand tile
loaded where the order says, partitions checked by TVM."""
import dataclasses
import re

import pytest

pytest.importorskip("tvm.relay", reason="the Relay engine's tir.Schedule (hhb-tvm); on apache-tvm test_chocolate_either_engine.py runs the example end to end")

import tvm  # noqa: E402  (after the engine check)
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
    A (A moves 7 x 2 x 7 tiles instead of B); room for the input (75 bytes) besides reads it
    once and gathers the A tiles on chip: the lower bound; room for every B tile and a row panel
    of A too gathers each A tile once (fewer DMA cycles)."""
    chosen = {spad: plan_layer(LAYER, core(spad)) for spad in (96, 192, 268, 476)}
    assert {spad: (p.order, p.patch) for spad, p in chosen.items()} == {
        96: ("stream", ""), 192: ("columns", ""), 268: ("columns", "whole"), 476: ("weights", "whole")}
    assert [(p.a_tiles, p.b_tiles) for p in chosen.values()] == [(98, 98), (98, 14), (98, 14), (49, 14)]
    assert [p.host_bytes for p in chosen.values()] == [2298, 1326, 387, 387] and LAYER.lower_bound() == 387
    assert chosen[268].dma_cycles > chosen[476].dma_cycles and chosen[476].patches == ((0, 5),)
    with pytest.raises(Unfit, match="one A, B and accumulator tile take 96 bytes, the scratchpad holds 92"):
        plan_layer(LAYER, core(92))


def test_one_row_panel_streams_from_the_input():
    """4 pixels (one row panel), 32 channels: streaming B reads each weight once, and the input
    (12 bytes) kept besides one tile of each reads each input element once: the lower bound in
    108 bytes of scratchpad."""
    few_pixels = dataclasses.replace(LAYER, ih=2, iw=2, oh=2, ow=2, oc=32)
    plan = plan_layer(few_pixels, core(200))
    assert (plan.order, plan.patch) == ("stream", "whole") and (plan.a_tiles, plan.b_tiles) == (56, 56)
    assert plan.host_bytes == few_pixels.lower_bound() and sum(plan.partitions.values()) == 108


def test_bands_when_the_input_does_not_fit():
    """A 48x2x8 input (768 bytes) in a 1000-byte scratchpad: a band of input rows per row panel
    (4 pixels, two output rows: at most 4 input rows of 16 bytes) reads each input row about
    twice, the im2col DMA each element about 6 times; with one A tile held instead of a row
    panel (blocks_stream), two bands of 25 rows fit: the input is read once but for 2 rows."""
    tall = dataclasses.replace(LAYER, ih=48, iw=2, ic=8, oh=48, ow=2, oc=4)
    per_panel = min((p for p in plans(tall, core(1000)) if (p.order, p.patch) == ("weights", "bands")),
                    key=lambda p: p.host_bytes)
    assert len(per_panel.patches) == 24 and per_panel.patches[:4] == ((0, 3), (1, 4), (3, 4), (5, 4))
    assert per_panel.partitions["in"] == 4 * 16
    im2col = next(p for p in plans(tall, core(1000)) if (p.order, p.patch) == ("weights", ""))
    plan = plan_layer(tall, core(1000))
    assert (plan.order, plan.patch, plan.m_group, plan.n_group) == ("blocks_stream", "bands", 12, 1)
    assert plan.patches == ((0, 25), (23, 25)) and plan.partitions["in"] == 25 * 16
    assert (plan.host_bytes, per_panel.host_bytes, im2col.host_bytes, tall.lower_bound()) == (1472, 2176, 5216, 1440)


@pytest.mark.parametrize("spad", [96, 192, 208, 400, 1024])
def test_plan_moves_the_fewest_bytes_that_fit(spad):
    best = plan_layer(LAYER, core(spad))
    fitting = [p for p in plans(LAYER, core(spad)) if sum(p.partitions.values()) <= spad]
    assert best in fitting and best.host_bytes == min(p.host_bytes for p in fitting) >= LAYER.lower_bound()


@pytest.mark.parametrize("spad, loads", [
    (96, [r"for m_0, n_0 in T.grid\(7, 2\):(\s+.*){4}\s+for k_0 in range\(7\):"]),
    (192, [r"for n_0 in range\(2\):\s+for ax0 in range\(7\):\s+status: T.int32 = T.call_extern\(\"int32\", "
           r"\"chocolate_dma_weights_s8_call\"", r"for m_0 in range\(7\):(\s+.*){4}\s+for k_0 in range\(7\):"]),
    (1024, [r"chocolate_configure_s8_call.*\n.*\n.*\n\s+with T.LetStmt\(T.call_extern\(\"int32\", "
            r"\"chocolate_dma_patch_s8_call\", 400, input.data, 0, 5\)\)",
            r"for r, j in T.grid\(7, 2\):\s+status: T.int32 = T.call_extern\(\"int32\", "
            r"\"chocolate_dma_weights_s8_call\"",
            r"for m_0 in range\(7\):\s+for ax0 in range\(7\):\s+status: T.int32 = T.call_extern\(\"int32\", "
            r"\"chocolate_im2col_patch_call\", ax0 \* 16 \+ 64, 400, m_0 \* 4, ax0 \* 4\)"]),
])
def test_tir_has_the_loops_of_its_order(spad, loads):
    script = lowered(plan_layer(LAYER, core(spad)), core(spad))
    for pattern in loads:
        assert re.search(pattern, script), script
    assert script.count("chocolate_configure_s8") == 1 and script.count("chocolate_begin") == 1
    assert script.index("chocolate_configure_s8") < script.index("for ")  # hoisted out of the loops
    for call in ("chocolate_zero", "chocolate_matmul", "chocolate_store"):
        assert call in script


def test_tir_loads_a_band_per_row_panel():
    """The bands plan: at the top of each row panel, the DMA of the input rows its windows read
    (computed from m_0), then its A tiles gathered on chip."""
    plan = next(p for p in plans(LAYER, core(1024)) if (p.order, p.patch) == ("weights", "bands"))
    script = lowered(plan, core(1024))
    # rows [max(y0 - 1, 0), min(y1 + 2, 5)) of the panel's first and last output rows y0, y1; at least
    # one (a panel whose windows all fall in the padding below loads the nearest row)
    assert re.search(r"for m_0 in range\(7\):\s+cse_var_2: T.int32 = m_0 \* 4\s+cse_var_3: T.int32 = cse_var_2 // 5"
                     r"\s+cse_var_1: T.int32 = T.max\(cse_var_3 - 1, 0\)\s+with T.LetStmt\(T.call_extern\(\"int32\", "
                     r"\"chocolate_dma_patch_s8_call\", 400, input.data, cse_var_1, T.max\(T.min\(\(T.min\(cse_var_2 \+ 4, "
                     r"25\) - 1\) // 5 \+ 2, 5\), T.max\(cse_var_3, 1\)\) - cse_var_1\)\)(\s+.*){3}\s+for ax0 in "
                     r"range\(7\):\s+status: T.int32 = T.call_extern\(\"int32\", \"chocolate_im2col_patch_call\"",
                     script), script
    assert "chocolate_dma_im2col" not in script


def test_tvm_checks_the_partitions():
    """A plan whose A partition is too small for its panel: TVM's StorageRewrite refuses it."""
    plan = plan_layer(LAYER, core(1024))
    small = dataclasses.replace(plan, partitions={**plan.partitions, "a": 16})
    with pytest.raises(tvm.TVMError, match="Allocation exceed bound of memory tag global.chocolate_a"):
        lowered(small, core(1024))
