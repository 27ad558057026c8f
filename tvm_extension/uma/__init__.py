"""UMA without native UMA: registration, lowering and C codegen of UMA backends in Python.

Knows Relay and TIR, nothing of TVMC's command line.
"""
from .lower import lift_constants_pass, offloaded_functions, status_checked
from .register import BackendError, attr_ranges, configure, register_backend, registered_backends, target_attrs
from .config import COMPILE_LOCK, CompileSettings, TargetConfig, compiling, config_of, current, settings, with_target
from .codegen import BackendFailure, backend_failure, c_library
from .report import OffloadReport, offload_report
from .partition import describe_partition_failure

__all__ = [
    "BackendError",
    "lift_constants_pass",
    "offloaded_functions",
    "status_checked",
    "configure",
    "COMPILE_LOCK",
    "CompileSettings",
    "TargetConfig",
    "compiling",
    "config_of",
    "current",
    "settings",
    "with_target",
    "target_attrs",
    "attr_ranges",
    "register_backend",
    "registered_backends",
    "c_library",
    "OffloadReport",
    "offload_report",
    "describe_partition_failure",
    "BackendFailure",
    "backend_failure",
]
