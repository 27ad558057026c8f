"""tvm-extension, the project's command (a console script of pyproject.toml), in the Relay
engine's environment (hhb-tvm): its sweep and project commands work there, and its compile is TVM's
own tvmc (tests/test_relax_engine.py runs the same commands on the Relax engine)."""
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


@pytest.mark.relay
def test_sweep_is_the_sweep_command(tmp_path):
    done = run("sweep", "--model", MODELS / "cnn.onnx", "--attr", "strawberry.no_such=1", "-o", tmp_path / "out",
               "--cache", tmp_path / "cache", cwd=tmp_path)
    assert "strawberry" in assert_one_line_error(done, "no_such")
    assert not (tmp_path / "out").exists()


@pytest.mark.relay
def test_compile_is_tvms_own_tvmc_on_the_relay_engine(tmp_path):
    """With hhb-tvm, tvm-extension compile is TVM's own tvmc compile (its options, extensions and
    MLF): the same archive as tvmc's, byte for byte."""
    done = run("compile", "--help", cwd=tmp_path)
    assert done.returncode == 0 and "--cross-compiler" in done.stdout and "--experimental-tvm-extension" in done.stdout
    for command, out in ((TVM_EXTENSION, "a.tar"), (TVM_EXTENSION.parent / "tvmc", "b.tar")):
        done = subprocess.run([str(command), "compile", "--target", "vanilla_accelerator", str(MODELS / "conv2d.onnx"),
                               "-f", "mlf", "-o", out], capture_output=True, text=True, cwd=tmp_path, timeout=300)
        assert done.returncode == 0, done.stderr
    assert (tmp_path / "a.tar").read_bytes() == (tmp_path / "b.tar").read_bytes()
