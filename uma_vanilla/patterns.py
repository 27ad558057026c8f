"""Relay patterns offloaded to Vanilla: exactly what ``vanilla_conv2dnchw`` can compute."""
from tvm.relay.dataflow_pattern import is_op, wildcard


def conv2d_pattern():
    return is_op("nn.conv2d")(wildcard(), wildcard())


def _ints(values):
    return [int(v) for v in values]


def conv2d_supported(conv, max_kernel_size: int) -> bool:
    """NCHW/OIHW float32, batch 1, stride 1, no dilation or groups, odd kernel, same padding."""
    attrs = conv.attrs
    data, weight = conv.args[0].checked_type, conv.args[1].checked_type
    if attrs.data_layout != "NCHW" or attrs.kernel_layout != "OIHW":
        return False
    if attrs.out_layout not in ("", "NCHW") or attrs.out_dtype not in ("", "float32"):
        return False
    if data.dtype != "float32" or weight.dtype != "float32" or len(data.shape) != 4:
        return False
    if int(attrs.groups) != 1 or _ints(attrs.strides) != [1, 1] or _ints(attrs.dilation) != [1, 1]:
        return False
    batch = int(data.shape[0])
    kh, kw = _ints(weight.shape[2:])
    if batch != 1 or kh % 2 == 0 or kw % 2 == 0 or max(kh, kw) > max_kernel_size:
        return False
    ph, pw = (kh - 1) // 2, (kw - 1) // 2
    return _ints(attrs.padding) == [ph, pw, ph, pw]
