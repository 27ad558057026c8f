"""TFLite-exact int8: Relay that computes what TFLite's reference kernels compute, bit for bit."""
from .rewrite import make_exact

__all__ = ["make_exact"]
