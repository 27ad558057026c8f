"""ONNX's batch norms folded into the convs before them, on the Relax engine as on the Relay engine
(``tvm_extension.kit.fold``), so that a backend's conv patterns see one conv with a bias."""
import numpy as np
from tvm import relax
from tvm.relax.dpl import TupleGetItemPattern, is_const, is_op, rewrite_call, wildcard

from .tvm_internals import constant_array


def fold_batch_norms(mod):
    """ONNX's BatchNormalization after a Conv (inference mode) folded into the conv's weights and
    a bias, before the backends' patterns are matched, as the Relay engine's backends fold it
    (``tvm_extension.kit.fold``): the conv (+bias, +relu) is then offloaded, and computes what the
    Relay engine's does, bit for bit.

    TVM's ``FoldBatchnormToConv2D`` rewrites ``batch_norm(conv2d(x, W))`` (OIHW or IOHW weights) into
    ``conv2d(x, W * s) + (beta - mean * s)``, s = gamma / sqrt(var + eps), which FoldConstant computes
    as the Relay engine's numpy does.  A conv with a bias (ONNX's: ``add(conv2d, reshape(b))``) is
    not in its pattern: ``batch_norm(y + b)`` is first rewritten as ``batch_norm(y)`` with mean 0 and
    beta ``b * s + (beta - mean * s)``, the Relay engine's folded bias, which the pass then adds as
    it is (``beta - 0 * s``).  A model with no batch norm, one in training mode (batch statistics),
    or none of whose batch norms went away (none after a conv; its moving mean or variance used)
    is returned as it was."""
    def batch_norms(module):
        found = []
        for _, func in module.functions_items():
            if isinstance(func, relax.Function):
                relax.analysis.post_order_visit(func.body, lambda e: found.append(e) if isinstance(
                    e, relax.Call) and getattr(e.op, "name", None) == "relax.nn.batch_norm" else None)
        return found

    norms = batch_norms(mod)
    if not norms or any(bool(n.attrs.training) for n in norms):
        return mod

    conv, bias = is_op("relax.nn.conv2d")(wildcard(), is_const()), is_const()
    biased = is_op("relax.add")(conv, bias | is_op("relax.reshape")(bias, wildcard()))
    stats = [is_const() for _ in range(4)]  # gamma, beta, mean, var
    norm = is_op("relax.nn.batch_norm")(biased, *stats)

    def bias_into_norm(expr, found):
        call, b = found[norm], constant_array(found[bias])
        gamma, beta, mean, var = (constant_array(found[s]) for s in stats)
        channels, added = gamma.shape[0], found[biased].args[1]
        per_channel = [int(d) for d in added.ty.shape] in ([1, channels, 1, 1], [channels, 1, 1])
        if not (per_channel and b.size == channels and int(call.attrs.axis) == 1
                and found[conv].attrs.data_layout == "NCHW"
                and all(str(v.dtype) == "float32" for v in (b, gamma, beta, mean, var))):
            return expr
        scale = gamma / np.sqrt(var + np.float32(call.attrs.epsilon))  # as kit/fold.py and the pass
        args = [found[conv], call.args[1], relax.const(b.reshape(channels) * scale + (beta - mean * scale)),
                relax.const(np.zeros_like(mean)), call.args[4]]
        return relax.TupleGetItem(relax.Call(call.op, args, call.attrs), 0)  # output 0 only

    folded = mod.clone()
    for gv, func in list(folded.functions_items()):
        if isinstance(func, relax.Function):
            folded[gv] = rewrite_call(TupleGetItemPattern(norm, 0), bias_into_norm, func)
    folded = relax.transform.FoldBatchnormToConv2D()(folded)
    if len(batch_norms(folded)) == len(norms):
        return mod
    # The new weights and biases computed now (so the whole model's constants, earlier than in a
    # model with no batch norm): ConvertLayout (--desired-layout) crashes on the pass's
    # add(var, PrimValue(eps)).
    return relax.transform.FoldConstant()(folded)
