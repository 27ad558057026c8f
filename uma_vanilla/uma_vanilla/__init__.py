"""Vanilla: the UMA tutorial's accelerator, a MAC array that computes float32 Conv2D (any
stride and zero padding) with a bias/residual/activation output stage in shared memory, called
through its C API (c/vanilla_accelerator.h; its DMA reads NCHW and NHWC).

The backend (Relay, UMA) loads on first use, so ``uma_vanilla.passes``, ``.target`` and
``.codegen`` import without Relay."""

__all__ = ["VanillaAcceleratorBackend"]


def __getattr__(name):
    if name == "VanillaAcceleratorBackend":
        from .backend import VanillaAcceleratorBackend

        return VanillaAcceleratorBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
