"""The framework's tests: the checkout's folders, and what every backend's tests use
(``tvm_extension.testing``)."""
import fcntl
import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

from tvm_extension import testing
from tvm_extension.cli import relay_engine
from tvm_extension.testing import build_cache
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


# The zoo's float networks' inputs (the MTCNN files leave the spatial size open: tvmc's --input-shapes fixes it)
ZOO_FLOAT_INPUTS = {
    "blazeface": {"input": (1, 128, 128, 3)},
    "kws_on_off_float32": {"serving_default_input_1:0": (1, 98, 1, 104)},
    "face_landmark": {"input_1": (1, 192, 192, 3)},
    "mtcnn_pnet": {"input_1": (1, 24, 24, 3)},
    "mtcnn_rnet": {"input_2": (1, 24, 24, 3)},
    "mtcnn_onet": {"input_3": (1, 48, 48, 3)},
}


def shapes_option(shapes: dict) -> str:
    """tvmc's --input-shapes value of {name: shape}."""
    return " ".join(f"{name}:[{','.join(map(str, shape))}]" for name, shape in shapes.items())


def vanilla_relay_mlf(name: str, out: Path):
    """The mission's command (Vanilla, its folder named) on a zoo float network: the same command
    in every test that compares with it, so the run compiles it once (the build cache)."""
    return run_tvmc("compile", "--target", "vanilla_accelerator", "--experimental-tvm-extension", VANILLA_EXT,
                    "--input-shapes", shapes_option(ZOO_FLOAT_INPUTS[name]), fetch(name), "-f", "mlf", "-o", out,
                    reuse=True)


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
    for name in ("requirements-demo.lock", "requirements.lock", "requirements-relax.lock",
                 "requirements-relax-test.lock", "pyproject.toml",
                 *(f"{p.parent.name}/pyproject.toml" for p in ROOT.glob("uma_*/pyproject.toml"))):
        (root / name).parent.mkdir(exist_ok=True)
        shutil.copy(ROOT / name, root / name)
    return root


@pytest.fixture(scope="session")
def shared_folder(tmp_path_factory) -> Path:
    """A folder all of this run's pytest-xdist workers see (the run's base temporary folder)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def made_once(shared: Path, name: str, make) -> Path:
    """``shared/name``, made by ``make(folder)`` in the first worker that asks; the others wait for it."""
    folder = shared / name
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / ".made").exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            make(folder)
            (folder / ".made").touch()
    return folder


@pytest.fixture(scope="session", autouse=True)
def build_cache_of_the_run(shared_folder):
    """Builds are shared by this run's tests and workers (``tvm_extension.testing.build_cache``),
    and by the backend folders' own runs, which inherit the variable; a cache the developer set
    is kept."""
    if not os.environ.get(build_cache.ENV_VARIABLE):
        os.environ[build_cache.ENV_VARIABLE] = str(shared_folder / "builds")
    use_ccache(Path(os.environ[build_cache.ENV_VARIABLE]))
    yield


def use_ccache(cache: Path):
    """MLF builds go through ccache (when installed and no CC is set) with its objects beside the
    run's builds: the kernel libraries, the same in every test's MLF, compile once.  CC names a
    one-word wrapper (TVM takes CC as one program when CXX is unset; CXX stays TVM's g++)."""
    if os.environ.get("CC") or not shutil.which("ccache"):
        return
    wrapper = cache / "ccache-gcc"
    if not wrapper.exists():
        cache.mkdir(parents=True, exist_ok=True)
        partial = cache / f"ccache-gcc.{os.getpid()}"
        partial.write_text('#!/bin/sh\nexec ccache gcc "$@"\n')
        partial.chmod(0o755)
        partial.replace(wrapper)
    os.environ.update(CC=str(wrapper), CCACHE_DIR=str(cache / "ccache"))
    os.environ.setdefault("CXX", "g++")


@pytest.fixture(scope="session")
def framework_wheel(shared_folder) -> Path:
    """This project's wheel, built once per run."""
    def build(dist):
        done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), str(ROOT)],
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-3000:]

    (wheel,) = made_once(shared_folder, "framework-wheel", build).glob("*.whl")
    return wheel


