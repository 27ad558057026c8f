"""Finished points on disk, one JSON file each, keyed by what decides their result: the model's
sha256, the backend and its sources' digest, its attributes, the digest of all the code a compile
imports (the framework's and every backend's: ``api.digest.code_digest``, as the tests' build
cache), this project's version and TVM's.  Written as each point
finishes (a killed sweep resumes where it stopped); a second sweep finds them all."""
import hashlib
import json
import os
from pathlib import Path
from typing import Optional

import numpy as np

from .grid import Model, Point


def default_folder() -> Path:
    default = Path.home() / ".cache" / "tvm-uma-extensions" / "sweeps"
    return Path(os.environ.get("TVM_EXTENSION_SWEEP_CACHE", default))


def versions() -> str:
    from tvm_extension.api.version import version_line  # pylint: disable=import-outside-toplevel

    return version_line()


def _digest(*parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:32]


def code() -> str:
    from tvm_extension.api.digest import code_digest  # pylint: disable=import-outside-toplevel

    return code_digest()[:32]


class Cache:
    def __init__(self, folder: Path, version: Optional[str] = None, code_digest: Optional[str] = None):
        self.folder = Path(folder)
        self.version = version or versions()
        self.code = code_digest or code()  # once per sweep: the code its points run

    def graph_stem(self, point: Point) -> Path:
        """Where the drawing of the point's model partitioned by its backend is kept (no suffix)."""
        key = _digest(point.model.sha256, point.model.input_shapes, point.backend, point.attrs, self.version,
                      point.backend_code, self.code)
        return self.folder / "graphs" / key

    def key(self, point: Point) -> str:
        parts = [point.model.sha256, point.model.input_shapes, point.backend, point.attrs, self.version, self.code]
        optional = [point.board, point.backend_code, point.engine if point.engine != "relay" else None,
                    f"device={point.device}" if point.device else None]
        return _digest(*parts, *[part for part in optional if part])

    def _write(self, path: Path, write):
        path.parent.mkdir(parents=True, exist_ok=True)
        tag = self.folder / "CACHEDIR.TAG"  # backup tools and the code digest skip the folder
        if not tag.exists():
            tag.write_text("Signature: 8a477f597d28d172789f06886806bc55\n# tvm-uma-extensions' sweep cache\n")
        partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
        write(partial)
        partial.replace(path)  # atomic: a killed sweep leaves no half record

    def get(self, point: Point) -> Optional[dict]:
        path = self.folder / "points" / f"{self.key(point)}.json"
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            return None

    def put(self, point: Point, record: dict):
        self._write(self.folder / "points" / f"{self.key(point)}.json",
                    lambda p: p.write_text(json.dumps(record, sort_keys=True)))

    # The CPU build's inputs and outputs, once per model.
    def _reference_path(self, model: Model) -> Path:
        return self.folder / "references" / f"{_digest(model.sha256, model.input_shapes, self.version, self.code)}.npz"

    def get_reference(self, model: Model):
        try:
            with np.load(self._reference_path(model)) as data:
                inputs = {k[3:]: data[k] for k in data.files if k.startswith("in:")}
                outputs = [data[f"out:{i}"] for i in range(sum(k.startswith("out:") for k in data.files))]
            return inputs, outputs
        except (OSError, ValueError, KeyError):
            return None

    def put_reference(self, model: Model, inputs, outputs):
        arrays = {**{f"in:{k}": v for k, v in inputs.items()}, **{f"out:{i}": v for i, v in enumerate(outputs)}}

        def save(path):
            with open(path, "wb") as file:
                np.savez(file, **arrays)

        self._write(self._reference_path(model), save)
