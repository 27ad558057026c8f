"""The framework's tests: the checkout's folders, and what every backend's tests use
(``tvm_extension.testing``)."""
import shutil
import sys
from pathlib import Path

import pytest

from tvm_extension import testing
from tvm_extension.testing import (assert_close, assert_one_line_error, fetch, mlf_sources, onnx_reference,  # noqa: F401
                                   onnxruntime_reference, random_inputs, run_tvmc, tflite_reference,
                                   tvm_cpu_reference)

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
MODELS = EXAMPLES / "models"
# The Vanilla backend's folder: an extension folder (tvm_extension/vanilla) for --experimental-tvm-extension.
# The four example backends are also installed (scripts/env.sh), so their targets need no flag.
VANILLA_EXT = ROOT / "uma_vanilla"
BIN = Path(sys.executable).parent
sys.path.insert(0, str(EXAMPLES))
VANILLA_KERNELS = r"vanilla_(?:depthwise_)?conv2dn(?:chw|hwc)\w*"


def kernel_calls(archive_path, kernel=VANILLA_KERNELS):
    return testing.kernel_calls(archive_path, kernel)


@pytest.fixture
def tvmc():
    return run_tvmc


def without_example_backends(module: str, *args) -> list:
    """``python -m module args`` in an environment where the four example backends, installed
    beside the framework (scripts/env.sh), are out of sight: a machine with only the framework."""
    hide = f"sys.path = [p for p in sys.path if not p.startswith({str(ROOT / 'uma_')!r})]"
    run = f"sys.argv = {[module, *map(str, args)]!r}; runpy.run_module({module!r}, run_name='__main__', alter_sys=True)"
    return [sys.executable, "-c", f"import runpy, sys; {hide}; {run}"]


def stand_in_checkout(root: Path) -> Path:
    """What scripts/env.sh reads, copied into ``root``: the script, the locks and the projects."""
    (root / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "env.sh", root / "scripts")
    for name in ("requirements-demo.lock", "requirements.lock", "requirements-relax.lock", "pyproject.toml",
                 *(f"{p.parent.name}/pyproject.toml" for p in ROOT.glob("uma_*/pyproject.toml"))):
        (root / name).parent.mkdir(exist_ok=True)
        shutil.copy(ROOT / name, root / name)
    return root
