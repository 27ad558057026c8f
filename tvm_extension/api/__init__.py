"""The public face of the extension mechanism: what an extension is and how it is found.

An extension is a ``TVMExtension`` subclass living in a subpackage of the PEP 420
namespace package ``tvm_extension``.  Nothing here knows TVMC; Relay only to check that
``uma_backends()`` returned ``UMABackend`` instances.
"""
from .extension import TVMExtension, ExtensionError

TVMCExtension = TVMExtension  # MLonMCU's spelling
from .discovery import (
    ENV_VAR,
    RESERVED_NAMES,
    ENTRY_POINT_GROUP,
    LoadedExtension,
    discover,
    searched_places,
)

__all__ = [
    "TVMExtension",
    "TVMCExtension",
    "ExtensionError",
    "ENV_VAR",
    "RESERVED_NAMES",
    "ENTRY_POINT_GROUP",
    "LoadedExtension",
    "discover",
    "searched_places",
]
