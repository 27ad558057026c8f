"""The scratch memory QVanilla's C entries take from the caller: a mirror of the
``qvanilla_*_get_buffer_size`` functions (``c/qvanilla_conv2d_s8.c``, ``c/qvanilla_depthwise_conv2d_s8.c``),
so the TIR pass can size its workspace buffer at compile time (a test compares both on many shapes).

The C cuts the buffer into arrays, each rounded up to ``ALIGN`` bytes, in the order below; pointer
arrays take 8 bytes an entry and output-stage blocks ``BLOCK_BYTES`` whatever the target, so the
sizes do not depend on the machine the model runs on.
"""
from typing import List

# The engine's constants (the enum at the top of c/qvanilla_internal.h)
K_ALIGN, OC_BLOCK, WIN, KMAX, TILE, QCH = 8, 4, 8192, 4096, 64, 64
QL, CB, DW_BLOCK, DW_TAPS, DW_WBUF, DW_ACC, MAX_OC = 16, 16, 128, 64, 4096, 2048, 1024
BLOCK_BYTES, POINTER_BYTES, ALIGN = 1360, 8, 8  # QVANILLA_BLOCK_BYTES, QVANILLA_POINTER_BYTES, QVANILLA_SCRATCH_ALIGN

KINDS = ("conv2d_s8", "conv2d_packed_s8", "depthwise_conv2d_s8", "depthwise_conv2d_packed_s8")


def _total(sizes: List[int]) -> int:
    return sum(-(-size // ALIGN) * ALIGN for size in sizes)


def _round_up(n: int, m: int) -> int:
    return -(-n // m) * m


def _dense(kh: int, kw: int, ic: int, oc: int, packed: bool) -> int:
    k = kh * kw * ic
    if k > KMAX:  # the direct loops: the plain entry's row of sums
        return 0 if packed else _total([min(oc, MAX_OC) * 4])
    kp = _round_up(k, K_ALIGN)
    tile, chunk = min(WIN // kp, TILE), min(_round_up(oc, QL), QCH)
    return _total([tile * kp * 2, tile * chunk * 4, chunk * 4, 0 if packed else chunk * 4,
                   chunk // QL * BLOCK_BYTES, tile * QL * 4, 0 if packed else OC_BLOCK * kp * 2])


def _depthwise(kh: int, kw: int, channels: int, packed: bool) -> int:
    taps, block = kh * kw, DW_BLOCK
    if not packed:  # a block's weights fit the weight buffer
        block = min(DW_WBUF // taps, DW_BLOCK)
        block = block - block % QL if block >= QL else max(block, 1)
    cb = min(channels, block)
    stride, slots = _round_up(cb, CB), (DW_TAPS + 1) * POINTER_BYTES
    wbuf = taps * cb * 2 if not packed and taps * cb <= DW_WBUF else 0
    return _total([-(-cb // QL) * BLOCK_BYTES, cb * 4, wbuf, min(stride * TILE, DW_ACC) * 4, TILE * QL * 4, cb,
                   cb * 2, slots, slots, slots, slots, DW_TAPS * POINTER_BYTES, (DW_TAPS + 1) * CB,
                   (DW_TAPS + 1) * CB * 2])


def buffer_size(kind: str, kh: int, kw: int, ic: int, oc: int) -> int:
    """``qvanilla_<kind>_get_buffer_size`` of a filter kh x kw, ic input and oc output channels
    (a depthwise conv's oc is its ic), sizes at least 1."""
    if kind.startswith("depthwise"):
        return _depthwise(kh, kw, ic, kind.endswith("packed_s8"))
    return _dense(kh, kw, ic, oc, kind.endswith("packed_s8"))
