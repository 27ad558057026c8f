"""scripts/env.sh: the demo's environment is small (requirements-demo.lock) and the tests' one adds to it
(requirements.lock); each set-up step says what it does and runs again only when its input changed.

Cheap checks: the locks and imports are read, not installed; env.sh runs against a stand-in Python
that records the commands it is given.
"""
import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import importlib_metadata
import tomli
from packaging.requirements import Requirement

from conftest import EXAMPLES, ROOT, stand_in_checkout

BACKENDS = ["uma_vanilla", "uma_qvanilla", "uma_strawberry", "uma_chocolate"]  # as scripts/env.sh installs them

# What scripts/demo.sh runs: tvmc with the example extensions, make_input.py, tvm_extension.mlf,
# check_output.py.  The benchmarks (benchmarks/, the [bench] extra), the sweeps (tvm_extension/sweep, the
# [sweep] extra) and the Relax engine (tvm_extension/relax: .venv-relax, requirements-relax.lock) are not part of it.
DEMO_FILES = [EXAMPLES / "make_input.py", EXAMPLES / "check_output.py",
              *[p for package in ("tvm_extension", "uma_vanilla", "uma_qvanilla", "uma_strawberry", "uma_chocolate")
                for p in (ROOT / package).rglob("*.py") if "tests" not in p.relative_to(ROOT).parts
                and not {"testing", "sweep", "relax"} & set(p.relative_to(ROOT).parts)]]
OWN_MODULES = {"tvm_extension", "uma_vanilla", "uma_qvanilla", "uma_strawberry", "uma_chocolate"}


