"""QVanilla: an int8 accelerator computing quantized Conv2D (NHWC, any stride and padding)
with per-channel requantization, called through ``qvanilla_conv2d_nhwc_s8``."""
from .backend import QVanillaBackend

__all__ = ["QVanillaBackend"]
