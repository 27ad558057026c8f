"""One backend, one folder: each example backend's folder, copied alone (none of the other
backends, no checkout around it), installs with pip beside the framework's wheel and passes its
own tests there.  This is where the backends' tests run in the suite (``testpaths`` leaves
``uma_*/tests`` out), so they run once, the way a hardware team that copied the folder runs them.

The new environment sees this one's packages through a ``.pth`` line (TVM is not installed
twice); ``.pth`` files in that folder are not read, so the editable installs of the four
backends and of the framework stay out of sight.
"""
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, exhaustive, new_environment

BACKENDS = sorted(p.name for p in ROOT.glob("uma_*") if (p / "pyproject.toml").is_file())


def run(*command, cwd=None, timeout=600):
    done = subprocess.run([str(c) for c in command], cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{command}:\n{done.stdout[-4000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.mark.quick
def test_the_four_examples_are_found():
    assert BACKENDS == ["uma_chocolate", "uma_qvanilla", "uma_strawberry", "uma_vanilla"]


def install_alone(project: Path, work: Path, framework_wheel: Path) -> Path:
    """A new environment with the framework's wheel and ``project`` installed (not editable); its python."""
    return new_environment(work, "--no-deps", framework_wheel, project)


def assert_alone(python: Path, package: str):
    """Only ``package`` of the example backends is importable, from the new environment."""
    others = [b for b in BACKENDS if b != package]
    seen = run(python, "-c", "import importlib.util as u; "
               f"print([n for n in {others!r} if getattr(u.find_spec(n), 'origin', None)]); "
               f"print(u.find_spec({package!r}).origin)")
    hidden, origin = seen.splitlines()
    assert hidden == "[]" and origin.startswith(str(python.parents[1])), seen


def assert_own_tests_pass(python: Path, project: Path, *arguments):
    """pytest ARGUMENTS (all of ``tests`` by default) pass in ``project``, run by ``python``."""
    done = subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", *(arguments or ["tests"])],
                          cwd=project,
                          capture_output=True, text=True, timeout=3600)
    assert done.returncode == 0, f"{project.name}'s own tests, alone:\n{done.stdout[-6000:]}\n{done.stderr[-2000:]}"
    summary = done.stdout.strip().splitlines()[-1]
    assert " passed" in summary and "failed" not in summary and "error" not in summary, done.stdout[-3000:]


def installed_alone(backend: str, work: Path, framework_wheel: Path):
    """The folder of ``backend`` copied alone into ``work`` and installed in an environment of its
    own: (the copy, its python)."""
    copy = work / backend
    shutil.copytree(ROOT / backend, copy, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))
    python = install_alone(copy, work, framework_wheel)
    assert_alone(python, backend)
    return copy, python


def test_every_backend_has_tests():
    assert all(sorted((ROOT / b / "tests").glob("test_*.py")) for b in BACKENDS)


@pytest.mark.real_model
@pytest.mark.parametrize("backend", BACKENDS)
def test_backend_folder_alone_installs_and_passes_its_tests(request, tmp_path, framework_wheel, backend):
    """The folder's tests, all in one pytest as its team runs them, in the folder's own
    installation; its tests marked exhaustive only in the exhaustive run."""
    copy, python = installed_alone(backend, tmp_path, framework_wheel)
    assert_own_tests_pass(python, copy, "--basetemp", tmp_path / "own", *selection(request.config), "tests")


def selection(config, marks=()):
    """pytest's -m for a backend's own tests: ``marks`` left out, and the exhaustive ones but in an exhaustive run."""
    left_out = list(marks) + ([] if exhaustive(config) else ["exhaustive"])
    return ["-m", " and ".join(f"not {m}" for m in left_out)] if left_out else []


# Vanilla's copy and Chocolate's (RTL, testbenches and Verilator's names renamed too) in the default run
LIKE = [pytest.param(b.removeprefix("uma_"), marks=[] if b in ("uma_vanilla", "uma_chocolate") else pytest.mark.exhaustive)
        for b in BACKENDS]


@pytest.mark.real_model
@pytest.mark.parametrize("example", LIKE)
def test_new_like_each_example_installs_and_passes_its_tests(request, tmp_path, framework_wheel, example):
    """`new my_npu --like EXAMPLE` copies the example under the new name (target, package, classes,
    C files and symbols, tests): the copy installs alone and its renamed end-to-end tests pass."""
    done = subprocess.run([sys.executable, "-m", "tvm_extension", "new", "my_npu", "--like", example], cwd=tmp_path,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    project = tmp_path / "my_npu"
    assert (project / "my_npu" / "c").is_dir() and (project / "tvm_extension" / "my_npu" / "__init__.py").is_file()
    words = [w for w in (example, example.upper(), "uma_" + example)]
    left = [f"{path.relative_to(project)}: {line.strip()}" for path in sorted(project.rglob("*.py")) + sorted(
        project.rglob("*.[ch]")) for line in path.read_text().splitlines()
            if any(re.search(rf"(?<![A-Za-z]){w}", line) for w in words)]
    # The RTL's testbenches and bridge: Verilator's class of module M is VM (Vchocolate_top.h)
    left += [f"{path.relative_to(project)}: {line.strip()}" for path in sorted(project.rglob("*.cpp")) + sorted(
        project.rglob("*.v")) for line in path.read_text().splitlines() if any(w in line for w in words)]
    assert left == [], left[:5]  # nothing of the example's names is left in code
    python = install_alone(project, tmp_path, framework_wheel)
    assert "tvm_extension.my_npu:MyNpuExtension" in run(python, "-m", "tvm_extension", "list", cwd=tmp_path)
    # Its tests through tvmc on the small models: the renamed backend end to end.  The C unit tests
    # and the real networks are the example's own, run above under its own name; run again here
    # they would prove nothing more.
    tests = sorted(t.name for t in (project / "tests").glob("test_my_npu*.py"))
    end_to_end = [t for t in tests if "end_to_end" in t] or [t for t in tests if t == "test_my_npu.py"] or tests
    assert end_to_end, tests
    assert_own_tests_pass(python, project, *selection(request.config, ["real_model"]), *(f"tests/{t}" for t in end_to_end))
