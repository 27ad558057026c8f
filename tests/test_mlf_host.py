"""The host build of an MLF (tvm_extension.mlf.host.build): the C compiler is $CC or the one
given (a command line, e.g. ``ccache gcc``), one object per source; a library source is compiled
by the same command wherever the MLF was unpacked, so a compiler cache reuses its object."""
import re
import shlex

import numpy as np
import pytest

from conftest import EXAMPLES, onnx_reference, random_inputs, run_tvmc
from tvm_extension.mlf import build

pytestmark = pytest.mark.quick

MODEL = EXAMPLES / "models" / "cnn.onnx"


@pytest.fixture(scope="module")
def mlf(tmp_path_factory):
    out = tmp_path_factory.mktemp("mlf") / "cnn.tar"
    done = run_tvmc("compile", "--target", "vanilla_accelerator", MODEL, "-f", "mlf", "-o", out, reuse=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return out


def logging_compiler(folder):
    """A compiler command that writes each command line it runs (with its folder) to a log, then runs gcc."""
    script = folder / "logging cc"  # a space in the path: the command line is quoted, not split on it
    script.write_text('#!/bin/sh\necho "$PWD|$*" >> "$(dirname "$0")/log"\nexec gcc "$@"\n')
    script.chmod(0o755)
    return script, folder / "log"


def library_commands(log_text):
    """The compile commands of the MLF's own sources (not the harness), their output paths left out."""
    return sorted(re.sub(r" -o \S+", "", line.split("|", 1)[1]) for line in log_text.splitlines()
                  if " -c " in line and "mlf_main.c" not in line)


def test_library_sources_compile_the_same_wherever_unpacked(mlf, tmp_path, monkeypatch):
    script, log = logging_compiler(tmp_path)
    inputs = random_inputs(MODEL)
    (expected,) = onnx_reference(MODEL, inputs)
    commands, outputs = [], []
    for where in ("a", "b/deeper"):
        log.unlink(missing_ok=True)
        if where == "a":  # $CC, a command line
            monkeypatch.setenv("CC", f"sh {shlex.quote(str(script))}")
            program = build(mlf, tmp_path / where)
            monkeypatch.delenv("CC")
        else:
            program = build(mlf, tmp_path / where, cc=shlex.quote(str(script)))
        commands.append(library_commands(log.read_text()))
        outputs.append(next(iter(program.run(inputs)[0].values())))
    assert len(commands[0]) >= 3 and "vanilla" in " ".join(commands[0])  # generated C and the kernel library
    assert commands[0] == commands[1]
    np.testing.assert_array_equal(outputs[0], outputs[1])
    np.testing.assert_allclose(outputs[0], expected, rtol=1e-4, atol=1e-5)


def test_a_relative_include_folder_is_the_callers(mlf, tmp_path, monkeypatch):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "extra.h").write_text("#define EXTRA_SEEN 1\n")
    monkeypatch.chdir(tmp_path)
    build(mlf, tmp_path / "b", cflags=["-O1", "-Imine", "-include", "extra.h"])  # fails if -Imine were not found
