"""Writes the example ONNX models (deterministic weights): ``python examples/make_models.py``.

The models are built by ``tvm_extension.testing.models`` (a backend's tests build them there).
"""
from pathlib import Path

import onnx

from tvm_extension.testing.models import BUILDERS

HERE = Path(__file__).resolve().parent / "models"

if __name__ == "__main__":
    HERE.mkdir(exist_ok=True)
    for name, build in BUILDERS.items():
        onnx.save(build(), HERE / f"{name}.onnx")
    print(f"wrote {', '.join(f'{n}.onnx' for n in BUILDERS)} in {HERE}")
