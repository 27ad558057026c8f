"""tvm-extension, the project's one command (the console script of pyproject.toml), in the main
environment (hhb-tvm): its sweep and project commands work there, and the Relax engine's commands
say in one line where they run (tests/test_relax_engine.py runs them in the Relax environment)."""
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import MODELS, assert_one_line_error

pytestmark = pytest.mark.quick  # scripts/test.sh --quick runs this module whole

TVM_EXTENSION = Path(sys.executable).parent / "tvm-extension"


def run(*args, cwd):
    assert TVM_EXTENSION.is_file(), f"{TVM_EXTENSION} is missing: the project is installed by scripts/env.sh"
    return subprocess.run([str(TVM_EXTENSION), *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=300)


def test_list_finds_the_installed_example_backends(tmp_path):
    done = run("list", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    targets = {line.split()[1].rstrip(":") for line in done.stdout.splitlines() if line.strip().startswith("target ")}
    assert targets == {"vanilla_accelerator", "qvanilla", "strawberry", "chocolate"}, done.stdout


def test_sweep_is_the_sweep_command(tmp_path):
    done = run("sweep", "--model", MODELS / "cnn.onnx", "--attr", "strawberry.no_such=1", "-o", tmp_path / "out",
               "--cache", tmp_path / "cache", cwd=tmp_path)
    assert "strawberry" in assert_one_line_error(done, "no_such")
    assert not (tmp_path / "out").exists()


def test_relax_commands_say_where_they_run(tmp_path):
    """With hhb-tvm there is no Relax: compile says what to do instead, in one line, writing nothing."""
    done = run("compile", MODELS / "cnn.onnx", "--target", "vanilla_accelerator", "-o", tmp_path / "cnn.so",
               cwd=tmp_path)
    assert_one_line_error(done, "the Relax engine needs apache-tvm 0.27", "compile with tvmc")
    assert not (tmp_path / "cnn.so").exists()
