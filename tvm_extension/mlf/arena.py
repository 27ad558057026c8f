"""One static workspace for an AOT main: the buffers' offsets planned by their lifetimes, so that
buffers never live at once may share bytes (TVM's USMP does this for the Relay engine's MLF)."""
from typing import List, Sequence, Tuple

ALIGN = 16  # bytes: every buffer of the workspace starts at a multiple (vector loads)


def align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def plan_arena(buffers: List[Tuple[int, int, int]], groups: Sequence[Sequence[int]] = ()) -> Tuple[List[int], int]:
    """(offsets, bytes) of one arena for ``buffers`` (size, first call, last call that uses it): each
    buffer at the lowest aligned offset clear of every placed buffer whose lifetime overlaps its own.
    ``groups``: buffers never live at once that may also share one region (Relax's storages); planned
    both apart and as one buffer per group, whichever arena is smaller (the first of equals)."""
    plans = [_greedy(buffers)]
    if groups:
        grouped = {i for group in groups for i in group}
        rest = [i for i in range(len(buffers)) if i not in grouped]
        merged = [(max(buffers[i][0] for i in g), min(buffers[i][1] for i in g), max(buffers[i][2] for i in g))
                  for g in groups]
        offsets, size = _greedy(merged + [buffers[i] for i in rest])
        spread = [0] * len(buffers)
        for members, offset in zip([*groups, *([i] for i in rest)], offsets):
            for i in members:
                spread[i] = offset
        plans.append((spread, size))
    return min(plans, key=lambda plan: plan[1])


def _greedy(buffers: List[Tuple[int, int, int]]) -> Tuple[List[int], int]:
    """The buffers placed greedily in three orders (USMP's greedy_by_size and greedy_by_conflicts,
    and by first use): the smallest arena (the first of equals)."""
    live = lambda i, j: buffers[j][1] <= buffers[i][2] and buffers[i][1] <= buffers[j][2]
    indices = range(len(buffers))
    conflicts = [sum(buffers[j][0] for j in indices if live(i, j)) for i in indices]  # its own size too
    orders = [sorted(indices, key=lambda i: (-buffers[i][0], i)), sorted(indices, key=lambda i: (-conflicts[i], i)),
              sorted(indices, key=lambda i: (buffers[i][1], -buffers[i][0], i))]
    return min((_placed(buffers, order) for order in orders), key=lambda plan: plan[1])


def _placed(buffers: List[Tuple[int, int, int]], order: List[int]) -> Tuple[List[int], int]:
    """(offsets, bytes): the buffers placed greedily in ``order``."""
    offsets: List[int] = [0] * len(buffers)
    placed: List[int] = []
    for i in order:
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
