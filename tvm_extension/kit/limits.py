"""A backend's limits, read from its C header: the kernel and the patterns use the same numbers.

A header states each limit once, as ``#define PREFIX_NAME <integer>`` (``64``, ``-31``,
``(1 << 30)``); ``c_limits`` returns them as ``{"NAME": value}``, so a pattern refuses
exactly what the C would refuse at run time instead of a copy of the number drifting apart.
"""
import ast
import operator
import re
from pathlib import Path
from typing import Dict, Optional

INT32_MAX = 2**31 - 1  # the C entries take int32_t / int: the largest value any argument can have
PTRDIFF_MAX = 2**63 - 1  # the largest tensor, in bytes, a 64-bit host's kernel can index

_DEFINE = re.compile(r"^\s*#\s*define\s+(\w+)\s+(.+?)\s*(?:/\*.*)?$", re.MULTILINE)
_OPERATORS = {ast.LShift: operator.lshift, ast.Mult: operator.mul, ast.Add: operator.add, ast.Sub: operator.sub}


def _integer(node) -> int:
    """The value of an integer constant expression (literals, unary minus, <<, *, +, -)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_integer(node.operand)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_integer(node.left), _integer(node.right))
    raise ValueError("not an integer constant")


def c_limits(header: Path, prefix: str) -> Dict[str, int]:
    """``{NAME: value}`` of every ``#define <prefix>NAME <integer expression>`` in ``header``.

    Defines with other values (macros with arguments, strings) are skipped.
    """
    limits = {}
    for name, value in _DEFINE.findall(Path(header).read_text()):
        if not name.startswith(prefix):
            continue
        try:
            limits[name[len(prefix):]] = _integer(ast.parse(value, mode="eval").body)
        except (SyntaxError, ValueError):
            continue
    return limits


def conv_geometry(conv) -> dict:
    """The integers a typed, static conv2d (nn or qnn, any layout) passes to a kernel: sizes of
    the input (ic, ih, iw), output (oc, oh, ow) and window (kh, kw), strides, top and left pads."""
    layout, kernel_layout = str(conv.attrs.data_layout), str(conv.attrs.kernel_layout)
    ints = lambda shape: [int(d) for d in shape]
    size = dict(zip(layout, ints(conv.args[0].checked_type.shape)))
    out = dict(zip(layout, ints(conv.checked_type.shape)))
    weight = dict(zip(kernel_layout, ints(conv.args[1].checked_type.shape)))
    (stride_h, stride_w), padding = ints(conv.attrs.strides), ints(conv.attrs.padding)
    return dict(oc=out["C"], ic=size["C"], ih=size["H"], iw=size["W"], oh=out["H"], ow=out["W"], kh=weight["H"],
                kw=weight["W"], stride_h=stride_h, stride_w=stride_w, pad_top=padding[0], pad_left=padding[1])


def below_one(g: dict, names=("oc", "ic", "ih", "iw", "oh", "ow", "kh", "kw")) -> str:
    """"name value, ..." of the sizes below 1 ('' if none): every kernel refuses them."""
    return ", ".join(f"{name} {g[name]}" for name in names if g[name] < 1)


def window_extent(g: dict) -> int:
    """How far the windows reach, (out - 1) * stride + kernel, the larger of the two axes (the
    kernels refuse more than INT32_MAX // 2, so their index arithmetic fits an int)."""
    return max((g["oh"] - 1) * g["stride_h"] + g["kh"], (g["ow"] - 1) * g["stride_w"] + g["kw"])


def geometry_problem(g: dict, *, depthwise: bool, element_bytes: int, weight_bytes: int, weight_slack: int = 0,
                     own_problem: Optional[str] = None) -> Optional[str]:
    """Why a conv kernel's check() would refuse the geometry ``g`` (``conv_geometry``'s), else None,
    in the kernels' order: sizes below 1, strides, negative pads, then ``own_problem`` (the kernel's
    own checks, which the C makes before the sizes: a clamp, a depthwise window), then sizes beyond
    its int arithmetic. A tensor's bytes: ``element_bytes`` per input/output value, ``weight_bytes``
    per weight plus ``weight_slack`` (a packed layout's padding), each at most PTRDIFF_MAX.
    """
    if below_one(g):
        return f"{below_one(g)}: below 1 (the kernel refuses empty tensors)"
    if g["stride_h"] < 1 or g["stride_w"] < 1:
        return f"stride {g['stride_h']}x{g['stride_w']} below 1"
    if g["pad_top"] < 0 or g["pad_left"] < 0:
        return f"negative padding top {g['pad_top']}, left {g['pad_left']}"
    if own_problem:
        return own_problem
    weights = g["oc"] * (1 if depthwise else g["ic"]) * g["kh"] * g["kw"]
    tensors = (g["ic"] * g["ih"] * g["iw"] * element_bytes, g["oc"] * g["oh"] * g["ow"] * element_bytes,
               weights * weight_bytes + weight_slack)
    if max(g.values()) > INT32_MAX or max(tensors) > PTRDIFF_MAX or window_extent(g) > INT32_MAX // 2:
        return "too large for the kernel's int arithmetic"
    return None
