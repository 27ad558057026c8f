"""Chocolate for the Relax engine (apache-tvm 0.27: ``tvm-extension compile --target chocolate``).

The same layers as on the Relay engine, the same planner (``schedule.plan_layer``) and the same
program of DMA transfers and core calls, built by ``program.build`` (the Relay engine gets it
from ``tir.Schedule``; program.py says why not here), so the counters and outputs are the Relay
engine's:

* int8: TFLite's conv chains as TVM's Relax frontend imports them, ``dequantize -> conv2d ->
  [add] -> quantize -> [clip]`` (``tvm_extension.relax.qconv``), matched before constants are
  folded; the weights become the core's B matrix ``[kh*kw*ic][oc]`` and the weight scales'
  constant the table [bias with the input zero point folded in, multiplier, shift] of TVM's
  rounding from the float32 scale product, as ``patterns.prepare_core_conv`` computes it for Relay;
* float: ``conv2d -> [add(bias)] -> [relu | clip]`` (``tvm_extension.relax.patterns``), matched after
  folding; the weights and the bias packed as one constant ([depth + 1][oc], the bias last).  An
  NCHW conv (ONNX) is computed NHWC: its input and output transposed on the CPU around the
  core's program, as the Relay engine's layout pass does.

Dense convs only (a depthwise conv is no matrix product).  This module imports nothing of Relay.
"""
import logging
from typing import Optional

import numpy as np
import tvm

from tvm_extension.kit.limits import INT32_MAX, PTRDIFF_MAX, below_one
from tvm_extension.kit.quantization import channel_params, fold_bias
from tvm_extension.relax import patterns as fp, qconv, tvm_internals as tir
from tvm_extension.relax.backends import UserError

from . import program
from .codegen import gen_includes  # noqa: F401  (its C library, as for Relay)
from .schedule import ConvLayer, Core, plan_layer
from .target import ATTRIBUTES as TARGET_ATTRS, ATTR_RANGES as TARGET_ATTR_RANGES, NAME as TARGET  # noqa: F401
from .target import ConfigError, core_of

log = logging.getLogger("tvm_extension.chocolate")  # tvmc -v prints it, as the Relay engine's passes.py

DEPTHWISE = "depthwise (not a matrix product; stays on the CPU)"


def MATCH_BEFORE_FOLDING(mod) -> bool:  # pylint: disable=invalid-name  (the engine's name)
    """An int8 model's chains are matched before folding (their int8 weights and scales), float
    convs after (their weights and bias constants), in an int8 model too."""
    ops = []
    relax_ops = lambda e: ops.append(e.op.name) if isinstance(e, tvm.relax.Call) and hasattr(e.op, "name") else None
    for _, func in mod.functions_items():
        if isinstance(func, tvm.relax.Function):
            tvm.relax.analysis.post_order_visit(func.body, relax_ops)
    return "relax.dequantize" in ops


def _core(attrs) -> Core:
    try:
        return core_of(attrs)
    except ConfigError as err:
        raise UserError(str(err)) from None


def _window_problem(g: dict, elem: int) -> Optional[str]:
    """Why chocolate_configure would refuse this geometry (patterns.window_problem on Relay)."""
    if below_one(g):
        return f"{below_one(g)}: below 1 (CHOCOLATE_ELAYER)"
    kh, kw, top, left = g["kh"], g["kw"], g["pad_top"], g["pad_left"]
    if g["stride_h"] < 1 or g["stride_w"] < 1 or not (0 <= top < kh and 0 <= left < kw):
        return (f"padding top {top}, left {left} of a {kh}x{kw} window at stride {g['stride_h']}x{g['stride_w']} "
                "(the DMA pads 0 <= pad < the window: CHOCOLATE_ELAYER)")
    rows, depth = g["oh"] * g["ow"], kh * kw * g["ic"]
    if max(rows, depth, *g.values()) > INT32_MAX or max(g["ih"] * g["iw"] * g["ic"], max(rows, depth) * g["oc"]) * \
            elem > PTRDIFF_MAX:
        return "too large for the core's int32 configuration (CHOCOLATE_ELAYER)"
    return None


def _layer(g: dict, **stage) -> ConvLayer:
    return ConvLayer(**{k: g[k] for k in ("ih", "iw", "ic", "oh", "ow", "oc", "kh", "kw", "stride_h", "stride_w",
                                          "pad_top", "pad_left")}, **stage)


