"""What is offloaded runs: random conv graphs for every example backend, at random values of
its target attributes (drawn from its ``target_attr_ranges``), compiled by plain tvmc, built with
gcc and run: every kernel call returns status 0 and the outputs match an independent reference
(float: ONNX Runtime within float tolerance; int8: TVM's own CPU build, bit for bit).  Each graph
is compiled by both engines: the Relax engine's MLF matches the same reference (int8: equal to the
Relay engine's MLF, bit for bit).

The graphs are those of test_property_graphs.py, with windows at and beyond the kernels' limits:
kernels up to 9x9 (a 9x9 depthwise conv has more taps than Vanilla's depthwise buffer), and pads
up to the window and beyond (Chocolate's DMA pads less than the window).  A conv a kernel would
refuse must stay on the CPU; the patterns read the kernels' limits from their C headers.

The default run is short and derandomized; TVM_EXTENSION_PROPERTY_EXAMPLES / _SEED scale it
(see test_property_graphs.py).
"""
import numpy as np
import pytest
pytest.importorskip("tvm.relay", reason="the Relay engine's tests (hhb-tvm, Python 3.10): not installed here")
from hypothesis import HealthCheck, assume, given, seed, settings
from hypothesis import strategies as st

from conftest import VANILLA_EXT, assert_close, onnx_reference, onnxruntime_reference, run_tvmc, tvm_cpu_reference
from test_relax_engine import relax_engine
from test_property_graphs import (EXAMPLES, SEED, _layer, _out_size, conv_layer, float_model, int8_layer,
                                  offloaded_convs, qdq_model)
from tvm_extension.mlf import build
from uma_chocolate.target import ATTR_RANGES as CHOCOLATE_RANGES
from uma_strawberry.tiling import ATTR_RANGES as STRAWBERRY_RANGES
from uma_vanilla.backend import VanillaAcceleratorBackend
from uma_vanilla.target import ATTR_RANGES as VANILLA_RANGES


