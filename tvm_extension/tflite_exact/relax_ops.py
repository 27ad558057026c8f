"""The Relay functions the integer builders call, as Relax operators (``graph`` picks this module
where TVM has no Relay).  Relax needs no fusion barriers: it fuses operators as TIR blocks, each
keeping its buffer, so a value read several times is not recomputed in a growing tree."""
import types

from tvm import relax

Expr = relax.Expr
const = relax.const
add, subtract, multiply, divide = relax.op.add, relax.op.subtract, relax.op.multiply, relax.op.divide  # divide truncates integers, as C
where, equal, greater, greater_equal, less = relax.op.where, relax.op.equal, relax.op.greater, relax.op.greater_equal, relax.op.less
left_shift, right_shift, bitwise_and = relax.op.left_shift, relax.op.right_shift, relax.op.bitwise_and
floor, ceil, max, sum = relax.op.floor, relax.op.ceil, relax.op.max, relax.op.sum  # pylint: disable=redefined-builtin


def cast(x, dtype):
    return relax.op.astype(x, dtype)


def clip(x, a_min, a_max):
    return relax.op.clip(x, a_min, a_max)


def take(data, indices):
    """Relay's take without an axis: ``data`` (1-D, the builders' tables) indexed elementwise."""
    return relax.op.take(data, indices, axis=0, mode="clip")  # in range by construction; "fast" warns


def _conv2d(data, weight, strides=(1, 1), padding=(0, 0), groups=1, data_layout="NCHW", kernel_layout="OIHW",
            out_dtype=None, **_shape_hints):  # Relay's channels / kernel_size follow from the weight
    return relax.op.nn.conv2d(data, weight, strides=strides, padding=padding, groups=groups, data_layout=data_layout,
                              kernel_layout=kernel_layout, out_dtype=out_dtype)


annotation = types.SimpleNamespace(stop_fusion=lambda expr: expr)
nn = types.SimpleNamespace(conv2d=_conv2d)
