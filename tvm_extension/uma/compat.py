"""Upstream ``UMABackend`` made to work on this TVM build, for the Python API flow.

Patched in by the start-up hook when ``tvm.relay.backend.contrib.uma.backend`` is imported
and native UMA is missing:

* ``register()`` registers the backend through this package instead of the missing
  ``relay.backend.contrib.uma.RegisterTarget``;
* ``partition()`` also takes an ``(IRModule, params)`` pair or a ``TVMCModel`` (anything
  with ``mod`` and ``params``) and gives back the same kind of thing;
* the ``includes`` hook given to ``_register_codegen`` is also kept on the backend: upstream
  only registers it as a global function named after the target, which the last backend
  constructed with that name owns (an installed backend shadowed by a folder the user named).
"""
import copy

import tvm


def _native_uma_available() -> bool:
    return tvm.get_global_func("relay.backend.contrib.uma.RegisterTarget", allow_missing=True) is not None


def partition_any(backend, model, params=None, original=None, mod_name="default"):
    """Partition an IRModule, an (IRModule, params) pair or a TVMCModel-like object.

    ``original(backend, mod, params, mod_name)`` does the partitioning of an IRModule.
    """
    if isinstance(model, tvm.IRModule):
        return original(backend, model, params, mod_name)
    if isinstance(model, tuple) and len(model) == 2 and isinstance(model[0], tvm.IRModule):
        return original(backend, model[0], model[1] if params is None else params, mod_name), {}
    if isinstance(getattr(model, "mod", None), tvm.IRModule) and hasattr(model, "params"):
        partitioned = copy.copy(model)
        partitioned.mod = original(backend, model.mod, model.params if params is None else params, mod_name)
        partitioned.params = {}  # bound into the module by partitioning
        return partitioned
    raise TypeError(
        f"{type(backend).__name__}.partition takes an IRModule, an (IRModule, params) pair or a TVMCModel, "
        f"not {type(model).__name__}"
    )


def install(uma_backend_module):
    cls = uma_backend_module.UMABackend
    if getattr(cls, "_tvm_extension_patched", False):
        return
    from .partition import partition as partition_module  # pylint: disable=import-outside-toplevel

    def partition(self, mod, params=None, mod_name="default"):
        """Partition ``mod`` (an IRModule, an (IRModule, params) pair or a TVMCModel) for this backend;
        offloaded functions are named after ``mod_name`` as ``relay.build`` names the rest."""
        return partition_any(self, mod, params, partition_module, mod_name)

    cls.partition = partition
    from tvm.relay.backend.contrib.uma.api.codegen import UMACodegen  # pylint: disable=import-outside-toplevel

    register_c_codegen = UMACodegen._register_c_codegen

    def keep_includes(self, includes=None, **kwargs):
        self.includes = includes
        return register_c_codegen(self, includes, **kwargs)

    UMACodegen._register_c_codegen = keep_includes
    if not _native_uma_available():
        def register(self):
            from .register import register_backend  # pylint: disable=import-outside-toplevel

            register_backend(self)

        register.__doc__ = "Register the backend (Python registration: this TVM build has no native UMA)."
        cls.register = register
    cls._tvm_extension_patched = True
