"""The Relax engine: the same backend packages compiled with apache-tvm 0.27 (Relax), beside
the Relay/TVMC engine (hhb-tvm), which never imports this package.

    python -m tvm_extension.relax compile MODEL.onnx --target vanilla_accelerator -o model.so
    python -m tvm_extension.relax run model.so -i in.npz -o out.npz

A backend takes part by adding ``relax_patterns.py`` to its package (see ``backends``).  Stages,
one module each: ``backends`` (find a backend and its C library), ``patterns`` (the Relax
patterns of float conv engines), ``lower`` (partition, then each match becomes one call of the
backend's C API), ``build`` (ONNX -> shared library with the C library linked in, and the VM run);
``calls`` helps a backend whose kernel is a program of many calls check their statuses.
"""
from .backends import UserError

__all__ = ["UserError", "compile_model", "run_model"]


def __getattr__(name):
    # Imported on use, so that ``python -m tvm_extension.relax`` under hhb-tvm says in one line
    # that it needs apache-tvm instead of failing while importing.
    if name in ("compile_model", "run_model"):
        from . import build  # pylint: disable=import-outside-toplevel

        return getattr(build, name)
    raise AttributeError(f"module {__name__} has no attribute {name}")
