"""The kit (tvm_extension.kit) on its own, on small Relay graphs: patterns and their reasons, the
split of a match, the quantization arithmetic against TVM's CPU build and exact references,
c_limits on a header of its own, the layout and fold passes against the graph they rewrite.
And the import graph: no backend imports another, the framework imports no backend."""
import ast
import re
import subprocess
import sys
from fractions import Fraction
from math import floor
from pathlib import Path

import numpy as np
import pytest
pytest.importorskip("tvm.relay", reason="the Relay engine's tests (hhb-tvm, Python 3.10): not installed here")
import tvm
from tvm import relay
from tvm.contrib import graph_executor

from conftest import ROOT
from tvm_extension.kit import conv_patterns, describe, fold, layout, limits, qconv_patterns, quantization, tiling

pytestmark = pytest.mark.quick  # scripts/test.sh --quick runs this module whole

RNG = np.random.default_rng(7)
FLT_MAX = conv_patterns.FLT_MAX


def typed(expr):
    """``expr`` type-checked, as the patterns see it (the body of a function of its free variables)."""
    mod = relay.transform.InferType()(tvm.IRModule.from_expr(relay.Function(relay.analysis.free_vars(expr), expr)))
    return mod["main"].body


def run_cpu(mod, inputs):
    """The module built by TVM for the host CPU (x86-64; this TVM defaults to RISC-V), run once."""
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm -mtriple=x86_64-linux-gnu")
    runner = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    runner.set_input(**inputs)
    runner.run()
    return runner.get_output(0).numpy()


def ops(expr):
    found = []
    relay.analysis.post_order_visit(expr, lambda e: found.append(e.op.name) if (
        isinstance(e, relay.Call) and isinstance(e.op, tvm.ir.Op)) else None)
    return found


