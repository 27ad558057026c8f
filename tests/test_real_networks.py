"""Real networks from PyPI packages: tvmc -> MLF -> gcc -> run, against TVM's CPU build and
the framework's own interpreter (TFLite's, ONNX Runtime).  Tolerance: max error within
1e-4 of the output's scale (float32, different summation orders)."""
import re

import numpy as np
import pytest

from conftest import (
    ZOO_FLOAT_INPUTS, assert_close, kernel_calls, mlf_sources, onnxruntime_reference, tflite_reference,
    tvm_cpu_reference, vanilla_relay_mlf,
)
from tvm_extension.testing.model_zoo import fetch
from tvm_extension.mlf import build

pytestmark = pytest.mark.real_model

# name: framework reference, convs offloaded (every one of the network's: dense,
# depthwise, strided, "valid" and asymmetric padding; a regression that offloads fewer fails),
# and an output-stage operator the calls must have taken with them.
NETWORKS = {
    "blazeface": (tflite_reference, 37, "add x16"),
    "kws_on_off_float32": (tflite_reference, 79, "add x24"),
    # TFLite's PReLU, imported flattened, is folded back per channel and offloaded with its conv.
    "face_landmark": (tflite_reference, 45, "nn.prelu x23"),
    "mtcnn_pnet": (onnxruntime_reference, 5, "nn.prelu x3"),
    "mtcnn_onet": (onnxruntime_reference, 4, "nn.prelu x4"),
}


@pytest.mark.parametrize("name", list(NETWORKS))
def test_network(tmp_path, name):
    framework_reference, expected_convs, fused = NETWORKS[name]
    shapes = ZOO_FLOAT_INPUTS[name]
    model = fetch(name)
    out = tmp_path / "model.tar"
    done = vanilla_relay_mlf(name, out)
    assert done.returncode == 0, done.stderr[-2000:]

    # The offload report and the generated C agree: one kernel call per offloaded conv, no loops.
    report = re.search(r"\[vanilla_accelerator\] offloaded: (.*) in (\d+) functions", done.stdout)
    assert report, done.stdout
    conv_count = re.search(r"nn.conv2d x(\d+)", report.group(1))
    assert conv_count, done.stdout
    assert int(conv_count.group(1)) == int(report.group(2)) == kernel_calls(out) == expected_convs, done.stdout
    assert fused in report.group(1).split(", "), done.stdout
    offloaded = [t for t in mlf_sources(out).values() if "// offloaded to vanilla_accelerator" in t]
    assert len(offloaded) == expected_convs and not any("for (" in t for t in offloaded)
    # Vanilla reads the model's layout: partitioning added no transposes to what the CPU runs.
    assert "layout_transform" not in done.stdout, done.stdout

    rng = np.random.default_rng(11)
    inputs = {n: rng.standard_normal(s).astype(np.float32) for n, s in shapes.items()}
    program = build(out, tmp_path / "build")
    got = list(program.run(inputs)[0].values())
    for reference in (tvm_cpu_reference, framework_reference):
        expected = reference(model, inputs)
        assert len(got) == len(expected) >= 1
        for i, (g, e) in enumerate(zip(got, expected)):
            assert_close(g, e, what=f"{name} output {i} vs {reference.__name__}")