def normalise(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def read_lock(path):
    """{normalised name: version} of a pip lock file."""
    pins = {}
    for line in Path(path).read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = line.split("==")
            pins[normalise(name)] = version.strip()
    return pins


def imported_modules(paths):
    """The top-level names of the absolute imports in these Python files (function-level ones too)."""
    names = set()
    for path in paths:
        for node in ast.walk(ast.parse(Path(path).read_text())):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names.add(node.module.split(".")[0])
    return names


def distributions_of(modules):
    """{module: the distribution that provides it} for the modules not in the standard library."""
    providers = importlib_metadata.packages_distributions()
    missing = sorted(m for m in modules if m not in sys.stdlib_module_names and m not in providers)
    assert not missing, f"no installed distribution provides {missing}"
    return {m: normalise(providers[m][0]) for m in modules if m not in sys.stdlib_module_names}


def closure(requirements):
    """The distributions that installing these requirements brings, from the installed packages' metadata."""
    seen, todo = set(), [Requirement(r) for r in requirements]
    while todo:
        requirement = todo.pop()
        if normalise(requirement.name) in seen:
            continue
        seen.add(normalise(requirement.name))
        for text in importlib_metadata.requires(requirement.name) or []:
            dependency = Requirement(text)
            extras = requirement.extras or {""}
            if dependency.marker is None or any(dependency.marker.evaluate({"extra": e}) for e in extras):
                todo.append(dependency)
    return seen


def test_demo_lock_is_the_projects_dependencies_pinned_as_for_the_tests():
    demo, full = read_lock(ROOT / "requirements-demo.lock"), read_lock(ROOT / "requirements.lock")
    assert {name: full.get(name) for name in demo} == demo, "the demo's pins differ from requirements.lock's"
    assert not {name for name in demo if re.match(r"tensorflow|keras|tensorboard|pytest", name)}
    # Exactly what `pip install .[relay]` brings, nothing more (the project itself is installed apart, editable).
    project = tomli.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert set(demo) == closure(project["dependencies"] + project["optional-dependencies"]["relay"])


def test_demo_lock_provides_every_module_the_demo_imports():
    demo = read_lock(ROOT / "requirements-demo.lock")
    needed = distributions_of(imported_modules(DEMO_FILES) - OWN_MODULES)
    assert "hhb-tvm" in needed.values() and "onnx" in needed.values()  # the scan sees the demo's imports
    assert {m: d for m, d in needed.items() if d not in demo} == {}


STAND_IN_PYTHON = """#!/bin/bash
# Records how it is called (not env.sh's check that it runs); "-m venv DIR" makes DIR/bin/python, a copy of it.
[ "$1" = -c ] && exit 0
echo "$(basename "$0") $*" >> "$CALLS"
if [ "$1 $2" = "-m venv" ]; then mkdir -p "$3/bin" && cp "$0" "$3/bin/python"; fi
"""


def test_setup_steps_say_what_they_do_and_run_once(tmp_path):
    root = stand_in_checkout(tmp_path / "checkout")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for python in ("python3.10", "python3.12"):  # the Relax engine's is the newest found, 3.10 the Relay engine's
        (bin_dir / python).write_text(STAND_IN_PYTHON)
        (bin_dir / python).chmod(0o755)
    venv, relax_venv, calls = tmp_path / "venv", tmp_path / "venv-relax", tmp_path / "calls"
    env = dict(os.environ, TVM_EXTENSION_VENV=str(venv), TVM_EXTENSION_RELAX_VENV=str(relax_venv), CALLS=str(calls),
               PATH=f"{bin_dir}:/usr/bin:/bin", PYENV_ROOT=str(tmp_path / "no-pyenv"))  # only the stand-in Pythons

    def setup(purpose):
        calls.write_text("")
        done = subprocess.run(["bash", "-c", f"source scripts/env.sh {purpose}"], cwd=root, env=env,
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done.stderr.splitlines(), calls.read_text().splitlines()

    pip = "python -m pip install --quiet --disable-pip-version-check"
    demo_count, full_count = len(read_lock(root / "requirements-demo.lock")), len(read_lock(root / "requirements.lock"))
    said, ran = setup("demo")
    assert said == [f"setup: creating the environment {venv} ({bin_dir / 'python3.10'})",
                    f"setup: installing {demo_count} pinned packages for the demo (requirements-demo.lock)",
                    f"setup: installing this project (editable: {root})",
                    f"setup: installing the example backends (editable: {' '.join(BACKENDS)})"]
    assert ran == [f"python3.10 -m venv {venv}", f"{pip} -r {root}/requirements-demo.lock",
                   f"{pip} --no-deps -e {root}", f"{pip} --no-deps " + " ".join(f"-e{root}/{b}" for b in BACKENDS)]
    assert setup("demo") == ([], [])
    # The tests add their lock to the same environment (the project and the backends are already
    # there), and the Relax engine's environment beside it (with the backends that have a Relax part).
    assert setup("test") == ([f"setup: installing {full_count} pinned packages for the tests (requirements.lock)",
                              f"setup: setting up the Relax engine's environment {relax_venv} "
                              f"({bin_dir / 'python3.12'}, requirements-relax.lock)",
                              f"setup: installing the test suite's packages into {relax_venv} "
                              "(requirements-relax-test.lock)"],
                             [f"{pip} -r {root}/requirements.lock", f"python3.12 -m venv {relax_venv}",
                              f"{pip} -r {root}/requirements-relax.lock",
                              f"{pip} --no-deps -e{root} " + " ".join(f"-e{root}/{b}" for b in BACKENDS),
                              f"{pip} -r {root}/requirements-relax-test.lock"])
    assert setup("test") == ([], []) and setup("demo") == ([], [])
    # A changed lock is installed again, and only it.
    with open(root / "requirements-demo.lock", "a") as lock:
        lock.write("# changed\n")
    assert setup("demo")[1] == [f"{pip} -r {root}/requirements-demo.lock"]
    assert setup("test") == ([], [])
    # A newer Python installed since: the Relax engine's environment is made anew with it.
    (bin_dir / "python3.13").write_text(STAND_IN_PYTHON)
    (bin_dir / "python3.13").chmod(0o755)
    (relax_venv / "stale").write_text("")
    assert setup("test")[1] == [f"python3.13 -m venv {relax_venv}", f"{pip} -r {root}/requirements-relax.lock",
                                f"{pip} --no-deps -e{root} " + " ".join(f"-e{root}/{b}" for b in BACKENDS),
                                f"{pip} -r {root}/requirements-relax-test.lock"]
    assert not (relax_venv / "stale").exists() and setup("test") == ([], [])


def without_python_310(tmp_path) -> dict:
    """The environment of a machine whose Pythons are 3.11-3.13 only: no Python 3.10 on PATH or
    through pyenv; the interpreter the suite's .venv-relax was made with is the only one a
    stand-in pyenv holds, so that env.sh uses that environment as it is."""
    interpreter = Path((ROOT / ".venv-relax" / ".python").read_text().strip())
    version = re.fullmatch(r"python(3\.\d+)", interpreter.name).group(1)
    pyenv = tmp_path / "pyenv" / "versions" / version / "bin"
    pyenv.mkdir(parents=True)
    (pyenv / interpreter.name).symlink_to(interpreter)
    folders = [p for p in os.environ["PATH"].split(os.pathsep) if p and ".pyenv" not in p and ".venv" not in p]
    with_310 = [p for p in folders if (Path(p) / "python3.10").exists()]
    assert not with_310, f"this machine's {with_310} hold python3.10, which this test cannot hide"
    env = dict(os.environ, PATH=os.pathsep.join(folders), PYENV_ROOT=str(tmp_path / "pyenv"),
               TVM_EXTENSION_VENV=str(tmp_path / "no-venv"))
    for name in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "TVM_EXTENSION_BUILD_CACHE", "CC", "CXX"):
        env.pop(name, None)
    # The suite's .venv-relax is shared with the other tests: env.sh must find the very interpreter
    # it was made with (else it makes it anew under them); env.sh's own search says which it finds.
    search = "; ".join(f'source <(sed -n "/^{f}() {{/,/^}}/p" scripts/env.sh)'
                       for f in ("find_python", "find_python310", "find_relax_python"))
    found = subprocess.run(["bash", "-c", f"{search}; find_relax_python"], cwd=ROOT, env=env, capture_output=True,
                           text=True).stdout.strip()
    assert found == str(interpreter), (found, interpreter)
    return env


def test_the_demo_runs_on_the_relax_engine_where_no_python_3_10_is_found(tmp_path):
    """A machine whose Pythons are 3.11-3.13 only (Debian 13, Ubuntu 24.04): scripts/demo.sh, the
    README's first command, says in one line that it runs on the Relax engine and runs the mission's
    command there (tvmc compile ... --experimental-tvm-extension ... -f mlf), the MLF built with gcc,
    run and checked against onnx.reference, then the Relax VM's library.  No Python 3.10 is in
    sight: not on PATH, not through pyenv; the interpreter the Relax environment was made with is
    the only one a stand-in pyenv holds (so the suite's .venv-relax is used as it is)."""
    relax_venv = ROOT / ".venv-relax"
    env = without_python_310(tmp_path)
    done = subprocess.run(["bash", str(ROOT / "scripts" / "demo.sh"), str(EXAMPLES / "models" / "cnn.onnx"),
                           str(tmp_path / "out")], env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    said = [line for line in done.stderr.splitlines() if line.startswith(("setup:", "error:"))]
    assert said == ["setup: no Python 3.10 (the Relay engine's hhb-tvm needs it): the demo runs on the Relax engine "
                    "(apache-tvm)"], said  # and nothing set up again: the suite's environment as it is
    assert not (tmp_path / "no-venv").exists()
    assert f"{relax_venv}/bin/tvmc compile --target vanilla_accelerator --experimental-tvm-extension" in \
        done.stderr.replace("+ tvmc", f"+ {relax_venv}/bin/tvmc"), done.stderr[-2000:]
    assert "offloaded convolutions (vanilla_conv2d* calls): 3" in done.stdout
    checked = re.findall(r"max \|(MLF|output) - onnx.reference\| = (\S+) \(tolerance", done.stdout)
    assert [kind for kind, _ in checked] == ["MLF", "output"] and all(float(v) <= 1e-4 for _, v in checked), done.stdout


def test_the_tests_run_on_the_relax_engine_alone_where_no_python_3_10_is_found(tmp_path):
    """The same machine: scripts/test.sh says in one line that the tests run on the Relax engine
    alone, runs pytest in .venv-relax (its header names the engine), and the Relay engine's modules
    and tests are skipped with the reason while the rest pass (here two modules of --quick: one of
    each kind; the whole --quick run is as the closing note of issue 46 says)."""
    env = without_python_310(tmp_path)
    done = subprocess.run(["bash", str(ROOT / "scripts" / "test.sh"), "--quick", "-p", "no:cacheprovider", "-rs",
                           "--basetemp", str(tmp_path / "inner"), "tests/test_reproducible_mlf.py",
                           "tests/test_discovery.py"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    said = [line for line in done.stderr.splitlines() if line.startswith(("setup:", "error:"))]
    assert said == ["setup: no Python 3.10 (the Relay engine's hhb-tvm needs it): the tests run on the Relax engine "
                    "alone (apache-tvm), the Relay engine's are skipped"], said
    assert not (tmp_path / "no-venv").exists()
    assert re.search(r"^engines: Relax only \(apache-tvm 0\.2\d", done.stdout, re.MULTILINE), done.stdout[:2000]
    assert re.search(r"SKIPPED \[1\] tests/test_discovery\.py:\d+: the Relay engine's tests", done.stdout), done.stdout
    summary = done.stdout.strip().splitlines()[-1]
    assert re.search(r"\d+ passed", summary) and "failed" not in summary and "error" not in summary, summary
