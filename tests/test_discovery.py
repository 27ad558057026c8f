"""Finding extensions: explicit paths, the environment variable, PYTHONPATH; and their errors."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
pytest.importorskip("tvm.relay", reason="the Relay engine's tests (hhb-tvm, Python 3.10): not installed here")

from conftest import ROOT, VANILLA_EXT, without_example_backends
from tvm_extension import api

pytestmark = pytest.mark.quick  # scripts/test.sh --quick runs this module whole

EXTENSION_SOURCE = """
from tvm_extension.api import TVMExtension
from tvm.relay.backend.contrib.uma.backend import UMABackend

class {cls}Backend(UMABackend):
    target_name = "{cls}-backend"

class {cls}(TVMExtension):
    def uma_backends(self):
        return [{cls}Backend()]
"""


@pytest.fixture(autouse=True)
def forget_extension_modules():
    """Extension modules a test's in-process discovery imported (``tvm_extension.vanilla`` from a
    folder) are dropped afterwards: a later test's folder may define the same name, and a new
    process (tvmc discovers once per process) would start without them."""
    before, path = set(sys.modules), list(sys.path)
    yield
    sys.path[:] = path
    framework = (ROOT / "tvm_extension").resolve()
    for name in set(sys.modules) - before:
        origin = Path(getattr(sys.modules[name], "__file__", None) or framework)
        if name.split(".")[0] in ("tvm_extension", "tvmc_extension") and framework not in origin.resolve().parents:
            del sys.modules[name]


def make_extension(root, package, cls, source=EXTENSION_SOURCE):
    folder = root / "tvm_extension" / package
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text(textwrap.dedent(source.format(cls=cls)))
    return root


def test_explicit_path_loads_and_leaves_sys_path_alone(tmp_path):
    make_extension(tmp_path, "probe_explicit", "ExplicitExt")
    before = list(sys.path)
    found = api.discover([str(tmp_path)], environ={}, python_path=False, entry_points=False)
    assert sys.path == before
    assert [(e.name, e.origin) for e in found] == [
        ("tvm_extension.probe_explicit:ExplicitExt", f"path {tmp_path}")
    ]
    assert [b.target_name for b in found[0].backends()] == ["ExplicitExt-backend"]


def test_environment_variable_holds_several_folders(tmp_path):
    a = make_extension(tmp_path / "a", "probe_env_a", "EnvA")
    b = make_extension(tmp_path / "b", "probe_env_b", "EnvB")
    found = api.discover([], environ={api.ENV_VAR: f"{a}{os.pathsep}{b}"}, python_path=False, entry_points=False)
    assert [e.name.split(":")[1] for e in found] == ["EnvA", "EnvB"]
    assert all(e.origin == f"environment {api.ENV_VAR}" for e in found)


def test_portion_on_pythonpath_is_found_without_flags(tmp_path):
    make_extension(tmp_path, "probe_pp", "PythonPathExt")
    script = (
        "from tvm_extension import api\n"
        "for e in api.discover([], environ={}, entry_points=False):\n"
        "    print(e.name, '|', e.origin)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    assert f"tvm_extension.probe_pp:PythonPathExt | python path {tmp_path}" in done.stdout
    # The framework's own subpackages are never taken for extensions.
    assert "tvm_extension.api" not in done.stdout and "tvm_extension.tvmc" not in done.stdout


def test_second_folder_with_a_taken_module_name_says_so(tmp_path):
    """The first folder's module wins (as on sys.path); a named folder whose only module is
    shadowed is an error whose line starts with that cause; ``list`` reports the same line."""
    a = make_extension(tmp_path / "a", "probe_same", "First")
    b = make_extension(tmp_path / "b", "probe_same", "Second")
    with pytest.raises(api.ExtensionError) as error:
        api.discover([str(a), str(b)], environ={}, python_path=False, entry_points=False)
    message = str(error.value)
    assert message.startswith(f"extension module tvm_extension.probe_same of '{b}' is already imported from {a}")
    assert "extension module names must be unique" in message and "\n" not in message
    listed = api.discover([str(a), str(b)], environ={}, python_path=False, entry_points=False, strict=False)
    assert [(e.name, e.error) for e in listed if e.error] == [(str(b), message)]


def test_uma_backends_variable_is_an_alias(tmp_path):
    """$UMA_BACKENDS, the spelling of the UMA-in-TVMC discussion, is read like TVM_EXTENSION_PATH."""
    folder = make_extension(tmp_path, "probe_uma_env", "UmaEnv")
    found = api.discover([], environ={"UMA_BACKENDS": str(folder)}, python_path=False, entry_points=False)
    assert [(e.name, e.origin) for e in found] == [("tvm_extension.probe_uma_env:UmaEnv", "environment UMA_BACKENDS")]


def test_framework_modules_are_never_candidates():
    """Discovery on the framework's own folder imports none of its modules as an extension
    (``tvm_extension.tflite_exact`` was, when the reserved names were a hand list)."""
    script = (
        "import sys\n"
        # the example backends installed beside the framework (scripts/env.sh) out of sight
        f"sys.path = [p for p in sys.path if not p.startswith({str(ROOT / 'uma_')!r})]\n"
        "from tvm_extension import api\n"
        "before = set(sys.modules)\n"
        "found = api.discover([], environ={}, entry_points=False)\n"
        "print(sorted(m for m in set(sys.modules) - before if m.startswith('tvm_extension.')), len(found))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", script], env=env, cwd="/", capture_output=True, text=True, check=True)
    assert done.stdout.split()[-2:] == ["[]", "0"], done.stdout
    framework = {p.stem for p in (ROOT / "tvm_extension").iterdir() if p.suffix == ".py" or (p / "__init__.py").is_file()}
    assert framework <= api.RESERVED_NAMES


def test_list_with_nothing_found_says_where_it_looked(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", *api.discovery.ENV_VARS)}
    done = subprocess.run(without_example_backends("tvm_extension", "list"), env=env, cwd=tmp_path,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith("no extensions found; looked in:")
    assert "folders named on the command line: none" in out
    assert "TVM_EXTENSION_PATH, TVMC_EXTENSION_DIR, UMA_BACKENDS not set" in out
    assert f"on PYTHONPATH and in installed distributions: " in out and str(ROOT / "tvm_extension") in out
    assert "entry points of the group 'tvm_extension': none" in out
    assert "--experimental-tvm-extension DIR" in out and "python -m tvm_extension new NAME" in out


def test_uma_backends_returning_no_list_is_a_failure(tmp_path):
    make_extension(tmp_path, "probe_none", "NoneExt", source=EXTENSION_SOURCE.replace("[{cls}Backend()]", "None"))
    with pytest.raises(api.ExtensionError) as error:
        api.discover([str(tmp_path)], environ={}, python_path=False, entry_points=False)
    assert str(error.value).startswith("extension tvm_extension.probe_none:NoneExt (")
    assert "uma_backends() returned NoneType None, not a list of UMABackend instances" in str(error.value)


def test_example_extensions():
    """Each example backend's folder is an extension folder holding that backend alone."""
    targets = {}
    for folder in sorted(ROOT.glob("uma_*/tvm_extension")):
        found = api.discover([str(folder.parent)], environ={}, python_path=False, entry_points=False)
        targets[folder.parent.name] = {e.name: [b.target_name for b in e.backends()] for e in found}
    assert targets == {
        "uma_chocolate": {"tvm_extension.chocolate:ChocolateExtension": ["chocolate"]},
        "uma_qvanilla": {"tvm_extension.qvanilla:QVanillaExtension": ["qvanilla"]},
        "uma_strawberry": {"tvm_extension.strawberry:StrawberryExtension": ["strawberry"]},
        "uma_vanilla": {"tvm_extension.vanilla:VanillaExtension": ["vanilla_accelerator"]},
    }


