"""Relay rewrites a backend registers before its patterns, so that they see the operator its
kernel computes rather than what a frontend left unfolded:

* ``fold_batch_norm_pass``: conv2d [-> bias] -> batch_norm (inference, as ONNX exports of
  trained networks keep it) becomes one conv2d with scaled weights and a bias;
* ``unflatten_prelu_pass``: TVM's TFLite frontend imports PRELU as
  ``reshape(prelu(reshape(x, [-1]), reshape(broadcast_to(alpha), [-1])))``; when alpha is per
  channel this becomes ``nn.prelu(x, alpha[C], axis=channel)`` again.

Both compute the folded constants with numpy in float32 (not FoldConstant, which would build
and run one TVM function per weight) and leave anything else untouched.
"""
import numpy as np
import tvm
from tvm import relay
from tvm.relay.dataflow_pattern import DFPatternCallback, is_constant, is_op, is_tuple_get_item, rewrite, wildcard


def _value(const) -> np.ndarray:
    return const.data.numpy()


class _ConvBatchNorm(DFPatternCallback):
    def __init__(self):
        super().__init__(require_type=True)
        self.weights, self.bias = is_constant(), is_constant()
        self.conv = is_op("nn.conv2d")(wildcard(), self.weights)
        self.biased = is_op("nn.bias_add")(self.conv, self.bias)
        self.stats = [is_constant() for _ in range(4)]  # gamma, beta, mean, var
        self.norm = is_op("nn.batch_norm")(self.conv | self.biased, *self.stats)
        self.pattern = is_tuple_get_item(self.norm, 0)
        self.folded = {}  # batch_norm call -> its folded conv: each of its outputs' uses gets the same one

    def callback(self, pre, post, node_map):
        conv, norm = node_map[self.conv][0], node_map[self.norm][0]
        if norm not in self.folded:
            self.folded[norm] = self._fold(post, conv, norm, node_map)
        return self.folded[norm]

    def _fold(self, post, conv, norm, node_map):
        layout, kernel_layout = str(conv.attrs.data_layout), str(conv.attrs.kernel_layout)
        if conv.checked_type.dtype != "float32" or int(norm.attrs.axis) % 4 != layout.index("C"):
            return post
        gamma, beta, mean, var = (_value(node_map[s][0]).astype(np.float32) for s in self.stats)
        scale = (gamma if norm.attrs.scale else np.ones_like(gamma)) / np.sqrt(var + np.float32(norm.attrs.epsilon))
        shift = (beta if norm.attrs.center else np.zeros_like(beta)) - mean * scale
        weights = _value(node_map[self.weights][0])
        per_out = [-1 if axis == "O" else 1 for axis in kernel_layout]
        new_weights = (weights * scale.reshape(per_out)).astype(np.float32)
        bias = _value(node_map[self.bias][0]) if self.biased in node_map else np.zeros_like(shift)
        if bias.shape != shift.shape or new_weights.shape != weights.shape:
            return post
        new_conv = relay.nn.conv2d(conv.args[0], relay.const(new_weights), **_conv_attrs(conv))
        return relay.nn.bias_add(new_conv, relay.const((bias * scale + shift).astype(np.float32)), axis=layout.index("C"))


def _conv_attrs(conv) -> dict:
    attrs = conv.attrs
    return dict(strides=attrs.strides, padding=attrs.padding, dilation=attrs.dilation, groups=attrs.groups,
                channels=attrs.channels, kernel_size=attrs.kernel_size, data_layout=attrs.data_layout,
                kernel_layout=attrs.kernel_layout, out_layout=attrs.out_layout, out_dtype=attrs.out_dtype)


class _FlattenedPrelu(DFPatternCallback):
    def __init__(self):
        super().__init__(require_type=True)
        self.data, self.alpha = wildcard(), is_constant()
        slope = is_op("reshape")(is_op("broadcast_to")(self.alpha) | self.alpha)
        self.pattern = is_op("reshape")(is_op("nn.prelu")(is_op("reshape")(self.data), slope))

    def callback(self, pre, post, node_map):
        data = node_map[self.data][0]
        shape = [int(d) for d in data.checked_type.shape]
        if len(shape) != 4 or [int(d) for d in pre.checked_type.shape] != shape or data.checked_type.dtype != "float32":
            return post
        try:
            alpha = np.broadcast_to(_value(node_map[self.alpha][0]), shape)
        except ValueError:
            return post
        if not np.all(alpha == alpha[:1, :1, :1, :]):
            return post  # alpha varies along more than the channel axis: not a per-channel PReLU
        return relay.nn.prelu(data, relay.const(np.ascontiguousarray(alpha[0, 0, 0, :])), axis=3)


def _rewrite_pass(make_callback, name: str) -> tvm.transform.Pass:
    """A module pass rewriting ``main`` with a fresh callback (callbacks keep per-run state)."""

    @tvm.transform.module_pass(opt_level=0, name=name)
    def run(mod, _ctx):
        mod = relay.transform.InferType()(mod)
        mod["main"] = rewrite(make_callback(), mod["main"])
        return relay.transform.InferType()(mod)

    return run


def fold_batch_norm_pass(name: str = "FoldConvBatchNorm") -> tvm.transform.Pass:
    return _rewrite_pass(_ConvBatchNorm, name)


def unflatten_prelu_pass(name: str = "UnflattenPrelu") -> tvm.transform.Pass:
    """TFLite's channel-last PReLU (NHWC) back to one ``nn.prelu`` along the channel axis."""
    return _rewrite_pass(_FlattenedPrelu, name)
