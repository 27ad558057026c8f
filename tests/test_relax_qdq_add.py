"""ONNX's quantized add (QDQ: DequantizeLinear x2 -> Add [-> Relu] -> QuantizeLinear) left on the
CPU, after an offloaded QDQ conv, compiles to the same int8 outputs on both engines (#47); so do
a quantized Sub and Mul.

An int8 backend's Relay side runs FakeQuantizationToInteger over the model: the add becomes
``qnn.add``, which TVM computes as each input requantized to the output's scale (rounding UPWARD)
and the two summed: two roundings (``qnn.subtract`` alike; ``qnn.mul`` one rounding, ties upward).
ONNX's definition (``onnx.reference``, ONNX Runtime) rounds once, half to even, the float result of
the dequantized inputs, which is what the Relax frontend imports; the Relax engine computes the QNN
operators' arithmetic instead (``tvm_extension.relax.qdq_binary``), so both engines' MLFs agree bit
for bit and are within one step of the references, a step that falls on a few percent of an add's
elements, not only on ties.  Without an int8 backend (``--target c``) neither engine rewrites the
add: both compute ONNX's float arithmetic, as the references do.
"""
import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import onnxruntime_reference, run_tvmc
from test_relax_engine import relax_engine
from tvm_extension.mlf import build
from tvm_extension.testing import PLAIN_C

SHAPE = (1, 8, 10, 10)


