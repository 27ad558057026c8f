"""Every shell and Python block of README.md and of docs/*.md runs, in order (README first), as a
user would run it.

The blocks run in a copy of the checkout whose ``.venv`` is set up by the README's own
``scripts/env.sh`` (its packages are this environment's, through a ``.pth`` file, so nothing is
downloaded twice; ``pip install`` blocks install into it, not into the test environment).
Placeholder files the README names (``model.onnx``, ``model.tflite``, ``kws.tflite``...) are real
models.  Blocks are fenced as ``sh``/``python`` (run) or ``text``/``c``/``toml`` (shown, not run);
a block of any other kind fails the test, so a new block cannot escape it.  A few commands
are run cheaper than printed, each for a reason given in ``CHEAPER``.
"""
import os
import re
import shutil
import site
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest

from conftest import MODELS, ROOT
from tvm_extension.testing import random_inputs
from tvm_extension.testing.model_zoo import fetch

# The blocks run in order, in one workspace: one pytest-xdist worker runs them all.
pytestmark = pytest.mark.xdist_group("readme")
RUN, SHOWN = ("sh", "python"), ("text", "c", "toml")
CHEAPER = {
    # the suite itself: CI runs it; running it from inside itself would recurse
    "scripts/test.sh     # the test suite (what CI runs)": "",
    "scripts/test.sh --quick        # the inner loop: every framework module and example backend at least once": "",
    "scripts/test.sh --exhaustive   # before a release: every network with every backend, every size and tile shape": "",
    "scripts/test.sh --tvm-versions": "",  # a part of the suite, on another TVM (scripts/test.sh --tvm-versions)
    # two random graphs instead of 2000: the command, the variables and the nested set-up are what is checked
    "TVM_EXTENSION_PROPERTY_EXAMPLES=2000": "TVM_EXTENSION_PROPERTY_EXAMPLES=2",
    # two points instead of nine: the options, the engine and the outputs are what is checked
    "--attr strawberry.scratchpad_bytes=16K..512K*2 --attr chocolate.tile_m=4,8,16":
        "--attr strawberry.scratchpad_bytes=64K --attr chocolate.tile_m=8",
}
PLACEHOLDERS = {  # file the README names -> the real model behind it
    "model.onnx": lambda: MODELS / "cnn.onnx",
    "model.tflite": lambda: fetch("blazeface"),  # the zoo's smallest float TFLite network
    "kws.tflite": lambda: fetch("kws_dscnn_int8"),
    "keyword_spotting.tflite": lambda: fetch("kws_dscnn_int8"),
}


DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def readme_blocks():
    """(document:line, language, text) of every fenced block of the README and the docs."""
    blocks = []
    for document in DOCUMENTS:
        lines, start = document.read_text().splitlines(), None
        for number, line in enumerate(lines, start=1):
            if line.startswith("```") and start is None:
                start, language, body = number, line[3:].strip(), []
            elif line.startswith("```"):
                blocks.append((f"{document.relative_to(ROOT)}:{start}", language, "\n".join(body)))
                start = None
            elif start is not None:
                body.append(line)
        assert start is None, f"{document.name}: the block opened on line {start} is not closed"
    return blocks


BLOCKS = [b for b in readme_blocks() if b[1] in RUN]


def test_every_block_is_run_or_shown():
    unknown = [(line, language) for line, language, _ in readme_blocks() if language not in RUN + SHOWN]
    assert not unknown, f"README blocks of no known kind (fence them as one of {RUN + SHOWN}): {unknown}"
    for text in CHEAPER:
        assert any(text in body for _, _, body in BLOCKS), f"CHEAPER names a command README no longer has: {text}"


def _wrapper(path: Path, module: str):
    """The console script pip would make, for a tool whose distribution sits in the shared packages."""
    path.write_text(f'#!/bin/sh\nexec "{path.parent / "python"}" -m {module} "$@"\n')
    path.chmod(0o755)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    work = tmp_path_factory.mktemp("readme") / "checkout"
    shutil.copytree(ROOT, work, ignore=shutil.ignore_patterns(
        ".git", ".venv", ".venv-relax", "out", "build", "__pycache__", ".pytest_cache", ".pkl_memoize_py3", "*.egg-info"))
    venv = work / ".venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    (site_packages(venv) / "shared_packages.pth").write_text(site.getsitepackages()[0] + "\n")
    # The Relax engine's environment likewise: the suite's packages seen through a .pth line, made with
    # the same interpreter (env.sh then installs only the workspace's projects into it)
    suite_relax = ROOT / ".venv-relax"
    interpreter = (suite_relax / ".python").read_text().strip()
    subprocess.run([interpreter, "-m", "venv", "--without-pip", str(work / ".venv-relax")], check=True)
    (site_packages(work / ".venv-relax") / "shared_packages.pth").write_text(f"{site_packages(suite_relax)}\n")
    (work / ".venv-relax" / ".python").write_text(interpreter + "\n")
    _wrapper(venv / "bin" / "tvmc", "tvm.driver.tvmc")
    _wrapper(venv / "bin" / "pytest", "pytest")
    for name, source in PLACEHOLDERS.items():
        shutil.copyfile(source(), work / name)
    np.savez(work / "input.npz", **random_inputs(work / "model.onnx", seed=5))
    env = {k: v for k, v in os.environ.items() if k not in ("TVM_EXTENSION_PATH", "TVM_EXTENSION_VENV", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"
    # the README's sweeps compute their points in a cache of this run's, not in the home folder's
    env["TVM_EXTENSION_SWEEP_CACHE"] = str(tmp_path_factory.mktemp("sweep-cache"))
    done = subprocess.run(["bash", "-c", "source scripts/env.sh demo"], cwd=work, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return work, env


def site_packages(venv: Path) -> Path:
    return Path(subprocess.run([str(venv / "bin" / "python"), "-c", "import site; print(site.getsitepackages()[0])"],
                               capture_output=True, text=True, check=True).stdout.strip())


def _run(block: str, language: str, work: Path, env) -> subprocess.CompletedProcess:
    for printed, cheaper in CHEAPER.items():
        block = block.replace(printed, cheaper)
    if language == "python":
        first = block.splitlines()[0]
        target = re.fullmatch(r"# ([\w/]+\.py)", first)
        if target:  # a file the README tells you to write: write it, then load it as the README says
            path = work / target.group(1)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(block)
            top = target.group(1).split("/tvm_extension/")[0]
            command = ["python", "-m", "tvm_extension", "list", "--experimental-tvm-extension", top]
        else:
            command = ["python", "-c", block]
    else:
        command = ["bash", "-e", "-o", "pipefail", "-c", block]
    return subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=1800)


def _members(archive: Path):
    with tarfile.open(archive) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


@pytest.mark.real_model
@pytest.mark.parametrize("line, language, block", BLOCKS, ids=[f"{b[0]}-{b[1]}" for b in BLOCKS])
def test_block_runs(workspace, line, language, block):
    work, env = workspace
    done = _run(block, language, work, env)
    assert done.returncode == 0, f"{line}:\n{block}\n--- stdout\n{done.stdout[-3000:]}\n" \
                                 f"--- stderr\n{done.stderr[-3000:]}"
    assert "Traceback" not in done.stderr, done.stderr
    if "vanilla_accelerator]" in block or "tvm_extension/vanilla/" in block:
        assert "vanilla_accelerator" in done.stdout
    if "python.tar" in block:  # the Python example gives the first screen's archive
        assert _members(work / "python.tar") == _members(work / "out.tar")
