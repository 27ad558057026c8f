"""The graph language of the integer builders: Relay where TVM has it (hhb-tvm), and on apache-tvm
(Relax only) the same few Relay functions over Relax operators (``relax_ops``), so that one set of
builders computes TFLite's arithmetic on both engines."""
try:
    from tvm import relay
except ImportError:
    from . import relax_ops as relay

__all__ = ["relay"]
