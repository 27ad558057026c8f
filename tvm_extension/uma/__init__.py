"""UMA without native UMA: registration, lowering and C codegen of UMA backends in Python.

Knows Relay and TIR, nothing of TVMC's command line.
"""
from .lower import lift_constants_pass, offloaded_functions, status_checked
from .register import BackendError, configure, register_backend, registered_backends
from .codegen import C_LIBRARIES, c_library_files
from .report import OffloadReport, offload_report
from .partition import describe_partition_failure
from .codegen import BackendFailure, LAST_FAILURE

__all__ = [
    "BackendError",
    "lift_constants_pass",
    "offloaded_functions",
    "status_checked",
    "configure",
    "register_backend",
    "registered_backends",
    "C_LIBRARIES",
    "c_library_files",
    "OffloadReport",
    "offload_report",
    "describe_partition_failure",
    "BackendFailure",
    "LAST_FAILURE",
]