def _matrix(weights: np.ndarray, kernel_layout: str) -> np.ndarray:
    """The weights as the B matrix [kh*kw*ic][oc] (HWIO flattened)."""
    hwio = np.transpose(weights, [kernel_layout.index(axis) for axis in "HWIO"])
    return np.ascontiguousarray(hwio.reshape(-1, hwio.shape[3]))


# int8 chains -----------------------------------------------------------------------------------

def _quantized(chain, value):
    """(the chain's qconv.Quantization, its ConvLayer), or why the core does not compute it."""
    conv = chain["conv"]
    if qconv.is_depthwise(conv):
        return DEPTHWISE
    a = conv.attrs
    if (a.data_layout, a.kernel_layout, a.out_layout) != ("NHWC", "HWIO", "NHWC") or int(a.groups) != 1:
        return f"layout {a.data_layout}/{a.kernel_layout}, groups {int(a.groups)} (needs NHWC/HWIO, 1)"
    if [int(d) for d in a.dilation] != [1, 1] or int(conv.args[0].ty.shape[0]) != 1:
        return "dilation or batch other than 1"
    q = qconv.quantization(chain, value)
    if isinstance(q, str):
        return q
    if q.weight_zp != 0:
        return f"weight zero point {q.weight_zp} (the core multiplies raw int8 weights: needs 0)"
    g = qconv.conv_geometry(conv)
    return _window_problem(g, 1) or (q, _layer(g, input_zp=q.input_zp, output_zp=q.output_zp, act_min=q.act_min,
                                               act_max=q.act_max, dtype="int8"))


def _int8_problem(chain, value) -> Optional[str]:
    found = _quantized(chain, value)
    return found if isinstance(found, str) else None


def _table(chain, q, matrix, value) -> np.ndarray:
    """[bias - input_zp * sum(w), multiplier, shift] per output channel, TVM's rounding from the
    requantize's input scale as the Relay frontend makes it: float32(input scale * weight scale)."""
    s_in, s_out = value(chain["input"].args[1]), value(chain["quantize"].args[1])
    s_w = value(chain["weights"].args[1])
    scale = np.float32(np.asarray(s_in, np.float32).reshape(-1)[0]) * np.asarray(s_w, np.float32).reshape(-1)
    bias = fold_bias(q.bias, matrix.astype(np.int64).sum(axis=0), q.input_zp)
    return channel_params(bias, scale, s_out, matrix.shape[1])


# float convs -----------------------------------------------------------------------------------

def _float_problem(parts) -> Optional[str]:
    conv = parts.conv
    if int(conv.attrs.groups) != 1 and fp.is_depthwise(conv):
        return DEPTHWISE
    reason = fp.conv2d_problem(conv, 1 << 16, nhwc=True) or fp.stage_problem(parts)
    if reason:
        return reason
    if parts.residual is not None:
        return "residual add: not in the core's output stage"
    if parts.activation is not None and parts.activation.op.name == fp.PRELU:
        return "PReLU: not in the core's output stage (bias and clamp)"
    return _window_problem(fp.conv_geometry(conv), 4)


def _float_layer(parts) -> ConvLayer:
    lo, hi = fp.clamp_bounds(parts.activation)
    lo, hi = (-float("inf") if lo <= -fp.FLT_MAX else lo), (float("inf") if hi >= fp.FLT_MAX else hi)
    return _layer(fp.conv_geometry(parts.conv), dtype="float32", lo=lo, hi=hi)


# the engine's interface ------------------------------------------------------------------------

def patterns(attrs):
    """The int8 chains (``chocolate.conv2d_int8[_bias][_clip]``), then the float convs
    (``chocolate.conv2d[_bias][_relu|_clip]``), largest first."""
    _core(attrs)  # a bad combination of attributes: one line before anything runs
    return qconv.chain_patterns(TARGET, _int8_problem) + [
        p for p in fp.conv2d_patterns(TARGET, lambda parts: _float_problem(parts) is None)
        if "prelu" not in p.name and "residual" not in p.name]


def why_not_offloaded(conv, attrs) -> Optional[str]:
    """Why the core does not compute this ``relax.nn.conv2d`` (the conv alone), else None."""
    if fp.is_depthwise(conv):
        return DEPTHWISE
    if conv.args[0].ty.dtype != "float32":
        return None
    return _float_problem(fp.split(conv, {}))


