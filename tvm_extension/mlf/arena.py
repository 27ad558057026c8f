"""One static workspace for an AOT main: the buffers' offsets planned by their lifetimes, so that
buffers never live at once may share bytes (TVM's USMP does this for the Relay engine's MLF)."""
from typing import List, Tuple

ALIGN = 16  # bytes: every buffer of the workspace starts at a multiple (vector loads)


def align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def plan_arena(buffers: List[Tuple[int, int, int]]) -> Tuple[List[int], int]:
    """(offsets, bytes) of one arena for ``buffers`` (size, first call, last call that uses it):
    greedy by size, each at the lowest aligned offset clear of every placed buffer whose lifetime
    overlaps its own (USMP's greedy_by_size)."""
    offsets: List[int] = [0] * len(buffers)
    placed: List[int] = []
    for i in sorted(range(len(buffers)), key=lambda i: (-buffers[i][0], i)):
        size, first, last = buffers[i]
        offset = 0
        for start, end in sorted((offsets[j], offsets[j] + buffers[j][0]) for j in placed
                                 if buffers[j][1] <= last and first <= buffers[j][2]):
            if offset + size <= start:
                break
            offset = max(offset, align(end))
        offsets[i] = offset
        placed.append(i)
    return offsets, max((align(offsets[i] + buffers[i][0]) for i in placed), default=0)
