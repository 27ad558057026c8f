"""Issue #47: on the Relax engine, ONNX's BatchNormalization after a Conv (inference mode) is folded
into the conv's weights and bias before the backends' patterns are matched (TVM's
FoldBatchnormToConv2D, ``tvm_extension.relax.fold``), so the conv (+bias,
+relu) is offloaded as on the Relay engine (``tvm_extension.kit.fold``), and the two engines' MLFs
compute the same outputs, bit for bit (the same folded constants, the same kernel)."""
import re

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
import pytest

from conftest import (VANILLA_EXT, VANILLA_KERNELS, assert_close, mlf_sources, onnx_reference, onnxruntime_reference,
                      run_tvmc)
from test_fold import conv_bn_model
from test_relax_engine import relax_engine, report_line
from tvm_extension.mlf import build


def conv_bn_relu_model(path, bias: bool):
    """Conv (8 output channels, [+ bias]) -> BatchNormalization (non-trivial statistics) -> Relu,
    NCHW float32.  Opset 15: onnx.reference's BatchNormalization of opsets 9 to 13 (onnx 1.18)
    applies the momentum as in training, which no engine does."""
    rng = np.random.default_rng(47)
    tensor = lambda name, value: numpy_helper.from_array(np.asarray(value, np.float32), name)
    inits = [tensor("w", rng.standard_normal((8, 3, 3, 3)) / 4), tensor("gamma", rng.uniform(0.5, 2, 8)),
             tensor("beta", rng.standard_normal(8)), tensor("mean", rng.standard_normal(8)),
             tensor("var", rng.uniform(0.2, 3, 8))] + ([tensor("b", rng.standard_normal(8))] if bias else [])
    nodes = [helper.make_node("Conv", ["input", "w"] + (["b"] if bias else []), ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "gamma", "beta", "mean", "var"], ["n"], epsilon=1e-3),
             helper.make_node("Relu", ["n"], ["output"])]
    graph = helper.make_graph(nodes, "conv_bn_relu",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 16, 16])],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 8, 16, 16])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


def kernel_calls(archive) -> int:
    """Calls of Vanilla's conv entries in the Relax engine's AOT C (one function per offload)."""
    return len(re.findall(rf"\b{VANILLA_KERNELS}\(", mlf_sources(archive)["./codegen/host/src/default_lib0.c"]))


