"""The tests' build cache: a build that another test (or an earlier run) made from the same inputs
and the same code is reused; one made from other code never is.

A key is a sha256 of what decides the build, as the sweep's cache keys its points: the command,
with each file it names replaced by its contents' digest and each folder by its sources' digest;
the sources of the code a compile can import from outside the interpreter's own library (the
framework, and every backend installed or on the path, editable or not); this project's and
TVM's versions.  The folder is ``$TVM_EXTENSION_BUILD_CACHE``; the suite sets one per run,
shared by its workers, unless it is set already (a developer may keep one across runs).  Unset,
nothing is cached.
"""
import hashlib
import json
import os
import shutil
from functools import lru_cache
from pathlib import Path
from typing import Callable, Optional

from tvm_extension.api.digest import _import_roots, code_digest, file_digest, tree_digest  # noqa: F401  (_import_roots: its tests)

ENV_VARIABLE = "TVM_EXTENSION_BUILD_CACHE"


def folder() -> Optional[Path]:
    value = os.environ.get(ENV_VARIABLE)
    return Path(value) if value else None


@lru_cache(maxsize=None)
def versions() -> str:
    from tvm_extension.api.version import version_line  # pylint: disable=import-outside-toplevel

    return version_line()


def key(*parts) -> str:
    """The key of a build made from ``parts`` (paths among them are digested by contents) and the code."""
    def described(part):
        if isinstance(part, Path) or (isinstance(part, str) and os.sep in part and os.path.exists(part)):
            path = Path(part)
            return ("folder", tree_digest(path)) if path.is_dir() else ("file", file_digest(path))
        return part

    text = json.dumps([[described(p) for p in parts], code_digest(), versions()], default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:40]


def cached(build_key: str, make: Callable[[Path], None]) -> Optional[Path]:
    """The folder holding the build of ``build_key``: made by ``make(folder)`` unless already
    cached (by this or another process; one makes it, the others wait).  None without a cache:
    the caller builds as usual."""
    root = folder()
    if root is None:
        return None
    import fcntl  # pylint: disable=import-outside-toplevel  (POSIX, like the suite)

    root.mkdir(parents=True, exist_ok=True)
    entry = root / build_key
    with open(root / f"{build_key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not entry.is_dir():
            partial = root / f"{build_key}.{os.getpid()}.partial"
            shutil.rmtree(partial, ignore_errors=True)
            partial.mkdir()
            try:
                make(partial)
            except BaseException:
                shutil.rmtree(partial, ignore_errors=True)
                raise
            partial.rename(entry)  # atomic: a killed run leaves no half entry
    return entry
