"""Strawberry's split of a layer (uma_strawberry.tiling) and TVM's checks of the scratchpad
partitions (uma_strawberry.program): the chosen split is the cheapest of every split that fits,
fits its partitions, never moves fewer bytes than the lower bound, and TVM itself refuses a
program whose buffers exceed a partition."""
import dataclasses
import itertools

import pytest

pytest.importorskip("tvm.relay", reason="the Relay engine's schedule (hhb-tvm: tvm.tir, tvm.relay); on apache-tvm test_strawberry_either_engine.py runs the example end to end")

import tvm  # noqa: E402  (after the engine check)
from tvm import tir
from tvm.relay.backend import Executor

from uma_strawberry import program
from uma_strawberry.tiling import WORD as WORD_BYTES, Config, ConfigError, Layer, Unfit, cost, lower_bound, plan_layer, tile_words

ATTRS = dict(scratchpad_bytes=16384, ifmap_percent=40, weights_percent=30, dma_bytes_per_cycle=8, dma_setup_cycles=32,
             macs_per_cycle=64)


def config(**changes):
    return Config.from_attrs({**ATTRS, **changes})


LAYERS = [
    Layer("nchw", False, ic=8, ih=16, iw=16, oc=16, oh=16, ow=16, kh=3, kw=3, stride_h=1, stride_w=1, pad_top=1,
          pad_left=1, bias=True),
    Layer("nhwc", False, ic=3, ih=24, iw=24, oc=10, oh=11, ow=11, kh=3, kw=3, stride_h=2, stride_w=2, pad_top=0,
          pad_left=0, bias=True, slope=True),
    Layer("nhwc", True, ic=24, ih=32, iw=32, oc=24, oh=16, ow=16, kh=5, kw=5, stride_h=2, stride_w=2, pad_top=1,
          pad_left=1, bias=True, residual=True),
    Layer("nchw", False, ic=16, ih=9, iw=7, oc=12, oh=5, ow=4, kh=5, kw=3, stride_h=1, stride_w=2, pad_top=0,
          pad_left=1, residual=True),
    # One output channel's weights (40 x 3 x 3 + bias) do not fit 4 KiB's weights partition whole.
    Layer("nhwc", False, ic=40, ih=7, iw=6, oc=6, oh=7, ow=6, kh=3, kw=3, stride_h=1, stride_w=1, pad_top=1,
          pad_left=1, bias=True, residual=True),
]
# A 1x1 conv of stride 2 reads every other input row and column: the DMA fetches whole padded rows,
# so even one output row per tile moves the skipped columns, above the lower bound.
STRIDE_ABOVE_WINDOW = Layer("nhwc", False, ic=4, ih=9, iw=9, oc=6, oh=5, ow=5, kh=1, kw=1, stride_h=2, stride_w=2,
                            pad_top=0, pad_left=0, bias=True)


