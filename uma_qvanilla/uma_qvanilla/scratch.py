"""The scratch memory QVanilla's C entries take from the caller: a mirror of the
``qvanilla_*_get_buffer_size`` functions (``c/qvanilla_conv2d_s8.c``, ``c/qvanilla_depthwise_conv2d_s8.c``),
so the TIR pass can size its workspace buffer at compile time (a test compares both on many shapes,
for several budgets).

The C cuts the buffer into arrays, each rounded up to ``ALIGN`` bytes, in the order below; pointer
arrays take 8 bytes an entry and output-stage blocks ``BLOCK_BYTES`` whatever the target, so the
sizes do not depend on the machine the model runs on.  An entry tiles its work to the scratch it is
given: the roomy layout (the fastest) if it fits, else a lean one (see ``qvanilla_internal.h``,
"Scratch layouts"); ``budget`` is ``QVANILLA_SCRATCH_BUDGET``: 0 for the roomy layout, else the
bytes a call may take.
"""
from typing import List

# The engine's constants (the enum at the top of c/qvanilla_internal.h)
K_ALIGN, OC_BLOCK, WIN, KMAX, TILE, QCH = 8, 4, 8192, 4096, 64, 64
QL, CB, DW_BLOCK, DW_TAPS, DW_WBUF, DW_ACC, MAX_OC = 16, 16, 128, 64, 4096, 2048, 1024
MIN_TILE, LEAN_TAPS, PAIR_TAPS = 8, 16, 32
BLOCK_BYTES, POINTER_BYTES, ALIGN = 1360, 8, 8  # QVANILLA_BLOCK_BYTES, QVANILLA_POINTER_BYTES, QVANILLA_SCRATCH_ALIGN

KINDS = ("conv2d_s8", "conv2d_packed_s8", "conv2d_packed8_s8", "depthwise_conv2d_s8", "depthwise_conv2d_packed_s8")
MICROCONTROLLER_BUDGET = 4096  # QVANILLA_SCRATCH_BUDGET's default on Cortex-M


def packed_kind(depthwise: bool, int8_weights: bool = False) -> str:
    """The packed entry (of KINDS) a compiled conv calls: depthwise, or dense with int16 or int8 weights."""
    return "depthwise_conv2d_packed_s8" if depthwise else "conv2d_packed8_s8" if int8_weights else "conv2d_packed_s8"


def _total(sizes: List[int]) -> int:
    return sum(-(-size // ALIGN) * ALIGN for size in sizes)


def _round_up(n: int, m: int) -> int:
    return -(-n // m) * m


def _choose(roomy: int, lean, widest: int, step: int, least: int, budget: int) -> int:
    """The size of the layout for ``budget``: roomy, else the lean layout of the most channels at a time
    (from ``widest`` down in steps of ``step``) leaving MIN_TILE pixels, else the least one.
    ``lean(channels)`` is (fixed bytes, bytes per pixel, most pixels, fewest pixels)."""
    if budget == 0 or budget >= roomy:
        return roomy
    channels = widest
    while True:
        fixed, per_pixel, most, fewest = lean(channels)
        pixels = min((budget - fixed) // per_pixel if budget > fixed else 0, most)
        if pixels >= MIN_TILE or channels <= step:
            return fixed + pixels * per_pixel if pixels >= fewest else least
        channels = (channels - 1) // step * step


def _dense(kh: int, kw: int, ic: int, oc: int, packed: bool, budget: int) -> int:
    k = kh * kw * ic
    if k > KMAX:  # the direct loops: the plain entry's row of sums
        return 0 if packed else _total([min(oc, MAX_OC) * 4])
    kp = _round_up(k, K_ALIGN)

    def layout(tile, chunk, roomy):
        return _total([tile * kp * 2, tile * chunk * 4, chunk * 4, 0 if packed else chunk * 4,
                       chunk // QL * BLOCK_BYTES if roomy else 0, tile * QL * 4 if roomy else 0,
                       0 if packed else OC_BLOCK * kp * 2])

    most, widest = min(WIN // kp, TILE), min(_round_up(oc, QL), QCH)
    return _choose(layout(most, widest, True), lambda chunk: (layout(0, chunk, False), kp * 2 + chunk * 4, most, 2),
                   widest, QL, layout(2, QL, False), budget)


def _depthwise(kh: int, kw: int, channels: int, packed: bool, budget: int) -> int:
    taps, block = kh * kw, DW_BLOCK
    if not packed:  # a block's weights fit the weight buffer
        block = min(DW_WBUF // taps, DW_BLOCK)
        block = block - block % QL if block >= QL else max(block, 1)

    def layout(block, pixels, roomy):
        cb = min(channels, block)
        stride, group = _round_up(cb, CB), DW_TAPS if roomy else min(taps, LEAN_TAPS)
        slots, tails = (group + 1) * POINTER_BYTES, roomy or channels % CB or cb % CB
        pair_words = TILE * QL if roomy else (taps + 1) // 2 * _round_up(cb, 4) if taps <= PAIR_TAPS else 0
        return _total([-(-cb // QL) * BLOCK_BYTES if roomy else 0, cb * 4,
                       taps * cb * 2 if not packed and taps * cb <= DW_WBUF else 0, pixels * stride * 4,
                       pair_words * 4,  # roomy: the lanes' rows, which the pairs share
                       cb, cb * 2, slots, slots, slots if tails else 0, slots if tails else 0,
                       group * POINTER_BYTES, (group + 1) * CB if tails else 0, (group + 1) * CB * 2 if tails else 0])

    widest = min(channels, block)
    roomy = layout(block, min(DW_ACC // _round_up(widest, CB), TILE), True)
    return _choose(roomy, lambda cb: (layout(cb, 0, False), _round_up(cb, CB) * 4, TILE, 1), widest, CB,
                   layout(min(widest, CB), 1, False), budget)


def buffer_size(kind: str, kh: int, kw: int, ic: int, oc: int, budget: int = 0) -> int:
    """``qvanilla_<kind>_get_buffer_size`` of a filter kh x kw, ic input and oc output channels
    (a depthwise conv's oc is its ic), sizes at least 1, in a build of ``QVANILLA_SCRATCH_BUDGET`` =
    ``budget`` (0: the roomy layout, hosts' default; 1: the least the entry accepts).  The packed8
    entry takes the packed one's."""
    if kind.startswith("depthwise"):
        return _depthwise(kh, kw, ic, kind.endswith("packed_s8"), budget)
    return _dense(kh, kw, ic, oc, kind != "conv2d_s8", budget)
