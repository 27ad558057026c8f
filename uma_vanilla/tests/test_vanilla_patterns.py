"""Vanilla's pattern offloads exactly the convolutions its kernel computes."""
import numpy as np
import pytest

pytest.importorskip("tvm.relay", reason="Relay patterns (hhb-tvm); on apache-tvm test_vanilla_either_engine.py runs the example end to end")

import tvm  # noqa: E402  (after the engine check)
from tvm import relay

from tvm_extension.testing import assert_registers_target, assert_relay_free
from tvm_extension.uma import register_backend
from uma_vanilla import VanillaAcceleratorBackend
from uma_vanilla.buffer_size import buffer_size


@pytest.fixture(scope="module")
def vanilla():
    return register_backend(VanillaAcceleratorBackend())


def offloaded(backend, data_shape, weight_shape, dtype="float32", **conv_attrs):
    data = relay.var("data", shape=data_shape, dtype=dtype)
    weight = relay.const(np.ones(weight_shape, dtype))
    conv = relay.nn.conv2d(data, weight, **conv_attrs)
    mod = backend.partition(tvm.IRModule.from_expr(relay.Function([data], conv)))
    return sum(
        1 for _, f in mod.functions.items()
        if f.attrs and "Compiler" in f.attrs and f.attrs["Compiler"] == "vanilla_accelerator"
    )


@pytest.mark.parametrize("case,data,weight,attrs", [
    ("3x3 same", (1, 4, 8, 8), (8, 4, 3, 3), dict(padding=(1, 1))),
    ("1x1", (1, 4, 8, 8), (8, 4, 1, 1), dict()),
    ("5x3 same", (1, 2, 9, 7), (3, 2, 5, 3), dict(padding=(2, 1))),
    # TFLite's layout: offloaded as it is (Vanilla's DMA reads NHWC)
    ("NHWC", (1, 8, 8, 4), (3, 3, 4, 8), dict(padding=(1, 1), data_layout="NHWC", kernel_layout="HWIO")),
    # the engine takes any window
    ("stride 2", (1, 4, 8, 8), (8, 4, 3, 3), dict(padding=(1, 1), strides=(2, 2))),
    ("valid padding", (1, 4, 8, 8), (8, 4, 3, 3), dict()),
    ("asymmetric padding", (1, 4, 8, 8), (8, 4, 3, 3), dict(padding=(1, 1, 0, 0))),
    ("even kernel", (1, 4, 8, 8), (8, 4, 2, 2), dict(padding=(1, 1, 0, 0))),
    ("depthwise", (1, 4, 8, 8), (4, 1, 3, 3), dict(padding=(1, 1), groups=4)),
    ("9x1: 9 taps fit the window buffer", (1, 4, 20, 1), (4, 1, 9, 1), dict(padding=(4, 0), groups=4)),
    ("depthwise NHWC", (1, 8, 8, 4), (3, 3, 4, 1), dict(padding=(1, 1), groups=4, data_layout="NHWC", kernel_layout="HWOI")),
])
def test_offloaded(vanilla, case, data, weight, attrs):
    assert offloaded(vanilla, data, weight, **attrs) == 1, case


@pytest.mark.parametrize("case,data,weight,dtype,attrs", [
    ("dilation", (1, 4, 8, 8), (8, 4, 3, 3), "float32", dict(padding=(2, 2), dilation=(2, 2))),
    ("groups", (1, 4, 8, 8), (8, 2, 3, 3), "float32", dict(padding=(1, 1), groups=2)),
    ("channel multiplier", (1, 4, 8, 8), (8, 1, 3, 3), "float32", dict(padding=(1, 1), groups=4)),
    ("batch 2", (2, 4, 8, 8), (8, 4, 3, 3), "float32", dict(padding=(1, 1))),
    ("int8", (1, 4, 8, 8), (8, 4, 3, 3), "int8", dict(padding=(1, 1), out_dtype="int32")),
    ("9x9: 81 taps above max_kernel_size 7's 49", (1, 4, 16, 16), (8, 4, 9, 9), "float32", dict(padding=(4, 4))),
])
def test_stays_on_cpu(vanilla, case, data, weight, dtype, attrs):
    assert offloaded(vanilla, data, weight, dtype, **attrs) == 0, case


def partition_ops(backend, expr, *inputs):
    """(operators offloaded, operators left in main) of partitioning ``expr``; of an offloaded
    function, those of its output (its second output is the C's scratch, see test_scratch_is_an_output)."""
    mod = backend.partition(tvm.IRModule.from_expr(relay.Function(list(inputs), expr)))
    ops = lambda f: sorted(c.op.name for c in _calls(f) if isinstance(c.op, tvm.ir.Op))
    output = lambda f: f.body.fields[0] if isinstance(f.body, relay.Tuple) else f
    offloaded = [op for _, f in mod.functions.items() if f.attrs and "Compiler" in f.attrs for op in ops(output(f))]
    return sorted(offloaded), ops(mod["main"])


def _calls(func):
    calls = []
    relay.analysis.post_order_visit(func, lambda e: calls.append(e) if isinstance(e, relay.Call) else None)
    return calls


def test_nhwc_needs_no_layout_conversion(vanilla):
    data = relay.var("data", shape=(1, 8, 8, 4))
    conv = relay.nn.conv2d(data, relay.const(np.ones((3, 3, 4, 8), "float32")), padding=(1, 1),
                           data_layout="NHWC", kernel_layout="HWIO")
    conv2 = relay.nn.conv2d(relay.nn.relu(conv), relay.const(np.ones((1, 1, 8, 8), "float32")),
                            data_layout="NHWC", kernel_layout="HWIO")
    offloaded, on_cpu = partition_ops(vanilla, conv2, data)
    # inside each function only the weights are permuted (a compile-time constant outside)
    assert offloaded == ["layout_transform", "layout_transform", "nn.conv2d", "nn.conv2d", "nn.relu"]
    assert on_cpu == [], on_cpu