def qdq_residual(path, seed: int, other: str, relu: bool, same_as_conv=False, op="Add", scales=None):
    """A QDQ conv (per-channel weights, bias, ReLU) whose int8 output is added to (``op``: Add, or
    Sub, Mul) ``other``: the
    model's input (``input``, its own scale and zero point) or an int8 constant per channel
    (``const_first``, ``const_last``: the Add's operand order), then [Relu], quantized again with a
    third scale and zero point (``same_as_conv``: the conv's, so that operand is only widened;
    ``scales``: the input's, the conv's and the output's, else random)."""
    rng = np.random.default_rng(seed)
    c = SHAPE[1]
    sx, sy, sa = (np.float32(rng.uniform(*r)) for r in ((0.02, 0.08), (0.05, 0.3), (0.05, 0.3)))
    zx, zy, za = (np.int8(z) for z in rng.integers(-10, 11, 3))
    if scales is not None:
        sx, sy, sa = (np.float32(s) for s in scales)
    if same_as_conv:
        sa, za = sy, zy
    sw = rng.uniform(0.005, 0.02, c).astype(np.float32)
    k = rng.standard_normal((c, 1, 1)).astype(np.float32)
    sk = np.float32(np.abs(k).max() / 127)
    arrays = dict(sx=sx, zx=zx, w=rng.integers(-127, 128, (c, c, 3, 3)).astype(np.int8), sw=sw,
                  zw=np.zeros(c, np.int8), b=rng.integers(-500, 500, c).astype(np.int32),
                  sb=(sx * sw).astype(np.float32), zb=np.zeros(c, np.int32), sy=sy, zy=zy, sa=sa, za=za)
    operand = ["x", "sx", "zx"] if other == "input" else ["k", "sk", "zk"]
    if other != "input":
        arrays.update(k=np.clip(np.round(k / sk), -127, 127).astype(np.int8), sk=sk, zk=np.int8(0))
    nodes = [helper.make_node("DequantizeLinear", ["x", "sx", "zx"], ["xf"]),
             helper.make_node("DequantizeLinear", ["w", "sw", "zw"], ["wf"], axis=0),
             helper.make_node("DequantizeLinear", ["b", "sb", "zb"], ["bf"], axis=0),
             helper.make_node("Conv", ["xf", "wf", "bf"], ["cf"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
             helper.make_node("Relu", ["cf"], ["cr"]),
             helper.make_node("QuantizeLinear", ["cr", "sy", "zy"], ["y"]),
             helper.make_node("DequantizeLinear", ["y", "sy", "zy"], ["yf"]),
             helper.make_node("DequantizeLinear", operand, ["of"]),
             helper.make_node(op, ["of", "yf"] if other == "const_first" else ["yf", "of"], ["s"])]
    if relu:
        nodes.append(helper.make_node("Relu", ["s"], ["sr"]))
    nodes.append(helper.make_node("QuantizeLinear", ["sr" if relu else "s", "sa", "za"], ["out"]))
    graph = helper.make_graph(nodes, "qdq_residual", [helper.make_tensor_value_info("x", TensorProto.INT8, SHAPE)],
                              [helper.make_tensor_value_info("out", TensorProto.INT8, SHAPE)],
                              [numpy_helper.from_array(np.asarray(v), name) for name, v in arrays.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    path.write_bytes(model.SerializeToString())
    return path


def both_engines(model, tmp_path, relax_target, relay_target):
    done = relax_engine("compile", str(model), "--target", relax_target, "-f", "mlf", "-o", "relax.tar", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    report = done.stdout
    done = run_tvmc("compile", *relay_target, model, "-f", "mlf", "-o", tmp_path / "relay.tar", reuse=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return report, [build(tmp_path / f"{name}.tar", tmp_path / name) for name in ("relax", "relay")]


def outputs(programs, model, inputs):
    got, relay = (next(iter(p.run(inputs)[0].values())) for p in programs)
    return got, relay, onnxruntime_reference(model, inputs)[0]


def steps(a, b) -> np.ndarray:
    return np.abs(a.astype(np.int32) - b.astype(np.int32))


CASES = {
    "add-input": ("qvanilla", dict(seed=0, other="input", relu=False)),
    "add-constant-first-relu": ("qvanilla", dict(seed=1, other="const_first", relu=True)),
    "add-constant-last": ("qvanilla", dict(seed=2, other="const_last", relu=False)),
    "add-relu-output-as-conv": ("qvanilla", dict(seed=3, other="input", relu=True, same_as_conv=True)),
    "add-chocolate": ("chocolate", dict(seed=4, other="input", relu=False)),
    "sub-input": ("qvanilla", dict(seed=5, other="input", relu=False, op="Sub")),
    # scales of powers of two: (x - zx) * (y - zy) / 16 falls on ties, which qnn.mul rounds upward
    "mul-input-relu-ties": ("qvanilla", dict(seed=6, other="input", relu=True, op="Mul",
                                             scales=(1 / 64, 1 / 4, 1 / 16))),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.relay  # compares with the Relay engine
def test_a_qdq_add_sub_or_mul_on_the_cpu_computes_as_on_the_relay_engine(tmp_path, case):
    """The conv offloaded on both engines, the add on the CPU as ``qnn.add``: outputs equal to the
    Relay engine's MLF bit for bit on three inputs; within one step of ONNX Runtime (which rounds
    the float sum once), a step the two roundings of ``qnn.add`` (``qnn.subtract``) do take on these
    models.  One rounding, ONNX's but for ties: ``qnn.mul``'s, and an add with the conv's scale and
    zero point at its output (that operand only widened)."""
    target, spec = CASES[case]
    model = qdq_residual(tmp_path / "residual.onnx", **spec)
    report, programs = both_engines(model, tmp_path, target, ["--target", target])
    assert re.search(rf"\[{target}\] offloaded: .*nn.conv2d x1.* in 1 functions", report), report
    # the report names the model's operators on the CPU, not the integer arithmetic they became
    on_cpu = next(line for line in report.splitlines() if line.startswith(f"[{target}] on the CPU: "))
    assert "astype" not in on_cpu and re.search(r"\b(add|subtract|multiply) x1\b", on_cpu), on_cpu
    rng, off_reference = np.random.default_rng(spec["seed"]), 0
    for run in range(3):
        inputs = {"x": rng.integers(-128, 128, SHAPE).astype(np.int8)}
        got, relay, reference = outputs(programs, model, inputs)
        assert np.unique(got).size > 10
        assert np.array_equal(got, relay), f"run {run}: {np.count_nonzero(got != relay)} values differ from Relay's"
        assert steps(got, reference).max() <= 1, f"run {run}"
        off_reference += np.count_nonzero(got != reference)
    if not spec.get("same_as_conv"):  # qnn.add's arithmetic, not ONNX's: what the Relay engine computes
        assert off_reference > 0


@pytest.mark.relay  # compares with the Relay engine
def test_without_an_int8_backend_both_engines_compute_onnx_float_add(tmp_path):
    """``--target c``: no FakeQuantizationToInteger on the Relay engine, no rewrite on the Relax
    engine: the QDQ conv and add in float on both, as ONNX Runtime computes them (equal here)."""
    model = qdq_residual(tmp_path / "residual.onnx", 0, "input", False)
    _, programs = both_engines(model, tmp_path, "c", PLAIN_C)
    rng = np.random.default_rng(5)
    for run in range(2):
        inputs = {"x": rng.integers(-128, 128, SHAPE).astype(np.int8)}
        got, relay, reference = outputs(programs, model, inputs)
        assert np.array_equal(got, relay) and np.array_equal(got, reference), f"run {run}"
