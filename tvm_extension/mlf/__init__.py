"""Model Library Format without native microTVM: export (Relay engine), layout (Relax engine),
and build & run on the host.

Knows TVM's build artefacts, nothing of TVMC's command line.  The exporter needs the Relay
engine's TVM and is imported on first use, so the rest serves the Relax engine too.
"""
from .host import HostBuildError, HostProgram, build

__all__ = ["export_model_library_format", "HostBuildError", "HostProgram", "build"]


def __getattr__(name):
    if name == "export_model_library_format":
        from .export import export_model_library_format  # pylint: disable=import-outside-toplevel

        return export_model_library_format
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