def test_scratch_is_an_output(vanilla):
    """Each offloaded function returns (its output, the C entry's scratch of _get_buffer_size bytes),
    so the AOT planner puts the scratch in the workspace; main takes the output."""
    data = relay.var("data", shape=(1, 4, 8, 8))
    conv = relay.nn.conv2d(data, relay.const(np.ones((4, 4, 3, 3), "float32")), padding=(1, 1))
    depthwise = relay.nn.conv2d(conv, relay.const(np.ones((4, 1, 3, 3), "float32")), padding=(1, 1), groups=4)
    mod = vanilla.partition(tvm.IRModule.from_expr(relay.Function([data], depthwise)))
    geometry = dict(ic=4, ih=8, iw=8, oc=4, oh=8, ow=8, kh=3, kw=3, stride_h=1, stride_w=1, pad_top=1, pad_left=1)
    expected = sorted(buffer_size(dw, "nchw", geometry) for dw in (False, True))
    functions = [f for _, f in mod.functions.items() if f.attrs and "Compiler" in f.attrs]
    types = [f.ret_type.fields for f in functions]
    assert [t[0].concrete_shape for t in types] == [(1, 4, 8, 8)] * 2
    assert sorted(t[1].concrete_shape[0] for t in types) == expected and {t[1].dtype for t in types} == {"int8"}
    assert min(expected) > 0 and expected[0] != expected[1]  # two sizes: each function sized for its own conv
    assert mod["main"].checked_type.ret_type.concrete_shape == (1, 4, 8, 8)


@pytest.mark.parametrize("case,residual_first,residual_shape,offloaded_adds", [
    ("skip after the conv", False, (1, 4, 8, 8), 1),
    ("skip before the conv", True, (1, 4, 8, 8), 1),
    ("broadcast: conv and bias still offloaded", False, (1, 1, 1, 8), 0),
])
def test_residual(vanilla, case, residual_first, residual_shape, offloaded_adds):
    data, skip = relay.var("data", shape=(1, 4, 8, 8)), relay.var("skip", shape=residual_shape)
    conv = relay.nn.conv2d(data, relay.const(np.ones((4, 4, 3, 3), "float32")), padding=(1, 1))
    biased = relay.nn.bias_add(conv, relay.const(np.ones(4, "float32")))
    out = relay.nn.relu(relay.add(skip, biased) if residual_first else relay.add(biased, skip))
    offloaded, on_cpu = partition_ops(vanilla, out, data, skip)
    assert offloaded.count("nn.conv2d") == 1 and offloaded.count("nn.bias_add") == 1, case
    assert offloaded.count("add") == offloaded_adds and on_cpu.count("add") == 1 - offloaded_adds, case
    assert ("nn.relu" in offloaded) == bool(offloaded_adds), case


def test_residual_without_bias_stays_on_cpu(vanilla):
    data = relay.var("data", shape=(1, 4, 8, 8))
    conv = relay.nn.conv2d(data, relay.const(np.ones((4, 4, 3, 3), "float32")), padding=(1, 1))
    offloaded, on_cpu = partition_ops(vanilla, relay.add(conv, data), data)
    assert offloaded == ["nn.conv2d"] and on_cpu == ["add"]


@pytest.mark.parametrize("case,layout,slope_shape,axis,prelu_offloaded", [
    ("per channel, NCHW", "NCHW", (8,), 1, True),
    ("per channel, NHWC", "NHWC", (8,), 3, True),
    ("along the wrong axis: conv and bias still offloaded", "NCHW", (6,), 2, False),
])
def test_prelu(vanilla, case, layout, slope_shape, axis, prelu_offloaded):
    shape, kernel = ((1, 4, 6, 6), "OIHW") if layout == "NCHW" else ((1, 6, 6, 4), "HWIO")
    weight_shape = (8, 4, 3, 3) if kernel == "OIHW" else (3, 3, 4, 8)
    data = relay.var("data", shape=shape)
    conv = relay.nn.conv2d(data, relay.const(np.ones(weight_shape, "float32")), padding=(1, 1),
                           data_layout=layout, kernel_layout=kernel)
    biased = relay.nn.bias_add(conv, relay.const(np.ones(8, "float32")), axis=layout.index("C"))
    out = relay.nn.prelu(biased, relay.const(np.full(slope_shape, 0.25, "float32")), axis=axis)
    offloaded, on_cpu = partition_ops(vanilla, out, data)
    assert "nn.conv2d" in offloaded and "nn.bias_add" in offloaded, case
    assert ("nn.prelu" in offloaded) == prelu_offloaded and ("nn.prelu" in on_cpu) != prelu_offloaded, case


def test_target_passes_and_codegen_import_without_relay():
    """The C library, the target's attributes and the TIR pass need no Relay (another engine may
    use them); the backend registers target.py's attributes and bounds."""
    assert_relay_free("uma_vanilla", "buffer_size")
    from uma_vanilla import target
    assert target.ATTRIBUTES == {"max_kernel_size": 7, "cflags": ""} and target.ATTR_RANGES == {"max_kernel_size": (1, 8)}
    assert_registers_target(VanillaAcceleratorBackend(), target)