def pack_constants(func, constants) -> dict:
    """int8: the weights as the B matrix, the weight scales' constant as the channel table; float:
    the weights as the B matrix with the bias (zeros without one) as one more row."""
    if "conv2d_int8" in str(func.attrs["Composite"]):
        chain, value = qconv.fused_chain(func), qconv.reader(constants)
        q, _ = _quantized(chain, value)
        matrix = _matrix(q.weights, "HWIO")
        w, s_w, _ = chain["weights"].args
        return {w: lambda _: matrix, s_w: lambda _: _table(chain, q, matrix, value)}
    parts = fp.split_fused(func)
    conv = parts.conv
    oc = _float_layer(parts).oc
    bias = np.zeros(oc, np.float32) if parts.bias is None else constants[parts.bias].reshape(-1).astype(np.float32)
    return {conv.args[1]: lambda w: np.concatenate([_matrix(w, conv.attrs.kernel_layout), bias[None]])}


def _nchw_copy(nchw, nhwc, layer: ConvLayer, into_nhwc: bool, output: bool):
    """Copies between an NCHW tensor and its NHWC ([h*w][c]) form, on the CPU."""
    c_, h_, w_ = (layer.oc, layer.oh, layer.ow) if output else (layer.ic, layer.ih, layer.iw)
    at_nchw = lambda c, y, x: [0, c, y, x]
    at_nhwc = (lambda c, y, x: [y * w_ + x, c]) if output else (lambda c, y, x: [y, x, c])
    extents = {"c": c_, "y": h_, "x": w_}
    return tir.copy_loops(extents, nhwc, at_nhwc, nchw, at_nchw) if into_nhwc else \
        tir.copy_loops(extents, nchw, at_nchw, nhwc, at_nhwc)


def _planned(match, layer: ConvLayer, core: Core, dtype: str):
    plan = plan_layer(layer, core, dtype)
    log.info("%s: GEMM %d x %d x %d on %dx%dx%d tiles, %s (lower bound %d bytes)", match.pattern, *layer.gemm,
             core.tile_m, core.tile_n, core.tile_k, plan.describe(), layer.lower_bound())
    return plan


def kernel_call(match, attrs):
    """The layer's program: configure, the tile loops of DMA transfers and core calls, the stores."""
    core = _core(attrs)
    if "conv2d_int8" in match.pattern:
        chain = qconv.fused_chain(match.func)
        _, layer = _quantized(chain, qconv.reader(match.constants))
        (x, _, _), (w, s_w, _) = chain["input"].args, chain["weights"].args
        host = {"input": match.pointer(x), "weights": match.pointer(w), "table": match.pointer(s_w),
                "output": tir.pointer(match.result)}
        plan = _planned(match, layer, core, "int8")
        return tir.checked_program(TARGET, lambda extern: program.build(layer, core, plan, host, extern))
    parts = fp.split_fused(match.func)
    layer, weights = _float_layer(parts), match.buffer(parts.conv.args[1])
    table = tir.element_pointer(weights, [layer.gemm[2], 0])  # the bias: the last row
    host = {"input": match.pointer(parts.conv.args[0]), "weights": tir.pointer(weights), "table": table,
            "output": tir.pointer(match.result)}
    plan = _planned(match, layer, core, "float32")
    body = lambda host: tir.checked_program(TARGET, lambda extern: program.build(layer, core, plan, host, extern))
    if parts.conv.attrs.data_layout == "NHWC":
        return body(host)
    # NCHW: the core reads and writes NHWC; the transposes run on the CPU around its program.
    x, out = match.buffer(parts.conv.args[0]), match.result
    x_nhwc = tir.temporary((layer.ih, layer.iw, layer.ic), "float32", "input_nhwc")
    out_nhwc = tir.temporary((layer.oh * layer.ow, layer.oc), "float32", "output_nhwc")
    return tir.with_temporaries([x_nhwc, out_nhwc], _nchw_copy(x, x_nhwc, layer, True, False),
                                body({**host, "input": tir.pointer(x_nhwc), "output": tir.pointer(out_nhwc)}),
                                _nchw_copy(out, out_nhwc, layer, False, True))


def register():
    """The ``tvm.backends`` entry point (pyproject.toml): apache-tvm calls it at ``import tvm``."""
    import sys  # pylint: disable=import-outside-toplevel

    from tvm_extension.relax.backends import register as register_backend  # pylint: disable=import-outside-toplevel

    register_backend(sys.modules[__name__])
