"""UMA without native UMA: registration, lowering and C codegen of UMA backends in Python.

Knows Relay and TIR, nothing of TVMC's command line.  Names are imported from their modules on
first use, so ``tvm_extension.uma.config`` (the compile's settings, which a backend's TIR pass
reads) and ``attrs`` import without Relay.
"""
import importlib

_MODULES = {
    "lower": ["lift_constants_pass", "offloaded_functions"],
    "register": ["configure", "register_backend", "registered_backends"],
    "attrs": ["BackendError", "attr_ranges", "register_target", "target_attrs"],
    "config": ["COMPILE_LOCK", "CompileSettings", "TargetConfig", "compiling", "config_of", "current", "settings",
               "with_target"],
    "codegen": ["BackendFailure", "backend_failure", "c_library"],
    "report": ["OffloadReport", "offload_report"],
    "partition": ["describe_partition_failure"],
}
_WHERE = {name: module for module, names in _MODULES.items() for name in names}
__all__ = [*_WHERE, "status_checked"]


def __getattr__(name):
    if name == "status_checked":  # moved to the kit (Relay-free); still importable from here
        from tvm_extension.kit.calls import status_checked  # pylint: disable=import-outside-toplevel

        return status_checked
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
