"""TFLite-exact int8: Relay that computes what TFLite's reference kernels compute, bit for bit."""
from .rewrite import TFLITE, lower_tflite_rounding, make_exact

__all__ = ["TFLITE", "lower_tflite_rounding", "make_exact"]
