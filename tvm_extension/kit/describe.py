"""What a float conv engine's TIR pass needs to know of each offloaded function, recorded from Relay.

``describe_pass`` puts on each function offloaded to a target, as a function attribute, which
parameter is which tensor (input, weights, bias, residual, PReLU slope), the window (layout,
strides, top and left pads, depthwise or not) and the clamp: the TIR pass (which sees only
buffers) reads it instead of guessing from block names.  For functions matched by
``conv_patterns`` (conv2d -> bias -> residual -> relu|clip|prelu).
"""
import tvm

from tvm_extension.uma import offloaded_functions

from .conv_patterns import clamp_bounds, is_depthwise, split_composite


def param_index(func, expr, role):
    """The position of ``expr`` among ``func``'s parameters (``role`` names it in the error)."""
    for i, param in enumerate(func.params):
        if expr.same_as(param):
            return i
    raise ValueError(f"{func.attrs['global_symbol']}: its {role} tensor is computed inside the offloaded function")


def describe_pass(target: str, attr: str, name: str) -> tvm.transform.Pass:
    """Record on each function offloaded to ``target``, as its attribute ``attr``, its window,
    which parameter is what (input, weights, bias, residual, PReLU slope) and how it clamps.

    Read from Relay (conv2d -> bias -> residual -> relu|clip|prelu), so the TIR pass needs no block names.
    """

    @tvm.transform.module_pass(opt_level=0, name=name)
    def describe(mod, _ctx):
        for gvar, func in offloaded_functions(mod, target):
            if attr not in func.attrs:  # else partitioned before (the Python flow partitions, then tvmc.compile)
                mod[gvar] = func.with_attr(attr, describe_conv(func))
        return mod

    return describe


def describe_conv(func) -> dict:
    """The roles, window and clamp of one offloaded conv function (see ``describe_pass``)."""
    conv, _, bias, residual, activation = split_composite(func.body)
    kind = activation.op.name if activation is not None else None
    lo, hi = clamp_bounds(activation)  # the bounds the pattern checked
    roles = {"ifmap": conv.args[0], "weights": conv.args[1], "bias": bias,
             "residual": residual, "slope": activation.args[1] if kind == "nn.prelu" else None}
    stage = {role: param_index(func, expr, role) for role, expr in roles.items() if expr is not None}
    pad_top, pad_left = (int(p) for p in conv.attrs.padding[:2])
    stage.update(lo=lo, hi=hi, layout=str(conv.attrs.data_layout).lower(), strides=[int(s) for s in conv.attrs.strides],
                 pad_top=pad_top, pad_left=pad_left, depthwise=int(is_depthwise(conv)))
    return stage
