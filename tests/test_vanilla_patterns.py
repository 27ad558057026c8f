"""Vanilla's pattern offloads exactly the convolutions its kernel computes."""
import numpy as np
import pytest
import tvm
from tvm import relay

from tvm_extension.uma import register_backend
from uma_vanilla import VanillaAcceleratorBackend


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
    # TFLite's layout: converted to NCHW before partitioning
    ("NHWC", (1, 8, 8, 4), (3, 3, 4, 8), dict(padding=(1, 1), data_layout="NHWC", kernel_layout="HWIO")),
])
def test_offloaded(vanilla, case, data, weight, attrs):
    assert offloaded(vanilla, data, weight, **attrs) == 1, case


@pytest.mark.parametrize("case,data,weight,dtype,attrs", [
    ("stride 2", (1, 4, 8, 8), (8, 4, 3, 3), "float32", dict(padding=(1, 1), strides=(2, 2))),
    ("dilation", (1, 4, 8, 8), (8, 4, 3, 3), "float32", dict(padding=(2, 2), dilation=(2, 2))),
    ("groups", (1, 4, 8, 8), (4, 1, 3, 3), "float32", dict(padding=(1, 1), groups=4)),
    ("valid padding", (1, 4, 8, 8), (8, 4, 3, 3), "float32", dict()),
    ("asymmetric padding", (1, 4, 8, 8), (8, 4, 3, 3), "float32", dict(padding=(1, 1, 0, 0))),
    ("even kernel", (1, 4, 8, 8), (8, 4, 2, 2), "float32", dict(padding=(1, 1, 0, 0))),
    ("batch 2", (2, 4, 8, 8), (8, 4, 3, 3), "float32", dict(padding=(1, 1))),
    ("int8", (1, 4, 8, 8), (8, 4, 3, 3), "int8", dict(padding=(1, 1), out_dtype="int32")),
    ("9x9 above max_kernel_size", (1, 4, 16, 16), (8, 4, 9, 9), "float32", dict(padding=(4, 4))),
])
def test_stays_on_cpu(vanilla, case, data, weight, dtype, attrs):
    assert offloaded(vanilla, data, weight, dtype, **attrs) == 0, case
