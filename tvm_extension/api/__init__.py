"""The public face of the extension mechanism: what an extension is and how it is found.

An extension is a ``TVMExtension`` subclass living in a subpackage of the PEP 420
namespace package ``tvm_extension``.  Nothing here knows TVMC or Relay.
"""
from .extension import TVMExtension, ExtensionError

TVMCExtension = TVMExtension  # MLonMCU's spelling
from .discovery import (
    ENV_VAR,
    RESERVED_NAMES,
    ENTRY_POINT_GROUP,
    LoadedExtension,
    discover,
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
]
