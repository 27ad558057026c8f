"""What frontends leave unfolded reaches the kernel folded: ONNX conv + BatchNormalization."""
import numpy as np
import onnx
from onnx import helper, numpy_helper
import pytest
pytest.importorskip("tvm.relay", reason="the Relay engine's tests (hhb-tvm, Python 3.10): not installed here")

from conftest import VANILLA_EXT, assert_close, kernel_calls, onnxruntime_reference, run_tvmc, tvm_cpu_reference
from tvm_extension.testing.models import float_model
from tvm_extension.mlf import build


def conv_bn_model(path):
    """Conv -> BN -> Relu, Conv(+bias) -> BN, depthwise Conv -> BN (non-trivial statistics)."""
    rng = np.random.default_rng(5)
    inits = []

    def tensor(name, value):
        inits.append(numpy_helper.from_array(np.asarray(value, np.float32), name))
        return name

    def batch_norm(x, y, channels, i):
        stats = [tensor(f"{n}{i}", v) for n, v in (
            ("gamma", rng.uniform(0.5, 2, channels)), ("beta", rng.standard_normal(channels)),
            ("mean", rng.standard_normal(channels)), ("var", rng.uniform(0.2, 3, channels)))]
        return helper.make_node("BatchNormalization", [x] + stats, [y], epsilon=1e-3)

    nodes = [
        helper.make_node("Conv", ["input", tensor("w0", rng.standard_normal((8, 3, 3, 3)) / 5)], ["c0"], pads=[1, 1, 1, 1]),
        batch_norm("c0", "n0", 8, 0),
        helper.make_node("Relu", ["n0"], ["r0"]),
        helper.make_node("Conv", ["r0", tensor("w1", rng.standard_normal((8, 8, 1, 1)) / 3),
                                  tensor("b1", rng.standard_normal(8))], ["c1"]),
        batch_norm("c1", "n1", 8, 1),
        helper.make_node("Conv", ["n1", tensor("w2", rng.standard_normal((8, 1, 3, 3)) / 3)], ["c2"],
                         pads=[1, 1, 1, 1], group=8),
        batch_norm("c2", "output", 8, 2),
    ]
    onnx.save(float_model(nodes, inits, [1, 3, 10, 10], [1, 8, 10, 10], "conv_bn"), path)
    return path


@pytest.mark.quick
def test_conv_batch_norm_is_one_call(tmp_path):
    model = conv_bn_model(tmp_path / "conv_bn.onnx")
    out = tmp_path / "o.tar"
    done = run_tvmc("compile", "--target", "vanilla_accelerator", "--experimental-tvm-extension", VANILLA_EXT,
                    model, "-f", "mlf", "-o", out)
    assert done.returncode == 0, done.stderr
    assert "[vanilla_accelerator] offloaded: nn.conv2d x3, nn.bias_add x3, nn.relu x1 in 3 functions" in done.stdout
    assert "[vanilla_accelerator] on the CPU: none" in done.stdout  # no batch_norm, multiply or add left
    assert kernel_calls(out) == 3
    x = np.random.default_rng(0).standard_normal((1, 3, 10, 10)).astype(np.float32)
    got = build(out, tmp_path / "b").run({"input": x})[0]["output"]
    for reference in (onnxruntime_reference, tvm_cpu_reference):
        assert_close(got, reference(model, {"input": x})[0], what=reference.__name__)


def test_hard_swish_stays_on_cpu_with_the_reason(tmp_path):
    rng = np.random.default_rng(6)
    nodes = [helper.make_node("Conv", ["input", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("HardSigmoid", ["c"], ["h"], alpha=1 / 6, beta=0.5),
             helper.make_node("Mul", ["c", "h"], ["output"])]
    weights = numpy_helper.from_array((rng.standard_normal((4, 3, 3, 3)) / 3).astype(np.float32), "w")
    model = tmp_path / "hard_swish.onnx"
    onnx.save(float_model(nodes, [weights], [1, 3, 6, 6], [1, 4, 6, 6], "hard_swish"), model)
    out = tmp_path / "o.tar"
    done = run_tvmc("compile", "--target", "vanilla_accelerator", "--experimental-tvm-extension", VANILLA_EXT,
                    model, "-f", "mlf", "-o", out)
    assert done.returncode == 0, done.stderr
    assert "[vanilla_accelerator] offloaded: nn.conv2d x1 in 1 functions" in done.stdout
    assert "not offloaded: clip: hard-sigmoid/hard-swish (clip of x + c): not in Vanilla's output stage x1" in done.stdout
    x = np.random.default_rng(1).standard_normal((1, 3, 6, 6)).astype(np.float32)
    got = build(out, tmp_path / "b").run({"input": x})[0]["output"]
    assert_close(got, onnxruntime_reference(model, {"input": x})[0], what="hard-swish")