def test_missing_path(tmp_path):
    with pytest.raises(api.ExtensionError, match="does not exist"):
        api.discover([str(tmp_path / "nope")], environ={}, python_path=False, entry_points=False)


def test_folder_without_package(tmp_path):
    with pytest.raises(api.ExtensionError, match="holds no 'tvm_extension' package"):
        api.discover([str(tmp_path)], environ={}, python_path=False, entry_points=False)


def test_broken_extension_names_file_and_reason(tmp_path):
    make_extension(tmp_path, "probe_broken", "X", source="import os\nvalue = undefined_name\n")
    with pytest.raises(api.ExtensionError) as error:
        api.discover([str(tmp_path)], environ={}, python_path=False, entry_points=False)
    message = str(error.value)
    assert f"{tmp_path}/tvm_extension/probe_broken/__init__.py:2" in message
    assert "NameError" in message and "\n" not in message
    assert "tvm_extension.probe_broken" not in sys.modules


def test_package_without_extension_class(tmp_path):
    make_extension(tmp_path, "probe_empty", "X", source="VALUE = 1\n")
    with pytest.raises(api.ExtensionError, match="defines no TVMExtension subclass"):
        api.discover([str(tmp_path)], environ={}, python_path=False, entry_points=False)


def test_a_backends_own_folder_finds_the_backend():
    """Where a team works, in its backend's folder installed editable, its backend is found: the
    folder is on sys.path by the install, not only by ``python -m`` (it was left out, and tvmc
    run there said "unknown target")."""
    done = subprocess.run([sys.executable, "-m", "tvm_extension", "list"], cwd=ROOT / "uma_chocolate",
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "target chocolate:" in done.stdout, done.stdout


def test_a_folder_not_installed_where_the_user_stands_is_not_imported(tmp_path):
    make_extension(tmp_path, "probe_here", "HereExt")
    done = subprocess.run([sys.executable, "-m", "tvm_extension", "list"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "probe_here" not in done.stdout and "target chocolate:" in done.stdout, done.stdout
