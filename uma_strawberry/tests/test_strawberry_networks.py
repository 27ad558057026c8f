"""The real float networks of the tests on Strawberry at three scratchpad sizes: tvmc -> MLF -> gcc -> run against
TVM's CPU build and the framework's interpreter; NHWC feature maps, depthwise convs, residual adds and
PReLU all go through the scratchpad; every conv is offloaded even at 16 and 4 KiB (tiles cut
rows, columns, output and input channels); the smaller scratchpad splits more and moves more, with
the same outputs, and the hardware model counts exactly the planned transfers."""
import numpy as np
import pytest

pytest.importorskip("tvm.relay", reason="the Relay engine's end-to-end tests (hhb-tvm: TVM 0.16's tvmc, its report and MLF layout); on apache-tvm test_strawberry_either_engine.py runs this example end to end")

from tvm_extension.testing import assert_close, fetch, onnxruntime_reference, tflite_reference, tvm_cpu_reference
from test_strawberry_end_to_end import compile_strawberry, offloaded_sources, run_with_counters

pytestmark = pytest.mark.real_model


def shapes_option(shapes):
    """tvmc's --input-shapes value."""
    return " ".join(f"{name}:[{','.join(map(str, shape))}]" for name, shape in shapes.items())

# name: input shapes, framework reference, offloaded convs (all of the network's), what the calls
# carry besides the conv.
NETWORKS = {
    "mtcnn_pnet": ({"input_1": (1, 24, 24, 3)}, onnxruntime_reference, 5, "nn.prelu x3"),
    "mtcnn_onet": ({"input_3": (1, 48, 48, 3)}, onnxruntime_reference, 4, "nn.prelu x4"),
    "blazeface": ({"input": (1, 128, 128, 3)}, tflite_reference, 37, "add x16"),
    "kws_on_off_float32": ({"serving_default_input_1:0": (1, 98, 1, 104)}, tflite_reference, 79, "add x24"),
    # TFLite's flattened PReLU folded back per channel, as on Vanilla.
    "face_landmark": ({"input_1": (1, 192, 192, 3)}, tflite_reference, 45, "nn.prelu x23"),
}
# The default holds most layers whole; 16 and 4 KiB split every large one, along every axis.
SIZES = (262144, 16384, 4096)


# The two largest: the same layers at other sizes (the framework's default run leaves them out)
LARGEST = ("kws_on_off_float32", "face_landmark")


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.exhaustive) if n in LARGEST else n for n in NETWORKS])
def test_network_at_three_scratchpad_sizes(tmp_path, monkeypatch, name):
    shapes, framework_reference, convs, fused = NETWORKS[name]
    sizes = SIZES
    model = fetch(name)
    rng = np.random.default_rng(11)
    inputs = {n: rng.standard_normal(s).astype(np.float32) for n, s in shapes.items()}
    references = [reference(model, inputs) for reference in (tvm_cpu_reference, framework_reference)]
    runs = []
    for spad in sizes:
        compiled = compile_strawberry(model, tmp_path / f"{spad}.tar", spad, "--input-shapes", shapes_option(shapes))
        assert f"[strawberry] offloaded: nn.conv2d x{convs}," in compiled.stdout, compiled.stdout
        assert compiled.offloaded_functions() == convs == len(compiled.plans)
        assert fused in compiled.stdout
        assert len(offloaded_sources(compiled.path)) == convs
        got, counters = run_with_counters(compiled.path, tmp_path / f"run{spad}", inputs, monkeypatch)
        for reference, expected in zip(("TVM's CPU build", "framework"), references):
            assert len(got) == len(expected) >= 1
            for i, (g, e) in enumerate(zip(got, expected)):
                assert_close(g, e, what=f"{name} at {spad} bytes, output {i} vs {reference}")
        assert counters["layers"] == convs
        assert counters["dma_in_bytes"] + counters["dma_out_bytes"] == compiled.planned("bytes")
        assert counters["dma_in_calls"] + counters["dma_out_calls"] == compiled.planned("transfers")
        assert counters["spad_high_water"] <= spad
        assert counters["spad_peak_bytes"] == compiled.peak_occupancy() <= spad
        runs.append((got, counters, compiled))
    moved = lambda c: c["dma_in_bytes"] + c["dma_out_bytes"]
    assert runs[0][2].planned("lower_bound") <= moved(runs[0][1])
    for (big_out, big, _), (small_out, small, _) in zip(runs, runs[1:]):
        assert small["dma_in_calls"] + small["dma_out_calls"] > big["dma_in_calls"] + big["dma_out_calls"]
        assert moved(big) < moved(small)
        assert small["macs"] == big["macs"] and small["compute_calls"] > big["compute_calls"]
        for g_small, g_big in zip(small_out, big_out):
            assert_close(g_small, g_big, what=f"{name}: a smaller scratchpad against a larger")
