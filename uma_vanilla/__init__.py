"""Vanilla: the UMA tutorial's accelerator, a MAC array that computes float32 Conv2D (NCHW,
stride 1, same padding) in shared memory, called through ``vanilla_conv2dnchw``."""
from .backend import VanillaAcceleratorBackend

__all__ = ["VanillaAcceleratorBackend"]