def both_engines(model, tmp_path, inputs):
    """The Relax engine's report and outputs, and the Relay engine's outputs, of ``model`` with
    Vanilla (each an MLF built with gcc and run)."""
    relax_out, relay_out = tmp_path / "relax.tar", tmp_path / "relay.tar"
    done = relax_engine("compile", str(model), "--target", "vanilla_accelerator", "--experimental-tvm-extension",
                        str(VANILLA_EXT), "-f", "mlf", "-o", str(relax_out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    relay = run_tvmc("compile", "--target", "vanilla_accelerator", "--experimental-tvm-extension", VANILLA_EXT,
                     model, "-f", "mlf", "-o", relay_out)
    assert relay.returncode == 0, relay.stderr[-3000:]
    run = lambda archive, name: build(archive, tmp_path / name).run(inputs)[0]["output"]
    return done.stdout, relax_out, run(relax_out, "relax"), run(relay_out, "relay")


@pytest.mark.quick
@pytest.mark.parametrize("bias", [False, True], ids=["conv", "conv_with_bias"])
@pytest.mark.relay  # compares with the Relay engine
def test_batch_norm_is_folded_into_the_conv_and_offloaded_as_on_the_relay_engine(tmp_path, bias):
    model = conv_bn_relu_model(tmp_path / "conv_bn_relu.onnx", bias)
    inputs = {"input": np.random.default_rng(0).standard_normal((1, 3, 16, 16)).astype(np.float32)}
    report, archive, got, relay = both_engines(model, tmp_path, inputs)
    # Before the fold: "offloaded: nn.conv2d x1 [, add x1]", "on the CPU: nn.batch_norm x1, nn.relu x1".
    assert report_line(report, "offloaded") == "nn.conv2d x1, add x1, nn.relu x1 in 1 functions", report
    assert report_line(report, "on the CPU") == "none", report
    assert report_line(report, "patterns") == "conv2d_bias_relu x1", report
    assert kernel_calls(archive) == 1
    np.testing.assert_array_equal(got, relay)  # the Relay engine's folded constants, the same kernel
    assert_close(got, onnx_reference(model, inputs)[0], what="onnx.reference")


@pytest.mark.relay  # compares with the Relay engine
def test_biased_and_depthwise_convs_with_batch_norm_agree_with_the_relay_engine_bit_for_bit(tmp_path):
    """test_fold's model: Conv -> BN -> Relu, Conv(+bias) -> BN, depthwise Conv -> BN (opset 13:
    compared with ONNX Runtime, not onnx.reference, see above)."""
    model = conv_bn_model(tmp_path / "conv_bn.onnx")
    inputs = {"input": np.random.default_rng(0).standard_normal((1, 3, 10, 10)).astype(np.float32)}
    report, archive, got, relay = both_engines(model, tmp_path, inputs)
    assert report_line(report, "offloaded") == "nn.conv2d x3, add x3, nn.relu x1 in 3 functions", report
    assert report_line(report, "on the CPU") == "none", report
    assert kernel_calls(archive) == 3
    np.testing.assert_array_equal(got, relay)
    assert_close(got, onnxruntime_reference(model, inputs)[0], what="onnxruntime")


def test_the_fold_comes_before_the_desired_layout(tmp_path):
    """--desired-layout converts the folded convs (the fold reads NCHW/OIHW): no batch norm left, the
    same outputs as the Relay engine's NCHW build (ConvertLayout crashed on the pass's unfolded
    ``add(var, eps)``, so the fold's constants are computed before it)."""
    model = conv_bn_relu_model(tmp_path / "conv_bn_relu.onnx", bias=True)
    out = tmp_path / "relax.tar"
    done = relax_engine("compile", str(model), "--target", "vanilla_accelerator", "--experimental-tvm-extension",
                        str(VANILLA_EXT), "--desired-layout", "NHWC", "-f", "mlf", "-o", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "batch_norm" not in done.stdout, done.stdout
    assert report_line(done.stdout, "offloaded") == "nn.conv2d x1, add x1, nn.relu x1 in 1 functions", done.stdout
    inputs = {"input": np.random.default_rng(0).standard_normal((1, 3, 16, 16)).astype(np.float32)}
    got = build(out, tmp_path / "b").run(inputs)[0]["output"]
    assert_close(got, onnx_reference(model, inputs)[0], what="onnx.reference")


def test_a_batch_norm_after_no_conv_stays_on_the_cpu(tmp_path):
    """Relu -> BatchNormalization: nothing to fold into, the model as imported (the CPU computes it)."""
    model = conv_bn_relu_model(tmp_path / "m.onnx", bias=False)
    proto = onnx.load(model)
    conv, norm, relu = proto.graph.node
    relu.input[0], relu.output[0], norm.input[0], norm.output[0] = "c", "r", "r", "output"
    del proto.graph.node[:]
    proto.graph.node.extend([conv, relu, norm])
    onnx.save(proto, model)
    out = tmp_path / "relax.tar"
    done = relax_engine("compile", str(model), "--target", "vanilla_accelerator", "--experimental-tvm-extension",
                        str(VANILLA_EXT), "-f", "mlf", "-o", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert report_line(done.stdout, "offloaded") == "nn.conv2d x1, nn.relu x1 in 1 functions", done.stdout
    assert report_line(done.stdout, "on the CPU") == "nn.batch_norm x1", done.stdout
    inputs = {"input": np.random.default_rng(0).standard_normal((1, 3, 16, 16)).astype(np.float32)}
    got = build(out, tmp_path / "b").run(inputs)[0]["output"]
    assert_close(got, onnx_reference(model, inputs)[0], what="onnx.reference")
