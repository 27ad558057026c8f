"""Arithmetic a tiling of a conv layer needs, whatever the memory it tiles for.

A tiled conv moves each input position some window reads at least once: ``positions_read``
counts them along one axis, the basis of the lower bounds the backends' plans are compared to.
"""


def positions_read(size: int, out: int, stride: int, window: int, pad: int) -> int:
    """Input positions along one axis that some window reads (windows may skip positions when the
    stride exceeds the window)."""
    covered = set()
    for o in range(out):
        covered.update(range(max(o * stride - pad, 0), min(o * stride - pad + window, size)))
    return len(covered)
