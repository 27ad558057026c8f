"""Vanilla: the UMA tutorial's accelerator, a MAC array that computes float32 Conv2D (stride 1,
same padding) in shared memory, called through ``vanilla_conv2dnchw`` (or ``vanilla_conv2dnhwc``:
its DMA reads either layout)."""
from .backend import VanillaAcceleratorBackend

__all__ = ["VanillaAcceleratorBackend"]
