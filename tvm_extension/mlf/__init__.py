"""Model Library Format without native microTVM: export, and build & run on the host.

Knows TVM's build artefacts, nothing of TVMC's command line.
"""
from .export import export_model_library_format
from .host import HostBuildError, HostProgram, build

__all__ = ["export_model_library_format", "HostBuildError", "HostProgram", "build"]
