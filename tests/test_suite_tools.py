"""The suite's own tools (tvm_extension.testing): tvmc forked from a warm process gives what a
new tvmc process gives, and the build cache reuses a build only for the same command, files and
code: an edit to a backend's C or patterns is rebuilt."""
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import MODELS, ROOT, VANILLA_EXT
from tvm_extension.testing import build_cache, run_tvmc, warm_tvmc

CNN = MODELS / "cnn.onnx"
COMPILE = ["compile", "--target", "vanilla_accelerator", CNN, "-f", "mlf", "-o"]


@pytest.mark.quick
@pytest.mark.relay
def test_forked_tvmc_is_a_new_tvmc(tmp_path, monkeypatch):
    """The same stdout, stderr, exit status and archive, byte for byte, for a compile and for a
    user's error; a changed PYTHONPATH is honoured by a new process instead."""
    monkeypatch.delenv(build_cache.ENV_VARIABLE, raising=False)
    forked = run_tvmc(*COMPILE, tmp_path / "forked.tar")
    forked_error = run_tvmc("compile", "--target", "nope", CNN, "-o", tmp_path / "e.tar")
    assert warm_tvmc._server is not None and warm_tvmc._server.process.poll() is None  # it did fork
    monkeypatch.setenv("TVM_EXTENSION_TEST_FORK", "0")
    new = run_tvmc(*COMPILE, tmp_path / "new.tar")
    new_error = run_tvmc("compile", "--target", "nope", CNN, "-o", tmp_path / "e.tar")
    assert forked.returncode == new.returncode == 0, forked.stderr + new.stderr
    assert (forked.stdout, forked.stderr) == (new.stdout, new.stderr)
    assert (tmp_path / "forked.tar").read_bytes() == (tmp_path / "new.tar").read_bytes()
    assert forked_error.returncode == new_error.returncode == 4
    assert forked_error.stderr == new_error.stderr and "unknown target 'nope'" in new_error.stderr
    monkeypatch.delenv("TVM_EXTENSION_TEST_FORK")
    assert warm_tvmc.run(Path(sys.executable).parent / "tvmc", False, ["--help"], env={"PYTHONPATH": str(tmp_path)}) is None


def test_a_fork_reads_the_environment_and_folder_of_its_call(tmp_path):
    """TVM_EXTENSION_PATH (read while tvmc parses its arguments) and a relative model path."""
    shutil.copy(CNN, tmp_path / "m.onnx")
    done = run_tvmc("compile", "--target", "vanilla_accelerator", "m.onnx", "-f", "mlf", "-o", "m.tar", cwd=tmp_path,
                    env={"TVM_EXTENSION_PATH": str(VANILLA_EXT)})
    assert done.returncode == 0, done.stderr
    assert "[vanilla_accelerator] offloaded: nn.conv2d x3" in done.stdout and (tmp_path / "m.tar").is_file()


@pytest.mark.quick
@pytest.mark.relay
def test_an_edited_backend_is_rebuilt(tmp_path, monkeypatch):
    """The same compile is reused; after an edit to the backend's C, or to its patterns, in a
    copy of its folder, the next compile is a new build (and the edit is in it)."""
    monkeypatch.setenv(build_cache.ENV_VARIABLE, str(tmp_path / "cache"))
    copy = tmp_path / "uma_vanilla"
    shutil.copytree(VANILLA_EXT, copy, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))

    def compile_(name):
        out = tmp_path / name
        done = run_tvmc("compile", "--target", "vanilla_accelerator", "--experimental-tvm-extension", copy, CNN,
                        "-f", "mlf", "-o", out, reuse=True)
        assert done.returncode == 0, done.stderr
        return done, out.read_bytes()

    first, first_mlf = compile_("1.tar")
    again, again_mlf = compile_("2.tar")
    assert (first.reused, again.reused) == (False, True)
    assert (again.stdout, again_mlf) == (first.stdout, first_mlf)
    kernel = copy / "uma_vanilla" / "c" / "vanilla_accelerator.c"
    kernel.write_text(kernel.read_text() + "\n/* edited: a rebuild must carry this */\n")
    edited_c, edited_c_mlf = compile_("3.tar")
    assert not edited_c.reused and b"edited: a rebuild must carry this" in edited_c_mlf
    patterns = copy / "uma_vanilla" / "patterns.py"
    patterns.write_text(patterns.read_text() + "\n# edited\n")
    assert not compile_("4.tar")[0].reused
    assert compile_("5.tar")[0].reused


def test_the_code_digest_covers_the_framework_and_the_installed_backends():
    """A compile can import the checkout (the framework, editable) and every example backend's
    folder (editable installs): each is digested, so an edit to any of them changes every key."""
    roots, _ = build_cache._import_roots()
    assert {str(ROOT), *(str(ROOT / b) for b in ("uma_vanilla", "uma_qvanilla", "uma_strawberry",
                                                    "uma_chocolate"))} <= set(roots)


@pytest.mark.quick
def test_an_empty_pythonpath_entry_brings_no_folder_into_the_digest(tmp_path, monkeypatch):
    """``PYTHONPATH=dir:`` (a trailing colon: the working folder) adds dir, not the folder the
    digest's interpreter happens to run in (it once walked all of /tmp, changing by the second)."""
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}")
    build_cache._import_roots.cache_clear()
    try:
        roots, _ = build_cache._import_roots()
    finally:
        build_cache._import_roots.cache_clear()
    assert str(tmp_path) in roots
    assert not any(os.path.realpath(r) in (os.path.realpath(tempfile.gettempdir()), os.path.realpath(os.getcwd()))
                   for r in roots if r not in (str(ROOT), str(tmp_path))), roots


def test_a_failed_compile_is_not_cached(tmp_path, monkeypatch):
    monkeypatch.setenv(build_cache.ENV_VARIABLE, str(tmp_path / "cache"))
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    for _ in range(2):
        done = run_tvmc("compile", "--target", "vanilla_accelerator", bad, "-f", "mlf", "-o", tmp_path / "o.tar",
                        reuse=True)
        assert done.returncode != 0 and not hasattr(done, "reused")
    assert [p.name for p in (tmp_path / "cache").iterdir() if not p.name.endswith(".lock")] == []


def test_no_cache_no_reuse(tmp_path, monkeypatch):
    monkeypatch.delenv(build_cache.ENV_VARIABLE, raising=False)
    done = run_tvmc(*COMPILE, tmp_path / "o.tar", reuse=True)
    assert done.returncode == 0 and not hasattr(done, "reused")


def test_the_exhaustive_tier_runs_only_when_asked():
    """Tests marked exhaustive (further pairings of what the default run tests once) are deselected
    by default and collected with --exhaustive (scripts/test.sh --exhaustive)."""
    def collected(*extra):
        done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                               "tests/test_board.py", *extra], cwd=ROOT, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        return {line for line in done.stdout.splitlines() if "::" in line}

    default, every = collected(), collected("--exhaustive")
    assert default < every
    assert "tests/test_board.py::test_network_on_board_equals_host[face_landmark-vanilla-mps2-an386]" in every - default
    assert "tests/test_board.py::test_network_on_board_equals_host[mtcnn_pnet-vanilla-mps2-an386]" in default
