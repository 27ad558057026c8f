"""Vanilla: the UMA tutorial's accelerator, a MAC array that computes float32 Conv2D (any
stride and zero padding) with a bias/residual/activation output stage in shared memory, called
through ``vanilla_conv2dnchw_general`` (or ``vanilla_conv2dnhwc_general``: its DMA reads either
layout)."""
from .backend import VanillaAcceleratorBackend

__all__ = ["VanillaAcceleratorBackend"]
