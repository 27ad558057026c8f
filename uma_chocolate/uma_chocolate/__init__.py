"""Chocolate: convolutions decomposed onto a small matrix core, the loops visible to TVM."""
from .backend import ChocolateBackend

__all__ = ["ChocolateBackend"]
