"""Content digests of source trees: what decides a build or a sweep point, so that a cached result
is reused only for the same code (the sweep's point cache, the tests' build cache)."""
import hashlib
import os
from pathlib import Path
from typing import Iterator

# Files that can change what a backend or the framework compiles (code, C, templates, metadata).
SOURCES = (".py", ".c", ".h", ".cc", ".tmpl", ".toml", ".pth", ".json")


def source_files(root: Path) -> Iterator[Path]:
    """The source files under ``root`` in a fixed order; hidden, ``__pycache__`` and build folders left out."""
    for top, folders, files in os.walk(root):
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