def new_environment(folder: Path, *install, constraints=None) -> Path:
    """A new virtual environment in ``folder`` that sees this one's packages through a ``.pth``
    line (TVM is not installed twice; ``.pth`` files in that folder, the editable installs of the
    framework and the examples, are not read), with ``install`` pip-installed into it (by this
    environment's pip) and console scripts for tvmc and pytest; its python."""
    venv = folder / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    packages = venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    (packages / "shared_packages.pth").write_text(site.getsitepackages()[0] + "\n")
    if install:
        pip_into(python, *(["-c", constraints] if constraints else []), *install)
    for name, module in (("tvmc", "tvm.driver.tvmc"), ("pytest", "pytest")):
        (venv / "bin" / name).write_text(f'#!/bin/sh\nexec "{python}" -m {module} "$@"\n')
        (venv / "bin" / name).chmod(0o755)
    return python


def pip_into(python: Path, *args, cwd=None):
    """``pip install ARGS`` into the environment of ``python``."""
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "--disable-pip-version-check",
                           "install", "-q", *map(str, args)], capture_output=True, text=True, cwd=cwd)
    assert done.returncode == 0, f"pip install {args}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


def tvmc_in(python: Path, *args, cwd=None):
    """tvmc ARGS in the environment of ``python`` (made by ``new_environment``)."""
    return subprocess.run([str(python.parent / "tvmc"), *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          timeout=900)


# The longest tests (minutes each on a 2-core machine: a backend folder's own suite, real networks
# compiled on both engines) go first, so that the workers do not end with one of them running alone.
LONGEST_FIRST = ("test_backend_folders.py::test_backend_folder_alone", "test_sweep.py::", "test_tflite_exact.py::test_real",
                 "test_relax_install.py::", "test_relax_tflite_exact.py::test_real", "test_relax_mlf.py::test_real",
                 "test_backend_folders.py::test_new_like", "test_relax_batchnorm.py::")


def pytest_addoption(parser):
    parser.addoption("--exhaustive", action="store_true",
                     help="also the tests marked exhaustive: every further size, tile shape, network and backend "
                          "of a capability the default run tests once (scripts/test.sh --exhaustive)")


def exhaustive(config) -> bool:
    return config.getoption("--exhaustive")


# Which engines this run has: hhb-tvm's TVM (the Relay engine, Python 3.10) beside .venv-relax, or
# apache-tvm alone (scripts/env.sh on a machine without Python 3.10), whose run leaves the Relay
# engine's tests out (the modules by pytest.importorskip("tvm.relay"), single tests marked relay).
RELAY = relay_engine()


def pytest_report_header(config):
    import tvm  # pylint: disable=import-outside-toplevel

    if RELAY:
        return f"engines: Relay (TVM {tvm.__version__}) and Relax (.venv-relax, its own tests' interpreter)"
    return (f"engines: Relax only (apache-tvm {tvm.__version__}): no Python 3.10 here, the Relay engine's "
            "tests are skipped")


def pytest_collection_modifyitems(config, items):
    if not RELAY:
        for item in items:
            if item.get_closest_marker("relay"):
                item.add_marker(pytest.mark.skip(reason="the Relay engine's (hhb-tvm, Python 3.10): not installed here"))
    if not exhaustive(config):
        left_out = [item for item in items if item.get_closest_marker("exhaustive")]
        if left_out:
            config.hook.pytest_deselected(items=left_out)
            items[:] = [item for item in items if not item.get_closest_marker("exhaustive")]
    rank = lambda item: next((i for i, prefix in enumerate(LONGEST_FIRST) if prefix in item.nodeid), len(LONGEST_FIRST))
    items.sort(key=rank)  # stable: the rest keep their order
