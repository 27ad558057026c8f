"""One backend, one folder: each example backend's folder, copied alone (none of the other
backends, no checkout around it), installs with pip beside the framework's wheel and passes its
own tests there.  This is where the backends' tests run in the suite (``testpaths`` leaves
``uma_*/tests`` out), so they run once, the way a hardware team that copied the folder runs them.

The new environment sees this one's packages through a ``.pth`` line (TVM is not installed
twice); ``.pth`` files in that folder are not read, so the editable installs of the four
backends and of the framework stay out of sight.
"""
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

BACKENDS = sorted(p.name for p in ROOT.glob("uma_*") if (p / "pyproject.toml").is_file())


def run(*command, cwd=None, timeout=600):
    done = subprocess.run([str(c) for c in command], cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{command}:\n{done.stdout[-4000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def framework_wheel(tmp_path_factory):
    dist = tmp_path_factory.mktemp("dist")
    run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", dist, ROOT)
    (wheel,) = dist.glob("*.whl")
    return wheel


def test_the_four_examples_are_found():
    assert BACKENDS == ["uma_chocolate", "uma_qvanilla", "uma_strawberry", "uma_vanilla"]


@pytest.mark.real_model
@pytest.mark.parametrize("backend", BACKENDS)
def test_backend_folder_alone_installs_and_passes_its_tests(tmp_path, framework_wheel, backend):
    copy = tmp_path / "alone" / backend
    shutil.copytree(ROOT / backend, copy, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", venv)
    python = venv / "bin" / "python"
    packages = Path(run(python, "-c", "import site; print(site.getsitepackages()[0])").strip())
    (packages / "shared_packages.pth").write_text(site.getsitepackages()[0] + "\n")
    run(python, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps", framework_wheel, copy)
    # tvmc's console script, as pip would make it for TVM's distribution (it sits in the shared packages)
    (venv / "bin" / "tvmc").write_text(f'#!/bin/sh\nexec "{python}" -m tvm.driver.tvmc "$@"\n')
    (venv / "bin" / "tvmc").chmod(0o755)

    others = [b for b in BACKENDS if b != backend]
    seen = run(python, "-c", "import importlib.util as u, sys; "
               f"print([n for n in {others!r} if getattr(u.find_spec(n), 'origin', None)]); "
               f"print(u.find_spec({backend!r}).origin)")
    hidden, origin = seen.splitlines()
    assert hidden == "[]" and origin.startswith(str(packages)), seen  # the installed copy, alone

    done = subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"], cwd=copy,
                          capture_output=True, text=True, timeout=3600)
    assert done.returncode == 0, f"{backend}'s own tests, alone:\n{done.stdout[-6000:]}\n{done.stderr[-2000:]}"
    assert " passed" in done.stdout.splitlines()[-1] and "failed" not in done.stdout.splitlines()[-1], done.stdout
