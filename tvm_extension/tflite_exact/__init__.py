"""TFLite-exact int8: Relay that computes what TFLite's reference kernels compute, bit for bit.

The rewrite (Relay) loads on first use, so that ``fixed_point``'s integer functions, and the kit's
quantization helpers built on them, import on apache-tvm (no Relay) for the Relax engine too."""

__all__ = ["TFLITE", "lower_tflite_rounding", "make_exact"]


def __getattr__(name):
    if name in __all__:
        from . import rewrite

        return getattr(rewrite, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
