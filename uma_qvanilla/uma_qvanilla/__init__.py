"""QVanilla: an int8 accelerator computing quantized Conv2D, dense or depthwise (NHWC, any
stride and padding) with per-channel requantization, called through its C API (c/qvanilla.h)
with weights packed at compile time.

The backend (Relay, UMA) loads on first use, so ``uma_qvanilla.passes``, ``.target``,
``.scratch`` and ``.codegen`` import without Relay."""

__all__ = ["QVanillaBackend"]


def __getattr__(name):
    if name == "QVanillaBackend":
        from .backend import QVanillaBackend

        return QVanillaBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
