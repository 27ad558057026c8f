"""Chocolate: convolutions decomposed onto a small matrix core, the loops visible to TVM."""
__all__ = ["ChocolateBackend"]


def __getattr__(name):
    """The backend (Relay) on first use: the C library, ``target``, ``passes`` and ``codegen``
    import without Relay, so a second engine can reuse them."""
    if name == "ChocolateBackend":
        from .backend import ChocolateBackend

        return ChocolateBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
