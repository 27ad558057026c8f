"""A non-editable install of this project works without the repository.

The wheel (built once per run) is installed (within the pins of requirements.lock) into a new
virtual environment whose other packages are this environment's (a .pth file points at them, so
TVM is not installed twice); then the README's example runs from a folder outside the checkout.
"""
import subprocess
import tarfile
from pathlib import Path

import numpy as np

from conftest import MODELS, ROOT, new_environment, onnx_reference
from tvm_extension.testing import random_inputs


def run(*command, cwd=None):
    done = subprocess.run([str(c) for c in command], cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, f"{command}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
    return done.stdout


def test_wheel_runs_the_readme_example_without_the_repository(tmp_path, framework_wheel):
    python = new_environment(tmp_path, framework_wheel, constraints=ROOT / "requirements.lock")
    packages = Path(run(python, "-c", "import site; print(site.getsitepackages()[0])").strip())
    # C sources ship inside the packages that use them, not as a top-level module; the example
    # backends are projects of their own, carried whole for `new --like`, not installed.
    assert not (packages / "c_runtime").exists() and not (packages / "uma_vanilla").exists()
    assert (packages / "tvm_extension" / "mlf" / "c_runtime" / "host" / "mlf_main.c").is_file()

    work = tmp_path / "elsewhere"
    work.mkdir()
    examples = run(python, "-m", "tvm_extension", "examples", cwd=work).strip()
    assert examples.startswith(str(packages))
    assert (Path(examples) / "uma_vanilla" / "uma_vanilla" / "c" / "vanilla_accelerator.c").is_file()
    model = work / "cnn.onnx"
    model.write_bytes((MODELS / "cnn.onnx").read_bytes())
    out = run(python, "-m", "tvm.driver.tvmc", "compile", "--target", "vanilla_accelerator",
              "--experimental-tvm-extension", Path(examples) / "uma_vanilla", model, "-f", "mlf", "-o", work / "out.tar", cwd=work)
    assert "[vanilla_accelerator] offloaded: nn.conv2d x3" in out
    with tarfile.open(work / "out.tar") as archive:
        names = archive.getnames()
        text = "".join(archive.extractfile(m).read().decode() for m in archive.getmembers()
                       if m.isfile() and m.name.endswith((".c", ".h")))
    assert "./codegen/host/src/vanilla_accelerator.c" in names and str(ROOT) not in text
    inputs = random_inputs(model, seed=3)
    np.savez(work / "in.npz", **inputs)
    run(python, "-m", "tvm_extension.mlf", "run", work / "out.tar", "-i", work / "in.npz", "-o", work / "o.npz", cwd=work)
    got = np.load(work / "o.npz")["output"]
    np.testing.assert_allclose(got, onnx_reference(model, inputs)[0], rtol=1e-4, atol=1e-5)
