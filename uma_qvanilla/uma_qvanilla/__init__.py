"""QVanilla: an int8 accelerator computing quantized Conv2D, dense or depthwise (NHWC, any
stride and padding) with per-channel requantization, called through
``qvanilla_conv2d_nhwc_packed_s8`` / ``qvanilla_depthwise_conv2d_nhwc_packed_s8`` with weights
packed at compile time."""
from .backend import QVanillaBackend

__all__ = ["QVanillaBackend"]