# -- float conv patterns -------------------------------------------------------------------------
def float_conv(shape=(1, 4, 8, 8), oc=4, k=(3, 3), data_layout="NCHW", kernel_layout="OIHW", dtype="float32",
               groups=1, **attrs):
    """conv2d of a variable input with constant weights."""
    channels = shape[data_layout.index("C")]
    dims = {"O": oc, "I": channels // groups, "H": k[0], "W": k[1]}
    weight = RNG.standard_normal([dims[a] for a in kernel_layout]).astype(dtype)
    data = relay.var("data", shape=shape, dtype=dtype)
    return relay.nn.conv2d(data, relay.const(weight), channels=oc, kernel_size=k, groups=groups,
                           data_layout=data_layout, kernel_layout=kernel_layout, **attrs)


def bias(n, dtype="float32"):
    return relay.const(RNG.standard_normal(n).astype(dtype))


def test_conv_chain_is_matched_and_split():
    b = bias(4)
    expr = typed(relay.nn.relu(relay.nn.bias_add(float_conv(padding=(1, 1)), b)))
    assert conv_patterns.conv2d_pattern().match(expr)
    parts = conv_patterns.split_composite(expr)
    assert parts.conv.op.name == "nn.conv2d" and parts.bias.op.name == "nn.bias_add"
    assert parts.bias_tensor.same_as(expr.args[0].args[1]) and parts.residual is None
    assert parts.activation.op.name == "nn.relu" and conv_patterns.clamp_bounds(parts.activation) == (0.0, FLT_MAX)
    assert conv_patterns.why_not_offloaded(expr, 3) is None


def test_residual_is_told_from_the_bias_in_either_order():
    conv = float_conv()
    residual = relay.var("residual", shape=(1, 4, 6, 6))
    expr = typed(relay.clip(relay.add(residual, relay.add(conv, relay.const(np.ones((4, 1, 1), "float32")))), 0, 6))
    assert conv_patterns.conv2d_residual_pattern().match(expr)
    assert not conv_patterns.conv2d_pattern().match(expr)
    parts = conv_patterns.split_composite(expr)
    assert parts.residual.name_hint == "residual" and parts.bias.op.name == "add"
    assert conv_patterns.clamp_bounds(parts.activation) == (0.0, 6.0)
    assert conv_patterns.why_not_offloaded(expr, 3) is None


@pytest.mark.parametrize("make, max_kernel_size, max_taps, reason", [
    (lambda: float_conv(dilation=(2, 2)), 3, None, "dilation"),
    (lambda: float_conv(shape=(2, 4, 8, 8)), 3, None, "batch 2 (needs 1)"),
    (lambda: float_conv(groups=2), 3, None, "grouped (not depthwise)"),
    (lambda: float_conv(k=(5, 5)), 3, None, "kernel 5x5 larger than the window buffer (max_kernel_size 3)"),
    (lambda: float_conv(shape=(1, 8, 8, 4), data_layout="NHWC", kernel_layout="HWOI"), 3, None,
     "layout NHWC/HWOI (needs NCHW/OIHW or NHWC/HWIO)"),
    (lambda: float_conv(dtype="float16"), 3, None, "dtype float16 (needs float32)"),
    (lambda: float_conv(oc=4, groups=4), 3, 4, "depthwise kernel 3x3: 9 taps above the depthwise window buffer's 4"),
    (lambda: float_conv(oc=4, groups=4), 3, None, None),
    (lambda: relay.add(float_conv(), relay.const(np.ones((1, 1, 6), "float32"))), 3, None,
     "bias of shape [1, 1, 6] is not per output channel"),
    (lambda: relay.clip(relay.nn.bias_add(float_conv(), bias(4)), 2.0, 1.0), 3, None, "clamp [2.0, 1.0] is empty"),
])
def test_why_a_float_conv_is_refused(make, max_kernel_size, max_taps, reason):
    assert conv_patterns.why_not_offloaded(typed(make()), max_kernel_size, max_taps) == reason


def test_engine_problem_checks_what_a_kernel_checks():
    g = dict(oc=4, ic=4, ih=8, iw=8, oh=8, ow=8, kh=3, kw=3, stride_h=1, stride_w=1, pad_top=1, pad_left=1)
    assert conv_patterns.engine_problem(g, False, 0.0, 6.0) is None
    assert conv_patterns.engine_problem({**g, "stride_w": 0}, False, 0.0, 6.0) == "stride 1x0 below 1"
    assert conv_patterns.engine_problem({**g, "pad_left": -1}, False, 0.0, 6.0) == "negative padding top 1, left -1"
    assert conv_patterns.engine_problem({**g, "oh": 0}, False, 0.0, 6.0).startswith("oh 0: below 1")
    assert conv_patterns.engine_problem({**g, "ih": 1 << 31}, False, 0.0, 6.0) == "too large for the kernel's int arithmetic"


# The element sizes of the two kinds of kernel: float32 tensors; int8 tensors with int16-packed weights.
FLOAT32 = dict(element_bytes=4, weight_bytes=4)
INT8_PACKED = dict(element_bytes=1, weight_bytes=2, weight_slack=1 << 20)
TOO_LARGE = "too large for the kernel's int arithmetic"
GEOMETRY = dict(oc=4, ic=4, ih=8, iw=8, oh=8, ow=8, kh=3, kw=3, stride_h=1, stride_w=1, pad_top=1, pad_left=1)


@pytest.mark.parametrize("change, reason", [
    (dict(), None),
    (dict(ic=0, kw=-1), "ic 0, kw -1: below 1 (the kernel refuses empty tensors)"),
    (dict(stride_h=0), "stride 0x1 below 1"),
    (dict(pad_top=-2), "negative padding top -2, left 1"),
    (dict(iw=1 << 31), TOO_LARGE),  # an argument beyond int32
    # the windows' reach, (oh - 1) * stride + kh, at INT32_MAX // 2 and one past it
    (dict(oh=1 << 29, stride_h=2, kh=1), None),
    (dict(oh=1 << 29, stride_h=2, kh=2), TOO_LARGE),
    (dict(ow=1 << 29, stride_w=2, kw=2), TOO_LARGE),
    # checked in the C's order: sizes, strides, pads, the kernel's own checks, sizes beyond its arithmetic
    (dict(oc=0, stride_w=0, pad_left=-1, ih=1 << 31), "oc 0: below 1 (the kernel refuses empty tensors)"),
    (dict(stride_w=0, pad_left=-1, ih=1 << 31), "stride 1x0 below 1"),
    (dict(pad_left=-1, ih=1 << 31), "negative padding top 1, left -1"),
])
def test_geometry_problem_says_each_reason_in_order(change, reason):
    for sizes in (FLOAT32, INT8_PACKED):
        assert limits.geometry_problem({**GEOMETRY, **change}, depthwise=False, **sizes) == reason


def test_geometry_problem_puts_the_kernels_own_check_after_the_pads_and_before_the_sizes():
    def check(change):
        return limits.geometry_problem({**GEOMETRY, **change}, depthwise=False, own_problem="own", **FLOAT32)

    assert check({}) == "own"
    assert check(dict(ih=1 << 31)) == "own"
    assert check(dict(pad_top=-1)) == "negative padding top -1, left 1"


def test_geometry_problem_sizes_float_and_int8_tensors_at_their_limits():
    def problem(sizes, depthwise=False, **change):
        return limits.geometry_problem({**GEOMETRY, **change}, depthwise=depthwise, **sizes)

    # an input of 2**61 values is 2**63 bytes of float32 (one past PTRDIFF_MAX), an eighth of it in int8
    assert problem(FLOAT32, ic=1 << 21, ih=1 << 20, iw=1 << 20) == TOO_LARGE
    assert problem(FLOAT32, ic=(1 << 21) - 1, ih=1 << 20, iw=1 << 20) is None
    assert problem(INT8_PACKED, ic=1 << 21, ih=1 << 20, iw=1 << 20) is None
    assert problem(INT8_PACKED, ic=1 << 21, ih=1 << 21, iw=1 << 21) == TOO_LARGE
    assert problem(INT8_PACKED, ic=(1 << 21) - 1, ih=1 << 21, iw=1 << 21) is None
    # the output the same way
    assert problem(FLOAT32, oc=1 << 21, oh=1 << 20, ow=1 << 5) is None
    assert problem(FLOAT32, oc=1 << 21, oh=1 << 20, ow=1 << 20) == TOO_LARGE
    assert problem(INT8_PACKED, oc=1 << 21, oh=1 << 20, ow=1 << 20) is None
    # 2**62 - 2**19 int16 weights take 2**63 - 2**20 bytes: the packing's slack of 2**20 is one byte too many
    weights = dict(oc=431 << 19, ic=9719, kh=2099863, kw=1)  # 2**43 - 1 = 431 * 9719 * 2099863
    assert problem(dict(INT8_PACKED, weight_slack=(1 << 20) - 1), **weights) is None
    assert problem(INT8_PACKED, **weights) == TOO_LARGE
    assert problem(INT8_PACKED, depthwise=True, **weights) is None  # a depthwise conv's weights have no ic
    assert problem(FLOAT32, **weights) == TOO_LARGE
    assert problem(FLOAT32, depthwise=True, **weights) is None


def test_the_patterns_size_float_and_int8_convs_differently():
    """engine_problem (float32) and qconv_patterns.geometry_problem (int8, a typed qnn.conv2d) at
    an input of 2**63 - 2**42 values: int8 fits, float32 does not (a quarter of it does); 2**63 values:
    neither."""
    g = dict(GEOMETRY, ic=(1 << 21) - 1, ih=1 << 21, iw=1 << 21, oh=1, ow=1)
    assert conv_patterns.engine_problem(g, False, 0.0, 6.0) == TOO_LARGE
    assert conv_patterns.engine_problem(dict(g, ic=(1 << 19) - 1), False, 0.0, 6.0) is None

    def qconv(channels):
        data = relay.var("data", shape=(1, 1 << 21, 1 << 21, channels), dtype="int8")
        weight = relay.var("weight", shape=(1, 1, channels, channels), dtype="int8")
        return typed(relay.qnn.op.conv2d(data, weight, relay.const(0), relay.const(0), relay.const(np.float32(0.05)),
                                         relay.const(np.float32(0.05)), kernel_size=(1, 1), channels=channels,
                                         data_layout="NHWC", kernel_layout="HWIO", out_dtype="int32"))

    assert qconv_patterns.geometry_problem(qconv((1 << 21) - 1)) is None
    assert qconv_patterns.geometry_problem(qconv(1 << 21)) == TOO_LARGE


def test_hard_activation_reason_names_the_stage():
    x = relay.var("x", shape=(1, 4, 8, 8))
    hard = typed(relay.clip(relay.add(x, relay.const(3.0)), 0.0, 6.0))
    assert conv_patterns.hard_activation_reason(hard, "Npu's output stage") == (
        "hard-sigmoid/hard-swish (clip of x + c): not in Npu's output stage")
    assert conv_patterns.hard_activation_reason(typed(relay.clip(x, 0.0, 6.0))) is None


# -- quantized conv chains -----------------------------------------------------------------------
def qchain(channels=3, oc=4, input_zp=-3, weight_zp=0, out_zp=5, relu_at=None, clip=(-100, 120),
           data_layout="NHWC", kernel_layout="HWIO", groups=1, dilation=(1, 1), weight=None):
    """qnn.conv2d -> bias_add -> [maximum] -> qnn.requantize -> [clip], per-channel weight scales."""
    shape = {"NHWC": (1, 6, 6, channels), "NCHW": (1, channels, 6, 6)}[data_layout]
    if weight is None:
        dims = {"H": 3, "W": 3, "I": channels // groups, "O": oc}
        weight = RNG.integers(-127, 128, [dims[a] for a in kernel_layout]).astype("int8")
    weight_scales = RNG.uniform(0.002, 0.02, oc).astype("float32")
    data = relay.var("data", shape=shape, dtype="int8")
    conv = relay.qnn.op.conv2d(
        data, relay.const(weight), relay.const(input_zp), relay.const(weight_zp), relay.const(np.float32(0.05)),
        relay.const(weight_scales), kernel_size=(3, 3), channels=oc, padding=(1, 1, 1, 1), groups=groups,
        dilation=dilation, data_layout=data_layout, kernel_layout=kernel_layout, out_dtype="int32")
    chain = relay.nn.bias_add(conv, relay.const(RNG.integers(-500, 500, oc).astype("int32")),
                              axis=data_layout.index("C"))
    if relu_at is not None:
        chain = relay.maximum(chain, relay.const(np.int32(relu_at)))
    chain = relay.qnn.op.requantize(chain, relay.const(0.05 * weight_scales), relay.const(0), relay.const(np.float32(0.1)),
                                    relay.const(out_zp), axis=data_layout.index("C"), out_dtype="int8")
    return typed(relay.clip(chain, *clip) if clip else chain), weight


def test_quantized_chain_is_matched_and_split():
    root, weight = qchain()
    assert qconv_patterns.qconv2d_pattern().match(root)
    parts = qconv_patterns.split_chain(root)
    assert set(parts) == {"clip", "qnn.requantize", "nn.bias_add", "qnn.conv2d"}
    assert qconv_patterns.constant_operand(parts["nn.bias_add"]).data.numpy().shape == (4,)
    assert qconv_patterns.out_channels(parts["qnn.conv2d"]) == 4
    assert qconv_patterns.chain_clamp(parts) == (-100, 120)
    assert qconv_patterns.why_not_offloaded(root) is None


@pytest.mark.parametrize("kwargs, shifts, reason", [
    (dict(), (0, 0), "outside the kernel's 0..0 (scale ratio)"),
    (dict(dilation=(2, 2)), None, "dilation"),
    (dict(data_layout="NCHW", kernel_layout="OIHW"), None, "layout NCHW/OIHW (needs NHWC/HWIO)"),
    (dict(channels=4, oc=8, groups=4, kernel_layout="HWOI"), None, "depthwise with channel multiplier 2"),
    (dict(clip=None, out_zp=200), None, "zero points [-3, 0, 200] (input, weights, output) are not int8"),
])
def test_why_a_quantized_chain_is_refused(kwargs, shifts, reason):
    root, _ = qchain(**kwargs)
    assert reason in (qconv_patterns.why_not_offloaded(root, shifts) or "")


def test_depthwise_weights_in_either_layout():
    for kernel_layout in ("HWOI", "HWIO"):
        root, _ = qchain(channels=4, oc=4, groups=4, kernel_layout=kernel_layout)
        assert qconv_patterns.is_depthwise(qconv_patterns.split_chain(root)["qnn.conv2d"])
        assert qconv_patterns.why_not_offloaded(root) is None


@pytest.mark.parametrize("relu_at, clip", [(None, (-100, 120)), (40, None)])
def test_chain_arithmetic_equals_tvms_cpu_build(relu_at, clip):
    """The integers a kernel takes (chain_channel_params, fold_bias, chain_clamp / lower_clamps) and
    requantize_int, applied to a numpy conv, give TVM's own CPU build of the chain bit for bit."""
    root, weight = qchain(relu_at=relu_at, clip=clip, input_zp=-3)
    parts = qconv_patterns.split_chain(root)
    data = RNG.integers(-128, 128, (1, 6, 6, 3)).astype("int8")
    expected = run_cpu(tvm.IRModule.from_expr(relay.Function(relay.analysis.free_vars(root), root)), {"data": data})

    centred = weight.astype(np.int64)  # weight zero point 0
    table = quantization.chain_channel_params(parts, None, 4)
    bias = quantization.fold_bias(qconv_patterns.constant_operand(parts["nn.bias_add"]).data.numpy(),
                                  centred.sum(axis=(0, 1, 2)), -3)
    # What a kernel computes: the raw input, padded with input_zp, times the weights, plus the folded
    # bias (which takes input_zp * sum(w) off).
    padded = np.pad(data.astype(np.int64), ((0, 0), (1, 1), (1, 1), (0, 0)), constant_values=-3)
    acc = sum(padded[0, ky:ky + 6, kx:kx + 6, :] @ centred[ky, kx] for ky in range(3) for kx in range(3)) + bias
    act_min, act_max = qconv_patterns.chain_clamp(parts)
    rounding = quantization.rounding_code(parts["qnn.requantize"])
    got = np.array([[[min(act_max, max(act_min, 5 + quantization.requantize_int(int(acc[y, x, o]), int(table[1, o]),
                                                                                 int(table[2, o]), rounding)))
                      for o in range(4)] for x in range(6)] for y in range(6)], np.int8)
    assert np.array_equal(got, expected[0])
    if relu_at is not None:
        assert act_min == qconv_patterns.lower_clamps(parts)[0] > -128


# -- quantization arithmetic ---------------------------------------------------------------------
def upward_reference(acc, multiplier, shift):
    """round(acc * M * 2^(shift - 31)), ties towards +infinity, exactly; saturated to int32."""
    value = floor(Fraction(acc * multiplier) * Fraction(2) ** (shift - 31) + Fraction(1, 2))
    return max(-(1 << 31), min((1 << 31) - 1, value))


def tflite_reference(x, multiplier, shift):
    """gemmlowp's MultiplyByQuantizedMultiplier on numpy int64 arrays (tensorflow/lite common.h)."""
    x = np.asarray(x, np.int64)
    left, right = max(shift, 0), max(-shift, 0)
    a = ((x << left) + 2**31) % 2**32 - 2**31  # x * 2^left in int32
    b = np.int64(multiplier)
    overflow = (a == -(1 << 31)) & (b == -(1 << 31))
    ab = a * b
    total = ab + np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    high = np.where(overflow, (1 << 31) - 1, np.sign(total) * (np.abs(total) >> 31))  # C's division truncates
    mask = (1 << right) - 1
    remainder, threshold = high & mask, (mask >> 1) + (high < 0)
    return (high >> right) + (remainder > threshold)


def test_requantize_int_equals_the_exact_references():
    accs = [0, 1, -1, 7, -7, 12345, -12345, (1 << 31) - 1, -(1 << 31)] + list(RNG.integers(-(1 << 31), 1 << 31, 200))
    for ratio in [0.5, 0.25, 1.0, 3.0, 1e-4, 0.3333, 1.9999] + list(RNG.uniform(1e-6, 4.0, 20)):
        multiplier, shift = quantization.fixed_point_multiplier(ratio)
        assert abs(multiplier * 2.0 ** (shift - 31) - ratio) <= ratio * 2.0 ** -30
        up = [quantization.requantize_int(int(a), multiplier, shift, quantization.ROUNDING_UPWARD) for a in accs]
        assert up == [upward_reference(int(a), multiplier, shift) for a in accs]
        assert up == [quantization.requantize(int(a), multiplier, shift) for a in accs]
        tfl = [quantization.requantize_int(int(a), multiplier, shift, quantization.ROUNDING_TFLITE) for a in accs]
        assert tfl == list(tflite_reference(accs, multiplier, shift))
    # ties (of the final shift): TVM's rounding goes up, TFLite's away from zero
    quarter = quantization.fixed_point_multiplier(0.25)
    ties = (2, -2, 6, -6)
    assert [quantization.requantize_int(a, *quarter, quantization.ROUNDING_UPWARD) for a in ties] == [1, 0, 2, -1]
    assert [quantization.requantize_int(a, *quarter, quantization.ROUNDING_TFLITE) for a in ties] == [1, -1, 2, -2]


def test_fold_bias_wraps_like_32_bit_adders():
    sums = np.array([10, -20, 1 << 30], np.int64)
    folded = quantization.fold_bias(np.array([5, 6, -(1 << 31)]), sums, -4)
    assert folded.dtype == np.int32
    assert list(folded) == [5 + 40, 6 - 80, -(1 << 31) + 4 * (1 << 30) - (1 << 32)]
    assert list(quantization.fold_bias(None, sums, 0)) == [0, 0, 0]
    assert quantization.activation_range() == (-128, 127)
    assert quantization.activation_range(-1.5, 6.5) == (-1, 6)


# -- limits --------------------------------------------------------------------------------------
def test_c_limits_reads_integer_defines_of_its_prefix(tmp_path):
    header = tmp_path / "npu.h"
    header.write_text(
        "#define NPU_MAX_TAPS 64\n"
        "#define NPU_SHIFT_MIN -31  /* the lowest */\n"
        "#  define NPU_MAX_SPAD_BYTES (1 << 20)\n"
        "#define NPU_BIG (2 * 3 + 1)\n"
        "#define NPU_NAME \"npu\"\n"
        "#define NPU_SQUARE(x) ((x) * (x))\n"
        "#define OTHER_LIMIT 5\n"
    )
    assert limits.c_limits(header, "NPU_") == {"MAX_TAPS": 64, "SHIFT_MIN": -31, "MAX_SPAD_BYTES": 1 << 20, "BIG": 7}


def test_conv_geometry_of_a_strided_padded_conv():
    conv = typed(float_conv(shape=(1, 9, 7, 4), oc=5, k=(3, 2), data_layout="NHWC", kernel_layout="HWIO",
                            strides=(2, 1), padding=(1, 0, 1, 1)))
    g = limits.conv_geometry(conv)
    assert g == dict(oc=5, ic=4, ih=9, iw=7, oh=5, ow=7, kh=3, kw=2, stride_h=2, stride_w=1, pad_top=1, pad_left=0)
    assert limits.below_one(g) == "" and limits.below_one({**g, "ow": 0, "kh": -1}) == "ow 0, kh -1"
    assert limits.window_extent(g) == max(4 * 2 + 3, 6 * 1 + 2)


def test_positions_read_counts_what_windows_cover():
    for _ in range(200):
        size, stride, window, pad = (int(v) for v in RNG.integers(1, 12, 4))
        pad = min(pad, window - 1)
        out = max(1, (size + 2 * pad - window) // stride + 1)
        covered = np.zeros(size, bool)
        for o in range(out):
            covered[max(o * stride - pad, 0):max(o * stride - pad + window, 0)] = True
        assert tiling.positions_read(size, out, stride, window, pad) == covered.sum()


# -- Relay passes --------------------------------------------------------------------------------
def nhwc_conv(data, k):
    weight = relay.const(RNG.standard_normal((k, k, 4, 4)).astype("float32"))
    return relay.nn.conv2d(data, weight, channels=4, kernel_size=(k, k), padding=(k // 2, k // 2),
                           data_layout="NHWC", kernel_layout="HWIO")


def test_offload_layout_converts_only_accepted_convs_and_keeps_the_result():
    data = relay.var("data", shape=(1, 6, 6, 4))
    first = relay.nn.relu(relay.nn.bias_add(nhwc_conv(data, 3), bias(4), axis=3))
    mod = relay.transform.InferType()(tvm.IRModule.from_expr(relay.Function([data], nhwc_conv(first, 1))))
    inputs = {"data": RNG.standard_normal((1, 6, 6, 4)).astype("float32")}
    expected = run_cpu(mod, inputs)

    wide = lambda conv: int(conv.attrs.kernel_size[0]) == 3  # only the 3x3 conv
    converted = layout.offload_layout_pass(wide, "NCHW", "OIHW")(mod)
    convs = {}
    relay.analysis.post_order_visit(converted["main"], lambda e: convs.setdefault(str(e.attrs.data_layout), []).append(e)
                                    if isinstance(e, relay.Call) and getattr(e.op, "name", "") == "nn.conv2d" else None)
    assert sorted(convs) == ["NCHW", "NHWC"] and str(convs["NCHW"][0].attrs.kernel_layout) == "OIHW"
    np.testing.assert_allclose(run_cpu(converted, inputs), expected, rtol=1e-5, atol=1e-5)
    untouched = layout.offload_layout_pass(lambda conv: False, "NCHW", "OIHW")(mod)
    assert tvm.ir.structural_equal(untouched["main"], mod["main"])
    probe = layout.as_kernel_layout(convs["NCHW"][0], "NHWC", "HWIO")
    assert [int(d) for d in probe.checked_type.shape] == [1, 6, 6, 4]


@pytest.mark.parametrize("op", [relay.add, relay.maximum])
def test_offload_layout_carries_a_constant_first_operand(op):
    """add(c, conv) and maximum(c, conv) run in the kernel's layout, as with the constant second;
    issue 32: swapping the operands with a TVM Array's [::-1] left none, and InferType failed."""
    conv = float_conv(shape=(1, 4, 6, 6), padding=(1, 1))
    body = op(relay.const(np.float32(0.5)), conv)
    mod = relay.transform.InferType()(tvm.IRModule.from_expr(relay.Function(relay.analysis.free_vars(body), body)))
    inputs = {"data": RNG.standard_normal((1, 4, 6, 6)).astype("float32")}
    converted = layout.offload_layout_pass(lambda conv: True, "NHWC", "HWIO")(mod)
    assert ops(converted["main"]) == ["layout_transform", "nn.conv2d", op.__name__, "layout_transform"]
    np.testing.assert_allclose(run_cpu(converted, inputs), run_cpu(mod, inputs), rtol=1e-5, atol=1e-5)


def test_fold_weights_makes_cast_weights_constants():
    weight = RNG.standard_normal((4, 4, 3, 3)).astype("float16")
    data = relay.var("data", shape=(1, 4, 8, 8))
    conv = relay.nn.conv2d(data, relay.cast(relay.const(weight), "float32"), channels=4, kernel_size=(3, 3))
    mod = layout.fold_weights_pass()(tvm.IRModule.from_expr(relay.Function([data], conv)))
    assert ops(mod["main"]) == ["nn.conv2d"]
    assert conv_patterns.conv2d_alone_pattern().match(mod["main"].body)


def test_batch_norm_folds_into_the_conv():
    data = relay.var("data", shape=(1, 4, 8, 8))
    conv = relay.nn.bias_add(relay.nn.conv2d(data, relay.const(RNG.standard_normal((4, 4, 3, 3)).astype("float32")),
                                             channels=4, kernel_size=(3, 3)), bias(4))
    gamma, beta, mean = (bias(4) for _ in range(3))
    var = relay.const(RNG.uniform(0.5, 2.0, 4).astype("float32"))
    mod = tvm.IRModule.from_expr(relay.Function([data], relay.nn.batch_norm(conv, gamma, beta, mean, var)[0]))
    folded = fold.fold_batch_norm_pass()(mod)
    assert "nn.batch_norm" not in ops(folded["main"]) and conv_patterns.conv2d_pattern().match(folded["main"].body)
    inputs = {"data": RNG.standard_normal((1, 4, 8, 8)).astype("float32")}
    np.testing.assert_allclose(run_cpu(folded, inputs), run_cpu(mod, inputs), rtol=1e-4, atol=1e-5)


def test_flattened_prelu_becomes_one_per_channel_prelu():
    data = relay.var("data", shape=(1, 5, 5, 3))
    alpha = relay.const(np.array([0.1, 0.2, 0.3], "float32"))
    flat = relay.nn.prelu(relay.reshape(data, [-1]), relay.reshape(relay.broadcast_to(alpha, (1, 5, 5, 3)), [-1]), axis=0)
    mod = tvm.IRModule.from_expr(relay.Function([data], relay.reshape(flat, (1, 5, 5, 3))))
    unflat = fold.unflatten_prelu_pass()(mod)
    assert ops(unflat["main"]) == ["nn.prelu"] and int(unflat["main"].body.attrs.axis) == 3
    inputs = {"data": RNG.standard_normal((1, 5, 5, 3)).astype("float32")}
    np.testing.assert_array_equal(run_cpu(unflat, inputs), run_cpu(mod, inputs))


def offloaded_conv_module(constant_bias=False):
    """main calling one function offloaded to "npu": relu(bias_add(conv2d NHWC/HWIO)), its tensors parameters."""
    ifmap, weights = relay.var("ifmap", shape=(1, 6, 6, 3)), relay.var("weights", shape=(3, 3, 3, 4))
    b = bias(4) if constant_bias else relay.var("bias", shape=(4,))
    body = relay.nn.relu(relay.nn.bias_add(relay.nn.conv2d(ifmap, weights, channels=4, kernel_size=(3, 3), strides=(2, 1),
                                                           padding=(1, 0, 1, 0), data_layout="NHWC",
                                                           kernel_layout="HWIO"), b, axis=3))
    params = [ifmap, weights] + ([] if constant_bias else [b])
    func = relay.Function(params, body).with_attr("Compiler", "npu").with_attr("global_symbol", "npu_main_0")
    mod = relay.transform.InferType()(tvm.IRModule({relay.GlobalVar("npu_main_0"): func}))  # typed before it is called
    gvar = mod.get_global_var("npu_main_0")
    data = relay.var("data", shape=(1, 6, 6, 3))
    weight = RNG.standard_normal((3, 3, 3, 4)).astype("float32")
    args = [data, relay.const(weight)] + ([] if constant_bias else [bias(4)])
    mod["main"] = relay.Function([data], relay.Call(gvar, args))
    return relay.transform.InferType()(mod), gvar, weight


def test_describe_pass_records_roles_window_and_clamp():
    mod, gvar, _ = offloaded_conv_module()
    described = describe.describe_pass("npu", "NpuLayer", "NpuDescribe")(mod)[gvar].attrs["NpuLayer"]
    assert {k: int(described[k]) for k in ("ifmap", "weights", "bias", "pad_top", "pad_left", "depthwise")} == dict(
        ifmap=0, weights=1, bias=2, pad_top=1, pad_left=0, depthwise=0)
    assert str(described["layout"]) == "nhwc" and [int(s) for s in described["strides"]] == [2, 1]
    assert (float(described["lo"]), float(described["hi"])) == (0.0, FLT_MAX)
    assert "slope" not in described and "residual" not in described
    inner, _, _ = offloaded_conv_module(constant_bias=True)
    with pytest.raises(Exception, match="npu_main_0: its bias tensor is computed inside the offloaded function"):
        describe.describe_pass("npu", "NpuLayer", "NpuDescribe")(inner)


def test_pack_weights_permutes_the_constant_at_the_call_site():
    mod, gvar, weight = offloaded_conv_module()
    packed = layout.pack_weights_pass("npu", "OIHW")(mod)
    assert [int(d) for d in packed[gvar].params[1].checked_type.shape] == [4, 3, 3, 3]
    argument = packed["main"].body.args[1]
    np.testing.assert_array_equal(argument.data.numpy(), np.transpose(weight, (3, 2, 0, 1)))


# -- the import graph ----------------------------------------------------------------------------
BACKENDS = sorted(p.name for p in ROOT.glob("uma_*") if (p / p.name / "__init__.py").is_file())  # project/package


def imported(path):
    """Top-level names of the modules ``path`` imports (absolute imports, at any depth of the file)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_no_backend_imports_another():
    assert BACKENDS == ["uma_chocolate", "uma_qvanilla", "uma_strawberry", "uma_vanilla"]
    crossing = [f"{path.relative_to(ROOT)} imports {name}" for backend in BACKENDS
                for path in sorted((ROOT / backend).rglob("*.py"))
                for name in sorted(imported(path)) if name.startswith("uma_") and name != backend]
    assert crossing == []


def test_the_framework_imports_no_backend():
    files = sorted((ROOT / "tvm_extension").rglob("*.py"))
    assert ROOT / "tvm_extension" / "kit" / "conv_patterns.py" in files
    crossing = [f"{path.relative_to(ROOT)} imports {name}" for path in files
                for name in sorted(imported(path)) if name.startswith("uma_")]
    assert crossing == []


def test_a_backend_includes_only_its_own_c_and_the_kits():
    """Each backend folder stands alone: its codegen names its own C folder and the kit's (loading
    no other backend), its C includes only files of those two folders, and no backend names
    another's data folder."""
    assert [p for b in BACKENDS for p in sorted((ROOT / b).rglob("*.py")) if 'data_folder("uma_' in p.read_text()] == []
    kit_c = ROOT / "tvm_extension" / "kit" / "c"
    for backend in BACKENDS:
        own = ROOT / backend / backend / "c"
        script = (f"import sys\nfrom {backend}.codegen import gen_includes\nincludes = gen_includes()\n"
                  f"print(sorted(m.split('.')[0] for m in sys.modules if m.startswith('uma_')))\nprint(includes)\n")
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=ROOT)
        loaded, *includes = done.stdout.splitlines()
        assert set(eval(loaded)) == {backend}, loaded
        headers = [Path(line.split('"')[1]) for line in includes if line.startswith("#include")]
        assert {h.parent for h in headers} == {own, kit_c} and all(h.is_file() for h in headers), headers
        for source in sorted(p for p in own.rglob("*") if p.is_file()):  # c/reference/ too
            for name in re.findall(r'^#include "([^"]+)"', source.read_text(), re.MULTILINE):
                assert (own / name).is_file() or (kit_c / name).is_file(), f"{source.name} includes {name}"


KIT_DRIVER = r"""
#include <float.h>
#include <stdio.h>
#include <stdlib.h>

#include "kit_conv_f32.h"
#include "kit_requantize.h"

int main(void) {
  /* statuses: a NULL geometry, depthwise ic != oc, too many taps, the order of two problems, check() */
  float in[81], w[81], out[81];
  for (int i = 0; i < 81; ++i) in[i] = (float)(i % 7 - 3), w[i] = (float)(i % 5 - 2);
  const kit_conv_f32_geometry ok = {1, 1, 9, 9, 1, 1, 9, 9, 1, 1, 0, 0}, wide = {2, 1, 9, 9, 1, 1, 9, 9, 1, 1, 0, 0};
  const kit_conv_f32_geometry bad = {0, 1, 9, 9, 1, 1, 9, 9, 1, 1, 0, 0};
  /* the scratch from the caller: the size get_buffer_size names, or one byte short */
  const int32_t size = kit_conv_f32_get_buffer_size(&ok, 0, 0);
  void* buf = malloc((size_t)size);
  const kit_conv_f32_context ctx = {buf, size}, short_ctx = {buf, size - 1}, no_buf = {NULL, size};
  printf("%d %d %d %d %d %d %d %d %d %d\n", (int)kit_conv2d_f32_nchw(&ctx, in, w, NULL, NULL, NULL, out, NULL, -FLT_MAX, FLT_MAX),
         (int)kit_depthwise_conv2d_f32_nhwc(&ctx, in, w, NULL, NULL, NULL, out, &wide, -FLT_MAX, FLT_MAX),
         (int)kit_depthwise_conv2d_f32_nchw(&ctx, in, w, NULL, NULL, NULL, out, &ok, -FLT_MAX, FLT_MAX),
         (int)kit_conv2d_f32_nhwc(&ctx, NULL, w, NULL, NULL, NULL, out, &bad, -FLT_MAX, FLT_MAX),
         (int)kit_conv_f32_check(in, w, out, &ok, 1.0f, 0.0f, 0), (int)kit_conv_f32_check(in, w, out, &ok, 0, 1, 0),
         (int)kit_conv2d_f32_nchw(NULL, in, w, NULL, NULL, NULL, out, &ok, -FLT_MAX, FLT_MAX),
         (int)kit_conv2d_f32_nchw(&short_ctx, in, w, NULL, NULL, NULL, out, &ok, -FLT_MAX, FLT_MAX),
         (int)kit_conv2d_f32_nchw(&no_buf, in, w, NULL, NULL, NULL, out, &ok, -FLT_MAX, FLT_MAX),
         (int)kit_conv_f32_get_buffer_size(&bad, 0, 0));
  /* a 9x9 dense conv of small integers: exact in float */
  const int32_t status = kit_conv2d_f32_nchw(&ctx, in, w, NULL, NULL, NULL, out, &ok, -FLT_MAX, FLT_MAX);
  printf("%d %.1f\n", (int)status, out[0]);
  free(buf);
  long long acc, multiplier, shift;
  while (scanf("%lld %lld %lld", &acc, &multiplier, &shift) == 3)
    printf("%ld %ld\n", (long)kit_requantize((int32_t)acc, (int32_t)multiplier, (int32_t)shift),
           (long)kit_requantize_tflite((int32_t)acc, (int32_t)multiplier, (int32_t)shift));
  return 0;
}
"""


def test_kit_c_library_under_sanitizers(tmp_path):
    """The kit's C (tvm_extension/kit/c) built alone with -fsanitize=address,undefined: the conv
    engine's status codes in their order (a missing or short scratch too) and one exact result; both requantizations against the
    Python references over the whole shift range, at int32's edges."""
    kit_c = ROOT / "tvm_extension" / "kit" / "c"
    codes = limits.c_limits(kit_c / "kit_conv_f32.h", "KIT_CONV_F32_")
    (tmp_path / "driver.c").write_text(KIT_DRIVER)
    subprocess.run(["gcc", "-std=c99", "-O1", "-Wall", "-Wextra", "-Werror", "-pedantic", "-fsanitize=address,undefined",
                    "-fno-sanitize-recover=all", f"-I{kit_c}", "-o", str(tmp_path / "driver"), str(tmp_path / "driver.c"),
                    str(kit_c / "kit_conv_f32.c")], check=True)
    edges = [0, 1, -1, 3, -3, (1 << 31) - 1, -(1 << 31), 1 << 30, -(1 << 30) - 1]
    cases = [(a, m, s) for a in edges + list(RNG.integers(-(1 << 31), 1 << 31, 4))
             for m in [1 << 30, (1 << 31) - 1, 1518500250, -(1 << 31)] for s in range(-31, 31)]
    done = subprocess.run([str(tmp_path / "driver")], input="".join(f"{a} {m} {s}\n" for a, m, s in cases),
                          capture_output=True, text=True, check=True)
    assert done.stderr == ""
    statuses, conv, *requantized = done.stdout.splitlines()
    expected = ("EINVAL", "ESIZE", "ETAPS", "EINVAL", "ECLAMP", "OK", "EBUFFER", "EBUFFER", "EBUFFER")
    assert statuses.split() == [str(codes[c]) for c in expected] + ["0"]  # no buffer size for a refused geometry
    weights = np.arange(81) % 5 - 2
    assert conv.split() == [str(codes["OK"]), f"{float(np.dot(np.arange(81) % 7 - 3, weights)):.1f}"]
    for (a, m, s), line in zip(cases, requantized, strict=True):
        assert [int(v) for v in line.split()] == [upward_reference(int(a), m, s), int(tflite_reference(a, m, s))], (a, m, s)
