"""Strawberry: Vanilla's conv engine behind a scratchpad of its own, fed by DMA transfers.

The engine computes only on the scratchpad; a TIR pass (``passes.StrawberryDMAPass``) splits
each offloaded conv into tiles that fit the scratchpad's partitions (``tiling``) and inserts,
around each engine call, the DMA transfers of the weights, the padded input tile and the
residual in, and of the output tile out (``program``).  The C side is
``c/strawberry.{h,c}``, a host model of the hardware that fails loudly on a
read of anything no transfer has written.
"""
__all__ = ["StrawberryBackend"]


def __getattr__(name):
    """The backend (Relay) on first use: the C library, ``target``, ``passes`` and ``codegen``
    import without Relay, so a second engine can reuse them."""
    if name == "StrawberryBackend":
        from .backend import StrawberryBackend

        return StrawberryBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