def fits(layer, cfg, *tile):
    limits = (cfg.ifmap_bytes // 4, cfg.weights_bytes // 4, cfg.ofmap_bytes // 4)
    return all(need <= limit for need, limit in zip(tile_words(layer, *tile), limits))


def every_split(layer, cfg):
    """Every tile size along rows, columns, output and input channels (not only one per tile
    count), in both loop orders, with every residency the order allows, that fits."""
    orders = [(False, w, False) for w in (False, True)]
    orders += [(True, w, i) for w in (False, True) for i in ((False,) if layer.depthwise else (False, True))]
    for rows, cols, channels in itertools.product(range(1, layer.oh + 1), range(1, layer.ow + 1),
                                                  range(1, layer.oc + 1)):
        if not fits(layer, cfg, rows, cols, channels, channels if layer.depthwise else 1):
            continue
        for in_channels in ([channels] if layer.depthwise else range(1, layer.ic + 1)):
            for rows_outer, weights_resident, ifmap_resident in orders:
                if rows_outer and weights_resident and channels < layer.oc:
                    continue
                tile = (rows, cols, channels, in_channels, weights_resident, ifmap_resident)
                if fits(layer, cfg, *tile):
                    yield cost(layer, rows, cols, channels, in_channels, rows_outer, weights_resident, ifmap_resident)


@pytest.mark.parametrize("spad", [4096, 16384, 65536])
@pytest.mark.parametrize("layer", LAYERS + [STRIDE_ABOVE_WINDOW], ids=range(len(LAYERS) + 1))
def test_plan_is_the_cheapest_split_that_fits(layer, spad):
    """Against every split: tile sizes along the four axes, both loop orders, every residency; those
    keeping the input channels whole first (their outputs are the unsplit conv's bits)."""
    cfg = config(scratchpad_bytes=spad)
    best = None
    for candidate in every_split(layer, cfg):
        key = (not layer.depthwise and candidate.in_channels < layer.ic, candidate.dma_bytes, candidate.dma_calls)
        if best is None or key < best:
            best = key
    _, best_bytes, best_calls = best
    plan = plan_layer(layer, cfg)
    assert fits(layer, cfg, plan.rows, plan.cols, plan.channels, plan.in_channels, plan.weights_resident,
                plan.ifmap_resident)
    assert (plan.dma_bytes, plan.dma_calls) == (best_bytes, best_calls)
    assert plan.dma_bytes >= lower_bound(layer)
    assert plan == cost(layer, plan.rows, plan.cols, plan.channels, plan.in_channels, plan.rows_outer,
                        plan.weights_resident, plan.ifmap_resident)


@pytest.mark.parametrize("layer", LAYERS, ids=range(len(LAYERS)))
def test_more_scratchpad_never_moves_more(layer):
    """Among plans of one kind: input channels in chunks only while nothing else fits (from the first
    size where they stay whole, they stay whole), and within each kind more scratchpad moves no more."""
    moved = []
    for spad in (4096, 8192, 16384, 32768, 65536, 1 << 20):
        try:
            plan = plan_layer(layer, config(scratchpad_bytes=spad))
        except Unfit:
            assert not moved, "a layer that fits must fit a larger scratchpad"
            continue
        moved.append((layer.depthwise or plan.in_channels == layer.ic, plan.dma_bytes))
    kinds = [whole for whole, _ in moved]
    assert kinds == sorted(kinds), "chunked input channels after a size that keeps them whole"
    for kind in (False, True):
        same = [b for whole, b in moved if whole == kind]
        assert same == sorted(same, reverse=True)
    assert moved[-1] == (True, lower_bound(layer))


def test_lower_bound_skips_what_no_window_reads():
    """With one output row and column per tile, the DMA fetches only what the windows read."""
    layer = STRIDE_ABOVE_WINDOW
    inputs, weights, outputs = 4 * 5 * 5, 6 * (4 + 1), 6 * 5 * 5  # rows and columns 0, 2, 4, 6, 8
    assert lower_bound(layer) == 4 * (inputs + weights + outputs)
    best = plan_layer(layer, config(scratchpad_bytes=1 << 20))
    assert best.rows == best.cols == 1 and best.dma_bytes == lower_bound(layer)
    whole_rows = cost(layer, 1, 5, 6, 4, rows_outer=True, weights_resident=True, ifmap_resident=True)
    assert whole_rows.dma_bytes == lower_bound(layer) + 4 * 4 * 5 * 4  # 4 skipped columns x 5 rows


def test_weights_stay_resident_when_the_rows_are_split():
    """Rows split, all output channels at once: the weights and bias are loaded once, not per row tile."""
    plan = plan_layer(LAYERS[0], config())
    assert plan.row_tiles > 1 and plan.channel_tiles == 1 and plan.in_tiles == 1 and plan.weights_resident
    assert plan.dma_in_calls == plan.row_tiles * plan.col_tiles + 2


def test_cost_counts_halo_and_padding():
    """3x3 stride 1 pad 1 on 16 x 16 in 2 row tiles of 8 and 2 column tiles of 8: each tile reads
    10 input rows and 10 columns (a halo of 2), of which the outer ones at the image's edges are
    padding."""
    layer = LAYERS[0]
    plan = cost(layer, 8, 8, 16, 8, rows_outer=True, weights_resident=True, ifmap_resident=True)
    in_bytes = 4 * layer.ic * (9 + 9) * (9 + 9)  # 9 real rows and columns per tile
    tile_bytes = 4 * layer.ic * (10 + 10) * (10 + 10)  # 10 rows x 10 columns per tile
    weights = 4 * (16 * 8 * 9 + 16)
    assert plan.dma_in_bytes == in_bytes + weights
    assert plan.dma_pad_bytes == tile_bytes - in_bytes
    assert plan.dma_out_bytes == 4 * 16 * 16 * 16
    assert (plan.dma_in_calls, plan.dma_out_calls) == (4 + 2, 4)


def test_input_channel_chunks_cost_transfers_not_bytes():
    """Cutting the input channels into chunks keeps the bytes and adds transfers: per output tile,
    one input tile and one weight chunk per input-channel chunk (nothing resident)."""
    layer = LAYERS[-1]
    whole = cost(layer, 7, 6, 6, 40, rows_outer=False)
    chunks = cost(layer, 7, 6, 6, 10, rows_outer=False)
    assert chunks.in_tiles == 4 and chunks.dma_bytes == whole.dma_bytes
    assert chunks.dma_in_calls == whole.dma_in_calls + 2 * 3 and chunks.compute_calls == 4


def test_small_scratchpads_split_the_input_channels():
    """At 4 KiB one output channel's weights do not fit whole: the plan cuts the input channels."""
    layer = LAYERS[-1]
    cfg = config(scratchpad_bytes=4096)
    assert WORD_BYTES * tile_words(layer, 1, 1, 1, layer.ic)[1] > cfg.weights_bytes
    plan = plan_layer(layer, cfg)
    assert plan.in_tiles > 1 and plan.in_channels * plan.in_tiles >= layer.ic


@pytest.mark.parametrize("layer,spad,changes,fragment", [
    (Layer("nchw", False, 64, 8, 200, 8, 8, 200, 3, 3, 1, 1, 1, 1), 64, {},
     "one output reads 36 bytes of input (1 channel x 3 rows x 3 columns), the ifmap partition holds 24"),
    (Layer("nchw", False, 1300, 1, 1, 8, 1, 1, 3, 3, 1, 1, 1, 1, bias=True), 64,
     dict(ifmap_percent=80, weights_percent=10),
     "one output channel's weights for one input channel take 40 bytes, the weights partition holds 4"),
    (Layer("nhwc", True, 4, 2, 4000, 4, 2, 4000, 1, 1, 1, 1, 0, 0, residual=True), 100,
     dict(ifmap_percent=49, weights_percent=49), "one output takes 8 bytes, the ofmap partition holds 4"),
])
def test_unfit_says_which_partition(layer, spad, changes, fragment):
    with pytest.raises(Unfit, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        plan_layer(layer, config(scratchpad_bytes=spad, **changes))


@pytest.mark.parametrize("changes,fragment", [
    (dict(scratchpad_bytes=60), "scratchpad_bytes 60"),
    (dict(scratchpad_bytes=4098), "scratchpad_bytes 4098"),
    (dict(ifmap_percent=0), "ifmap_percent 0"),
    (dict(ifmap_percent=70, weights_percent=30), "leave at least 1%"),
    (dict(macs_per_cycle=0), "macs_per_cycle 0"),
    (dict(dma_setup_cycles="x"), "dma_setup_cycles must be an integer"),
])
def test_bad_config(changes, fragment):
    with pytest.raises(ConfigError, match=fragment):
        config(**changes)


def test_partitions():
    cfg = config(scratchpad_bytes=10000, ifmap_percent=33, weights_percent=33)
    assert (cfg.ifmap_bytes, cfg.weights_bytes, cfg.ofmap_bytes) == (3300, 3300, 3400)
    assert cfg.bases == {"ifmap": 0, "weights": 3300, "ofmap": 6600}


def _build(layer, plan, cfg):
    """program.build's TIR for ``layer`` in a PrimFunc, compiled to C as the framework does."""
    axes = "chw" if layer.layout == "nchw" else "hwc"
    in_shape = {"c": layer.ic, "h": layer.ih, "w": layer.iw}
    out_shape = {"c": layer.oc, "h": layer.oh, "w": layer.ow}
    buffers = {
        "ifmap": tir.decl_buffer([in_shape[a] for a in axes], "float32", name="ifmap"),
        "weights": tir.decl_buffer([layer.oc, layer.weights_per_channel], "float32", name="weights"),
        "ofmap": tir.decl_buffer([out_shape[a] for a in axes], "float32", name="ofmap"),
    }
    host = {role: buffers[role].data if role in buffers else None
            for role in ("ifmap", "weights", "bias", "residual", "slope", "ofmap")}
    body = program.build(layer, plan, cfg, host, -3.4e38, 3.4e38)
    params = [tir.Var(name, "handle") for name in buffers]
    func = tir.PrimFunc(params, body, buffer_map=dict(zip(params, buffers.values()))).with_attr("global_symbol", "layer")
    mod = tvm.IRModule({"layer": func}).with_attr("executor", Executor("aot", {"unpacked-api": True,
                                                                               "interface-api": "c"}))
    config_ = {"tir.disable_vectorize": True, "tir.add_lower_pass": [(3, tir.transform.LowerDeviceStorageAccessInfo())]}
    with tvm.transform.PassContext(opt_level=3, config=config_):
        return tvm.build(mod, target="c").get_source()


def test_tvm_checks_the_partitions():
    """A plan made for a larger scratchpad does not compile for a smaller one: TVM's StorageRewrite
    checks the buffers of each partition against its registered size."""
    layer = dataclasses.replace(LAYERS[0], bias=False)
    big, small = config(scratchpad_bytes=65536), config(scratchpad_bytes=8192)
    plan = plan_layer(layer, big)
    source = _build(layer, plan, big)
    assert "strawberry_dma_in_call(" in source and "strawberry_conv2d_nchw_call(" in source
    with pytest.raises(tvm.TVMError, match="Allocation exceed bound of memory tag global.strawberry_(weights|ifmap|ofmap)"):
        _build(layer, plan, small)
