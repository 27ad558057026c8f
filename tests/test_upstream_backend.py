"""A backend written only against upstream UMA's API, dropped in unchanged.

The backend below is what a hardware team would write for upstream TVM's UMA: patterns,
an operator strategy, a TIR pass replacing a block by a call of its C API, a target
attribute and the C ``includes`` hook naming its library by absolute path.
"""
import textwrap

import numpy as np
import pytest
pytest.importorskip("tvm.relay", reason="the Relay engine's tests (hhb-tvm, Python 3.10): not installed here")

from conftest import MODELS, mlf_sources, onnx_reference, run_tvmc
from tvm_extension.testing import random_inputs
from tvm_extension.mlf import build

BACKEND = '''
import pathlib

import tvm
from tvm import relay, tir, topi
from tvm.relay.backend.contrib.uma.api.utils import PassPhase
from tvm.relay.backend.contrib.uma.backend import UMABackend
from tvm.relay.dataflow_pattern import is_op, wildcard
from tvm.relay.op import op as _op
from tvm.relay.op.strategy.generic import wrap_topi_schedule

from tvm_extension.api import TVMExtension

LIB = pathlib.Path(__file__).parent / "clib"


@relay.op.strategy.override_native_generic_func("tiny_relu_strategy")
def relu_strategy(attrs, inputs, out_type, target):
    strategy = _op.OpStrategy()
    strategy.add_implementation(
        lambda attrs, inputs, out_type: [topi.nn.relu(inputs[0])],
        wrap_topi_schedule(topi.generic.schedule_injective),
        name="tiny_relu.generic",
    )
    return strategy


@tvm.tir.transform.prim_func_pass(opt_level=2)
class ReluToCall:
    def transform_function(self, func, mod, ctx):
        (data, out) = [func.buffer_map[p] for p in func.params]
        size = 1
        for dim in data.shape:
            size *= dim
        call = tir.call_extern("int32", "tiny_relu", data.data, out.data, size)
        return func.with_body(tir.Evaluate(call))


class TinyReluBackend(UMABackend):
    def __init__(self):
        super().__init__()
        self._register_target_attr("lanes", default=4)
        self._register_pattern("relu", is_op("nn.relu")(wildcard()))
        self._register_operator_strategy("nn.relu", relu_strategy, plevel=11)
        self._register_tir_pass(PassPhase.TIR_PHASE_0, ReluToCall())
        self._register_codegen(fmt="c", includes=lambda: f'#include "{LIB / "tiny_relu.h"}"\\n')

    @property
    def target_name(self):
        return "tiny_relu"


class TinyExtension(TVMExtension):
    def uma_backends(self):
        return [TinyReluBackend()]
'''


@pytest.mark.quick
def test_upstream_style_backend(tmp_path):
    package = tmp_path / "ext" / "tvm_extension" / "tiny"
    (package / "clib").mkdir(parents=True)
    (package / "__init__.py").write_text(BACKEND)
    (package / "clib" / "tiny_relu.h").write_text("#include <stdint.h>\nint32_t tiny_relu(float* in, float* out, int n);\n")
    (package / "clib" / "tiny_relu.c").write_text(textwrap.dedent("""\
        #include "tiny_relu.h"
        int32_t tiny_relu(float* in, float* out, int n) {
          for (int i = 0; i < n; ++i) out[i] = in[i] > 0.0f ? in[i] : 0.0f;
          return 0;
        }
    """))
    out = tmp_path / "o.tar"
    done = run_tvmc("compile", "--target", "tiny_relu", "--target-tiny_relu-lanes", "8",
                    "--experimental-tvm-extension", tmp_path / "ext", MODELS / "cnn.onnx", "-f", "mlf", "-o", out)
    assert done.returncode == 0, done.stderr
    sources = mlf_sources(out)
    assert "./codegen/host/src/tiny_relu.c" in sources and "./codegen/host/include/tiny_relu.h" in sources
    offloaded = [t for t in sources.values() if "// offloaded to tiny_relu" in t]
    assert len(offloaded) == 3 and all("tiny_relu(" in t and str(tmp_path) not in t for t in offloaded)
    inputs = random_inputs(MODELS / "cnn.onnx", seed=9)
    got = build(out, tmp_path / "b").run(inputs)[0]["output"]
    np.testing.assert_allclose(got, onnx_reference(MODELS / "cnn.onnx", inputs)[0], rtol=1e-4, atol=1e-5)
