"""Content digests of source trees: what decides a build or a sweep point, so that a cached result
is reused only for the same code.  ``code_digest`` is the one digest of all the code a compile can
import (the framework and every backend), for the sweep's point cache and the tests' build cache."""
import hashlib
import importlib.metadata
import json
import os
import subprocess
import sys
import sysconfig
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Iterator

# Files that can change what a backend or the framework compiles (code, C, templates, metadata).
SOURCES = (".py", ".c", ".h", ".cc", ".tmpl", ".toml", ".pth", ".json")


def source_files(root: Path) -> Iterator[Path]:
    """The source files under ``root`` in a fixed order; hidden, ``__pycache__`` and build folders left out,
    and caches (a folder holding a ``CACHEDIR.TAG``, as the sweep's cache does)."""
    for top, folders, files in os.walk(root):
        if top != str(root) and "CACHEDIR.TAG" in files:
            folders[:] = []
            continue
        folders[:] = sorted(f for f in folders if not f.startswith((".", "__pycache__")) and f not in ("build", "out"))
        for name in sorted(files):
            if name.endswith(SOURCES):
                yield Path(top) / name


def tree_digest(root: Path) -> str:
    """sha256 of the source files under ``root`` (their paths below it and their contents)."""
    digest = hashlib.sha256()
    for path in source_files(Path(root)):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def file_digest(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@lru_cache(maxsize=None)
def _import_roots() -> tuple:
    """Folders a new interpreter imports from that are not the interpreter's library: the
    editable installs' folders (this checkout, the backends'), and within site-packages the
    files of every distribution that installs into the ``tvm_extension`` namespace."""
    # Run in an empty folder: an empty PYTHONPATH entry (a trailing ':') means the working folder,
    # which must not bring a whole folder such as /tmp, changing by the second, into the digest.
    with tempfile.TemporaryDirectory(prefix="import-roots-") as empty:
        paths = json.loads(subprocess.run([sys.executable, "-c", "import json, sys; print(json.dumps(sys.path[1:]))"],
                                          capture_output=True, text=True, check=True, cwd=empty).stdout)
        paths = [p for p in paths if os.path.realpath(p or ".") != os.path.realpath(empty)]
    library = {os.path.realpath(sysconfig.get_path(name)) for name in ("stdlib", "platstdlib", "purelib", "platlib")}
    site_dirs = {os.path.realpath(p) for p in paths if p.endswith("site-packages")}
    roots = [p for p in paths if p and os.path.isdir(p) and os.path.realpath(p) not in library | site_dirs
             and not os.path.realpath(p).startswith(tuple(library))]
    installed = sorted(str(dist.locate_file(f)) for dist in importlib.metadata.distributions()
                       if any(str(f).startswith("tvm_extension/") for f in dist.files or [])
                       for f in dist.files or [] if str(f).endswith(SOURCES))
    return tuple(roots), tuple(installed)


def code_digest() -> str:
    """Digest of the code a compile in a new process can import (see ``_import_roots``)."""
    roots, installed = _import_roots()
    digest = hashlib.sha256()
    for root in roots:
        digest.update(root.encode() + b"\0" + tree_digest(Path(root)).encode())
    for path in installed:
        if os.path.isfile(path):
            digest.update(path.encode() + b"\0" + file_digest(Path(path)).encode())
    return digest.hexdigest()
