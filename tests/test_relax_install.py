"""Today's TVM on today's Python: in a new virtual environment on the Relax engine's Python (the newest
3.11-3.13 scripts/env.sh finds), ``pip install`` of the framework with its ``relax`` extra and of a
backend folder (built as wheels, the checkout nowhere on the path) gives ``tvmc`` and an MLF
of a real int8 network that gcc builds and runs, equal bit for bit to TFLite's reference kernels from
TFLite's current runtime (ai-edge-litert: tflite-runtime has no wheel past Python 3.11)."""
import os
import subprocess

import numpy as np
import pytest

from conftest import ROOT, fetch

pytestmark = pytest.mark.xdist_group("relax_install")  # one worker: the tests share one new environment

RELAX_PYTHON = ROOT / ".venv-relax" / "bin" / "python"

REFERENCE = """
import sys
import numpy as np
from tvm_extension.testing import tflite_interpreter

tflite = tflite_interpreter()
interpreter = tflite.Interpreter(model_path=sys.argv[1],
                                 experimental_op_resolver_type=tflite.OpResolverType.BUILTIN_REF)
interpreter.allocate_tensors()
inputs = np.load(sys.argv[2])
for detail in interpreter.get_input_details():
    interpreter.set_tensor(detail["index"], inputs[detail["name"]])
interpreter.invoke()
np.savez(sys.argv[3], *(interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()))
print(tflite.__name__)
"""


def run(*command, cwd):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run([str(c) for c in command], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"{command}: {done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory):
    base = run(RELAX_PYTHON, "-c", "import sys; print(sys._base_executable)", cwd=ROOT).strip()
    version = run(base, "-c", "import sys; print(*sys.version_info[:2])", cwd=ROOT).split()
    assert (3, 11) <= tuple(map(int, version)) <= (3, 13), f"the Relax engine's Python is {version}: no 3.11-3.13 found"
    venv = tmp_path_factory.mktemp("fresh") / "venv"
    run(base, "-m", "venv", venv, cwd=ROOT)
    # Not editable: pip builds the framework's and the backend's wheels; the lock keeps the versions.
    run(venv / "bin" / "python", "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
        "-c", ROOT / "requirements-relax.lock", f"{ROOT}[relax]", ROOT / "uma_qvanilla", "ai-edge-litert", cwd=ROOT)
    return venv


def test_framework_and_backend_install_on_current_python_and_make_an_mlf(fresh_venv, tmp_path):
    python = fresh_venv / "bin" / "python"
    where = run(python, "-c", "import sys, tvm, tvm_extension.cli, uma_qvanilla; "
                "print(sys.version_info[1], tvm.__version__, tvm_extension.cli.__file__, uma_qvanilla.__file__)",
                cwd=tmp_path).split()
    assert where[1].startswith("0.27") and all(str(fresh_venv) in path and str(ROOT) not in path for path in where[2:])
    model = fetch("kws_dscnn_int8")
    report = run(fresh_venv / "bin" / "tvmc", "compile", model, "--target", "qvanilla", "--tflite-exact",
                 "-f", "mlf", "-o", "model.tar", cwd=tmp_path)
    assert "[qvanilla] offloaded:" in report and "nn.conv2d x9" in report, report
    rng = np.random.default_rng(5)
    np.savez(tmp_path / "in.npz", input_1=rng.uniform(-40, 80, (1, 50, 10, 1)).astype(np.float32))
    run(python, "-m", "tvm_extension.mlf", "run", "model.tar", "-i", "in.npz", "-o", "out.npz", cwd=tmp_path)
    runtime = run(python, "-c", REFERENCE, model, "in.npz", "reference.npz", cwd=tmp_path).strip()
    assert runtime == "ai_edge_litert.interpreter"  # the only TFLite runtime installed there
    (got,), expected = np.load(tmp_path / "out.npz").values(), np.load(tmp_path / "reference.npz")["arr_0"]
    assert got.dtype == expected.dtype and np.unique(got).size > 1, got
    assert np.array_equal(got, expected), np.abs(got.astype(np.int32) - expected).max()


PROJECTS = {"my_npu": [], "my_int8": ["--int8"], "my_dma": ["--like", "strawberry"]}


@pytest.mark.real_model
@pytest.mark.parametrize("name", list(PROJECTS))
def test_a_new_project_installs_and_passes_its_own_tests_on_apache_tvm(fresh_venv, tmp_path, name):
    """python -m tvm_extension new (float, --like strawberry, --int8) on apache-tvm: the project
    pip-installs (a wheel) beside the framework, is listed, and passes its own tests, which run tvmc there."""
    python = fresh_venv / "bin" / "python"
    printed = run(python, "-m", "tvm_extension", "new", name, *PROJECTS[name], cwd=tmp_path)
    assert f"pip install './{name}[test,relax]'" in printed, printed
    run(python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-c", ROOT / "requirements-relax.lock",
        f"./{name}[test,relax]", cwd=tmp_path)
    listing = run(python, "-m", "tvm_extension", "list", cwd=tmp_path)
    assert "target qvanilla: scratch_budget=0" in listing and f"target {name}" in listing, listing
    outcome = run(python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", "tests", cwd=tmp_path / name)
    assert " passed" in outcome and "failed" not in outcome, outcome