# Half test_property_graphs' count per test: each example is a compile, a gcc build and a run.
_SETTINGS = settings(max_examples=max(1, EXAMPLES // 2), deadline=None, derandomize=SEED is None, database=None,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def SETTINGS(test):
    return _SETTINGS(seed(int(SEED))(test) if SEED is not None else test)


@st.composite
def wide_layer(draw, channels, height, width, **kwargs):
    """test_property_graphs' conv layer, often with explicit pads up to two past the window."""
    layer = draw(conv_layer(channels, height, width, **kwargs))
    if draw(st.booleans()):
        kh, kw = layer["kernel"]
        pads = [draw(st.integers(0, k + 2)) for k in (kh, kw, kh, kw)]
        oh = _out_size(height, kh, layer["stride"][0], layer["dilation"], (pads[0], pads[2]))
        ow = _out_size(width, kw, layer["stride"][1], layer["dilation"], (pads[1], pads[3]))
        assume(oh >= 1 and ow >= 1)
        layer.update(pads=pads, shape=(layer["out"], oh, ow))
    return layer


@st.composite
def graph(draw, int8):
    channels, height, width = draw(st.integers(1, 6)), draw(st.integers(1, 10)), draw(st.integers(1, 10))
    layers, shape = [], (channels, height, width)
    for _ in range(draw(st.integers(1, 2))):
        layer = draw(int8_layer(*shape, layer=wide_layer) if int8 else wide_layer(*shape))
        layers.append(layer)
        shape = layer["shape"]
    return dict(input=(1, channels, height, width), layers=layers, seed=draw(st.integers(0, 2**16)))


def in_range(low, high):
    """An integer in [low, high]: the ends as often as values near the low end (huge values of
    scratchpads or rates cost memory and time, and behave as their neighbours do)."""
    near = st.integers(low, min(high, max(low, 1) * 64))
    return st.one_of(st.just(low), st.just(high), near, near)


@st.composite
def vanilla_attrs(draw):
    return {attr: draw(in_range(*bounds)) for attr, bounds in VANILLA_RANGES.items()}


@st.composite
def strawberry_attrs(draw):
    attrs = {attr: draw(in_range(*bounds)) for attr, bounds in STRAWBERRY_RANGES.items()}
    attrs["scratchpad_bytes"] -= attrs["scratchpad_bytes"] % 4  # a whole number of words
    low, high = STRAWBERRY_RANGES["weights_percent"]  # the ofmap partition keeps at least 1%
    attrs["weights_percent"] = draw(in_range(low, min(high, 99 - attrs["ifmap_percent"])))
    return attrs


@st.composite
def chocolate_attrs(draw):
    attrs = {attr: draw(in_range(*bounds)) for attr, bounds in CHOCOLATE_RANGES.items() if attr != "scratchpad_bytes"}
    m, n, k = (attrs[f"tile_{d}"] for d in "mnk")
    need = 4 * (m * k + k * n + m * n)  # one float A, B and accumulator tile
    low, high = CHOCOLATE_RANGES["scratchpad_bytes"]
    attrs["scratchpad_bytes"] = draw(in_range(max(low, need), high)) // 4 * 4
    return attrs


def compile_for(target, attrs, model, out):
    """The model's MLF on both engines: out (Relay) and out_relax.tar (Relax); the Relay engine's report."""
    flags = [f"--target-{target}-{attr}={value}" for attr, value in attrs.items()]
    done = run_tvmc("compile", "--target", target, "--experimental-tvm-extension", VANILLA_EXT, model, *flags,
                    "-f", "mlf", "-o", out)
    assert done.returncode == 0, f"{attrs}\n{done.stderr[-2000:]}"
    relax = relax_engine("compile", "--target", target, "--experimental-tvm-extension", VANILLA_EXT, model, *flags,
                         "-f", "mlf", "-o", relax_archive(out), cwd=out.parent)
    assert relax.returncode == 0, f"the Relax engine, {attrs}\n{relax.stderr[-2000:]}"
    return done


def relax_archive(out):
    return out.with_name(out.stem + "_relax.tar")


def run_both(out, inputs):
    """The output of the MLF of each engine (compile_for), built with gcc and run: (Relay's, Relax's)."""
    return tuple(build(archive, out.parent / f"build_{archive.stem}").run(inputs)[0]["output"]
                 for archive in (out, relax_archive(out)))


def check_float(target, spec, attrs, tmp_path, reference=onnxruntime_reference):
    """Offloaded or not, every conv runs (status 0) and the output matches ONNX Runtime (or
    ``reference``); returns the offload report."""
    model = float_model(spec, tmp_path / "model.onnx")
    done = compile_for(target, attrs, model, tmp_path / "model.tar")
    x = np.random.default_rng(spec["seed"]).standard_normal(spec["input"]).astype(np.float32)
    got, got_relax = run_both(tmp_path / "model.tar", {"input": x})
    (expected,) = reference(model, {"input": x})
    assert_close(got, expected, what=f"{spec} {attrs}")
    assert_close(got_relax, expected, what=f"the Relax engine: {spec} {attrs}")
    return done.stdout


def check_int8(target, spec, attrs, tmp_path):
    """Offloaded or not, every conv runs (status 0) and the output equals TVM's CPU build's;
    returns the offload report."""
    model = qdq_model(spec, tmp_path / "model.onnx")
    done = compile_for(target, attrs, model, tmp_path / "model.tar")
    x = np.random.default_rng(spec["seed"]).integers(-128, 128, spec["input"]).astype(np.int8)
    got, got_relax = run_both(tmp_path / "model.tar", {"input": x})
    (reference,) = tvm_cpu_reference(model, {"input": x}, integer_graph=True)
    assert np.array_equal(got, reference), f"not bit-exact: {spec} {attrs}"
    assert np.array_equal(got_relax, got), f"the Relax engine's MLF differs from the Relay engine's: {spec} {attrs}"
    return done.stdout


@SETTINGS
@given(spec=graph(int8=False), attrs=vanilla_attrs())
def test_vanilla_runs_what_it_offloads(spec, attrs, tmp_path_factory):
    check_float("vanilla_accelerator", spec, attrs, tmp_path_factory.mktemp("graph"))


@SETTINGS
@given(spec=graph(int8=False), attrs=strawberry_attrs())
def test_strawberry_runs_what_it_offloads(spec, attrs, tmp_path_factory):
    check_float("strawberry", spec, attrs, tmp_path_factory.mktemp("graph"))


@SETTINGS
@given(spec=graph(int8=True), budget=st.sampled_from([0, 1, 4096]))
def test_qvanilla_runs_what_it_offloads(spec, budget, tmp_path_factory):  # roomy, least and 4 KB scratch
    check_int8("qvanilla", spec, {"scratch_budget": budget}, tmp_path_factory.mktemp("graph"))


@SETTINGS
@given(spec=graph(int8=True), attrs=chocolate_attrs())
def test_chocolate_int8_runs_what_it_offloads(spec, attrs, tmp_path_factory):
    check_int8("chocolate", spec, attrs, tmp_path_factory.mktemp("graph"))


@SETTINGS
@given(spec=graph(int8=False), attrs=chocolate_attrs())
def test_chocolate_float_runs_what_it_offloads(spec, attrs, tmp_path_factory):
    check_float("chocolate", spec, attrs, tmp_path_factory.mktemp("graph"))


# --- The reported cases -----------------------------------------------------------------------

@pytest.mark.quick
def test_vanilla_9x9_depthwise_at_the_largest_max_kernel_size(tmp_path):
    """max_kernel_size at its maximum let a 9x9 depthwise conv through, which the kernel refused
    (81 taps, VANILLA_ETAPS); an 8x8 one (64 taps) is offloaded and runs."""
    largest = VANILLA_RANGES["max_kernel_size"][1]
    for kernel, offloaded in (((9, 9), 0), ((8, 8), 1)):
        layer = _layer(group=3, out=3, kernel=kernel, pads=[4, 4, 4, 4], shape=(3, 13 - kernel[0] % 2, 13 - kernel[1] % 2))
        spec = dict(input=(1, 3, 12, 12), layers=[layer], seed=5)
        work = tmp_path / f"k{kernel[0]}"
        work.mkdir()
        report = check_float("vanilla_accelerator", spec, {"max_kernel_size": largest}, work)
        assert offloaded_convs(report, "vanilla_accelerator") == offloaded


@pytest.mark.quick
def test_chocolate_2x1_window_with_top_pad_3(tmp_path):
    """A pad of the window's size or more (here 3 above a 2x1 window) is not the core's: the conv
    stays on the CPU (the C refused it at run time: CHOCOLATE_ELAYER); a pad of 1 is offloaded."""
    for top, offloaded in ((3, 0), (1, 1)):
        layer = _layer(out=4, kernel=(2, 1), pads=[top, 0, 0, 0], shape=(4, 5 + top, 6), per_channel=False,
                       relu=False, input_zp=3, output_zp=-2)
        spec = dict(input=(1, 2, 6, 6), layers=[layer], seed=6)
        work = tmp_path / f"top{top}"
        work.mkdir()
        assert offloaded_convs(check_int8("chocolate", spec, {}, work), "chocolate", "qnn.conv2d") == offloaded


def test_chocolate_tiles_and_strides_that_share_a_factor_7(tmp_path):
    """A 1x7 window on 70-deep tiles (found by the float property test, seed 32) and a stride of 7
    on 14-row tiles stopped the compile in TVM's simplifier ("Literal value 8589934591 exceeds
    maximum of int32"); both are offloaded and run."""
    cases = [((1, 1, 2), _layer(out=1, kernel=(1, 7), pads="SAME_UPPER", shape=(1, 1, 2)),
              dict(tile_m=2, tile_n=2, tile_k=70, dma_bytes_per_cycle=1, dma_setup_cycles=0, scratchpad_bytes=1136)),
             ((1, 22, 1), _layer(out=3, kernel=(1, 1), stride=(7, 1), pads=[0, 0, 0, 0], shape=(3, 4, 1)),
              dict(tile_m=14, tile_k=14))]
    for i, (shape, layer, attrs) in enumerate(cases):
        work = tmp_path / str(i)
        work.mkdir()
        report = check_float("chocolate", dict(input=(1, *shape), layers=[layer], seed=7), attrs, work)
        assert offloaded_convs(report, "chocolate") == 1, report


def test_chocolate_row_tiles_whose_windows_all_fall_in_the_padding(tmp_path):
    """A 1x1 conv with two padding rows below a one-row input (3 output rows) on 2-row tiles (found
    by the int8 property test, seed 3202): the second tile's pixels read no input row, and its patch
    of [2, 1) was refused at run time (CHOCOLATE_EBOUNDS, status -1); so with a 2x1 window.  The
    tile now loads the nearest row, which its im2col does not read; int8 and float, offloaded."""
    attrs = dict(tile_m=2, tile_n=2, tile_k=2, dma_bytes_per_cycle=1, dma_setup_cycles=0, scratchpad_bytes=48)
    for kernel, pads, rows in (((1, 1), [0, 0, 2, 0], 3), ((2, 1), [1, 0, 3, 0], 4)):
        spec = dict(input=(1, 1, 1, 1), layers=[_layer(out=1, kernel=kernel, pads=pads, shape=(1, rows, 1),
                                                       per_channel=False, relu=False, input_zp=0, output_zp=0)], seed=0)
        for check in (check_int8, check_float):
            work = tmp_path / f"{check.__name__}{kernel[0]}"
            work.mkdir()
            floats = dict(attrs, scratchpad_bytes=96) if check is check_float else attrs
            report = check("chocolate", spec, floats, work)
            assert offloaded_convs(report, "chocolate", *(["qnn.conv2d"] if check is check_int8 else [])) == 1, report


# Issue 32: a depthwise 1x1 conv -> LeakyRelu -> a dense 2x8 conv -> Add(scalar constant, conv) ->
# Relu.  On Chocolate the layout conversion swapped the Add's operands with a TVM Array's [::-1],
# which gives no operands at all: "the function is provided too few arguments expected 2, found 0".
ISSUE_32 = dict(input=(1, 12, 9, 4), seed=32, layers=[
    _layer(group=12, out=12, kernel=(1, 1), pads="SAME_LOWER", bias=True, after="leaky_relu", shape=(12, 9, 4),
           per_channel=True, relu=False, input_zp=5, output_zp=-3),
    _layer(out=4, kernel=(2, 8), pads="SAME_UPPER", bias=True, after="add_const_first", constant="scalar",
           then_relu=True, shape=(4, 9, 4), per_channel=True, relu=False, input_zp=-3, output_zp=-7)])


@pytest.mark.quick  # the four backends on one small graph
@pytest.mark.parametrize("target, offloaded", [("vanilla_accelerator", 2), ("strawberry", 2), ("chocolate", 1),
                                               ("qvanilla", 2)])
def test_depthwise_leaky_relu_then_conv_add_scalar_relu(target, offloaded, tmp_path):
    """Every target compiles it: float within 1e-4 of onnx.reference, QVanilla's QDQ form bit for
    bit with TVM's CPU build; Chocolate leaves the depthwise conv on the CPU, saying why."""
    if target == "qvanilla":
        report, conv = check_int8(target, ISSUE_32, {}, tmp_path), "qnn.conv2d"
    else:
        report, conv = check_float(target, ISSUE_32, {}, tmp_path, reference=onnx_reference), "nn.conv2d"
    assert offloaded_convs(report, target, conv) == offloaded, report
    if target == "chocolate":
        assert "not offloaded: nn.conv2d: depthwise (not a matrix product; stays on the CPU) x1" in report, report
