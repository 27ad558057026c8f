"""TVM's own tvmc with extensions: options, help, attributes and one-line errors."""
import subprocess
import textwrap

import pytest
pytest.importorskip("tvm.relay", reason="the Relay engine's tests (hhb-tvm, Python 3.10): not installed here")

from conftest import MODELS, VANILLA_EXT, assert_one_line_error, kernel_calls, run_tvmc, without_example_backends

EXT = ["--experimental-tvm-extension", VANILLA_EXT]
CNN = MODELS / "cnn.onnx"


@pytest.mark.quick
@pytest.mark.parametrize("module", [False, True], ids=["tvmc-script", "python-m"])
def test_help_lists_flag_and_target_attributes(module):
    done = run_tvmc("compile", "--help", *EXT, module=module)
    assert done.returncode == 0, done.stderr
    assert "--experimental-tvm-extension PATH" in done.stdout
    assert "--target-vanilla_accelerator-max_kernel_size" in done.stdout
    assert "default: 7" in done.stdout


def test_without_extension_target_is_unknown(tmp_path):
    done = subprocess.run(without_example_backends("tvm.driver.tvmc", "compile", "--target", "vanilla_accelerator", CNN,
                                                   "-f", "mlf", "-o", tmp_path / "o.tar"), capture_output=True, text=True)
    assert_one_line_error(done, "unknown target 'vanilla_accelerator'", "--experimental-tvm-extension")
    assert not (tmp_path / "o.tar").exists()


def test_environment_variable_replaces_flag(tmp_path):
    out = tmp_path / "o.tar"
    done = run_tvmc("compile", "--target", "vanilla_accelerator", CNN, "-f", "mlf", "-o", out,
                    env={"TVM_EXTENSION_PATH": str(VANILLA_EXT)})
    assert done.returncode == 0, done.stderr
    assert kernel_calls(out) == 3


def test_pythonpath_replaces_flag(tmp_path):
    out = tmp_path / "o.tar"
    done = run_tvmc("compile", "--target", "vanilla_accelerator", CNN, "-f", "mlf", "-o", out,
                    env={"PYTHONPATH": str(VANILLA_EXT)})
    assert done.returncode == 0, done.stderr
    assert kernel_calls(out) == 3


@pytest.mark.quick
@pytest.mark.parametrize("how", ["option", "target-string"])
def test_target_attribute_reaches_backend(tmp_path, how):
    out = tmp_path / "o.tar"
    if how == "option":
        args = ["--target", "vanilla_accelerator", "--target-vanilla_accelerator-max_kernel_size", "3"]
    else:
        args = ["--target", "vanilla_accelerator -max_kernel_size=3"]
    done = run_tvmc("compile", *args, *EXT, CNN, "-f", "mlf", "-o", out)
    assert done.returncode == 0, done.stderr
    assert kernel_calls(out) == 2  # the 5x5 conv no longer fits the MAC array


def test_bad_attribute_value(tmp_path):
    done = run_tvmc("compile", "--target", "vanilla_accelerator", "--target-vanilla_accelerator-max_kernel_size",
                    "big", *EXT, CNN, "-f", "mlf", "-o", tmp_path / "o.tar")
    assert_one_line_error(done, "max_kernel_size", "expects an integer", "'big'")
    assert not (tmp_path / "o.tar").exists()


def test_unknown_attribute(tmp_path):
    done = run_tvmc("compile", "--target", "vanilla_accelerator -speed=11", *EXT, CNN, "-f", "mlf", "-o", tmp_path / "o.tar")
    assert_one_line_error(done, "no attribute 'speed'", "max_kernel_size")


@pytest.mark.quick
def test_unknown_target(tmp_path):
    done = run_tvmc("compile", "--target", "vanila_accelerator", *EXT, CNN, "-f", "mlf", "-o", tmp_path / "o.tar")
    assert_one_line_error(done, "unknown target 'vanila_accelerator'", "vanilla_accelerator")
    assert not (tmp_path / "o.tar").exists()


def test_missing_extension_path(tmp_path):
    done = run_tvmc("compile", "--target", "vanilla_accelerator", "--experimental-tvm-extension", tmp_path / "nope",
                    CNN, "-f", "mlf", "-o", tmp_path / "o.tar")
    assert_one_line_error(done, f"{tmp_path / 'nope'}", "does not exist")
    assert not (tmp_path / "o.tar").exists()


def _write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))


def test_extension_that_fails_to_import(tmp_path):
    _write(tmp_path / "ext" / "tvm_extension" / "broken" / "__init__.py", "from . import helper\n")
    _write(tmp_path / "ext" / "tvm_extension" / "broken" / "helper.py", "import numpy\nraise RuntimeError('no device')\n")
    done = run_tvmc("compile", "--target", "vanilla_accelerator", "--experimental-tvm-extension", tmp_path / "ext",
                    CNN, "-f", "mlf", "-o", tmp_path / "o.tar")
    assert_one_line_error(done, "broken/helper.py:2", "RuntimeError: no device")
    assert not (tmp_path / "o.tar").exists()


def test_path_without_extension_class(tmp_path):
    _write(tmp_path / "ext" / "tvm_extension" / "plain" / "__init__.py", "X = 1\n")
    done = run_tvmc("compile", "--target", "vanilla_accelerator", "--experimental-tvm-extension", tmp_path / "ext",
                    CNN, "-f", "mlf", "-o", tmp_path / "o.tar")
    assert_one_line_error(done, "defines no TVMExtension subclass")


def test_two_extensions_same_target_name(tmp_path):
    _write(tmp_path / "ext" / "tvm_extension" / "impostor" / "__init__.py", """
        from tvm_extension.api import TVMExtension
        from uma_vanilla import VanillaAcceleratorBackend

        class ImpostorBackend(VanillaAcceleratorBackend):
            pass

        class ImpostorExtension(TVMExtension):
            def uma_backends(self):
                return [ImpostorBackend()]
    """)
    done = run_tvmc("compile", "--target", "vanilla_accelerator", *EXT, "--experimental-tvm-extension",
                    tmp_path / "ext", CNN, "-f", "mlf", "-o", tmp_path / "o.tar")
    assert_one_line_error(done, "'vanilla_accelerator' is registered twice", "ImpostorBackend")
    assert not (tmp_path / "o.tar").exists()


def test_same_extension_twice_is_not_a_clash(tmp_path):
    out = tmp_path / "o.tar"
    done = run_tvmc("compile", "--target", "vanilla_accelerator", *EXT, CNN, "-f", "mlf", "-o", out,
                    env={"TVM_EXTENSION_PATH": str(VANILLA_EXT)})
    assert done.returncode == 0, done.stderr


@pytest.mark.quick
def test_merged_codegen_registry():
    """TVMC's own lookups see built-in composite targets and extension backends alike."""
    import subprocess
    import sys

    script = (
        "from tvm.driver.tvmc import composite_target as ct\n"
        "names = ct.get_codegen_names()\n"
        "entry = ct.get_codegen_by_target('vanilla_accelerator')\n"
        "print('cmsis-nn' in names, 'vanilla_accelerator' in names, entry['pass_pipeline'].__name__)\n"
    )
    import os
    env = dict(os.environ, TVM_EXTENSION_PATH=str(VANILLA_EXT))
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert done.stdout.split() == ["True", "True", "partition_for_vanilla_accelerator"], done.stderr


def test_config_file_gets_the_embedded_defaults(tmp_path):
    """A --config JSON naming an extension target is completed as the command line is."""
    import json

    import numpy as np

    from tvm_extension.testing import random_inputs
    from tvm_extension.mlf import build

    config = tmp_path / "vanilla.json"
    config.write_text(json.dumps({"targets": [{"kind": "vanilla_accelerator"}], "output_format": "mlf"}))
    out = tmp_path / "o.tar"
    done = run_tvmc("--config", config, "compile", *EXT, CNN, "-o", out)
    assert done.returncode == 0, done.stderr
    assert kernel_calls(out) == 3
    inputs = random_inputs(CNN, seed=1)
    got = build(out, tmp_path / "b").run(inputs)[0]["output"]  # an AOT, C-interface MLF: it builds and runs
    from conftest import onnx_reference

    np.testing.assert_allclose(got, onnx_reference(CNN, inputs)[0], rtol=1e-4, atol=1e-5)
    # What the config sets explicitly is the user's choice, and refused when it cannot work.
    config.write_text(json.dumps({"targets": [{"kind": "vanilla_accelerator"}], "output_format": "mlf",
                                  "executor": {"kind": "graph"}}))
    done = run_tvmc("--config", config, "compile", *EXT, CNN, "-o", tmp_path / "g.tar")
    assert_one_line_error(done, "AOT executor with the unpacked API")


@pytest.mark.quick
def test_verbose_logs_discovery_defaults_and_stages(tmp_path):
    done = run_tvmc("-v", "compile", "--target", "vanilla_accelerator", *EXT, CNN, "-f", "mlf", "-o", tmp_path / "o.tar")
    assert done.returncode == 0, done.stderr
    log = done.stdout
    assert f"extension tvm_extension.vanilla:VanillaExtension from path {VANILLA_EXT}: target vanilla_accelerator" in log
    assert "embedded defaults for vanilla_accelerator: --executor aot" in log
    for stage in ("loading extensions", "partitioning for vanilla_accelerator", "packaging MLF", "compiling"):
        assert f"INFO:tvm_extension:{stage}: " in log and " s\n" in log, stage
    assert "TIR of" not in log
    done = run_tvmc("-vv", "compile", "--target", "vanilla_accelerator", *EXT, CNN, "-f", "mlf", "-o", tmp_path / "o.tar")
    assert "TIR of tvmgen_default_vanilla_accelerator_main_0 after vanilla_accelerator's passes" in done.stdout
    assert "T.call_extern(\"int32\", \"vanilla_conv2dnchw_general\"" in done.stdout
    plain = run_tvmc("compile", "--target", "vanilla_accelerator", *EXT, CNN, "-f", "mlf", "-o", tmp_path / "o.tar")
    assert "tvm_extension" not in plain.stdout


def test_long_stage_shows_on_a_terminal(monkeypatch):
    import io
    import time

    from tvm_extension.api import stages

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    monkeypatch.setattr(stages, "SHOW_AFTER", 0.1)
    with stages.stage("partitioning for slow_npu"):
        time.sleep(1.2)
    time.sleep(0.8)
    assert "partitioning for slow_npu (1 s)" in terminal.getvalue() or "partitioning for slow_npu (0 s)" in terminal.getvalue()
    assert terminal.getvalue().endswith("\r\x1b[K")  # the line is cleared when nothing runs


def test_plain_help_lists_every_attribute_with_type_default_and_range():
    """An extension loaded from the environment: plain ``tvmc compile --help`` gives each
    attribute's type, default and the backend's declared range."""
    from tvm_extension import api, uma

    done = run_tvmc("compile", "--help", env={"TVM_EXTENSION_PATH": str(VANILLA_EXT)})
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())  # argparse wraps help lines
    backends = [b for e in api.discover([str(VANILLA_EXT)], environ={}, python_path=False, entry_points=False)
                for b in e.backends()]
    for backend in backends:
        ranges = uma.attr_ranges(backend)
        for attr, default in backend._target_attrs.items():
            kind = "true/false" if isinstance(default, bool) else type(default).__name__
            expected = f"target {backend.target_name} {attr} ({kind}, default: {default}"
            if attr in ranges:
                expected += f", range {ranges[attr][0]}..{ranges[attr][1]})"
            assert f"--target-{backend.target_name}-{attr}" in text and expected in text, expected
    assert "default: 7, range 1..8)" in text  # Vanilla's max_kernel_size, whatever the loop above saw


@pytest.mark.parametrize("how", ["flag", "variable"])
def test_uma_backends_spellings_are_aliases(tmp_path, how):
    out = tmp_path / "o.tar"
    if how == "flag":
        done = run_tvmc("compile", "--target", "vanilla_accelerator", "--uma-backends", VANILLA_EXT, CNN,
                        "-f", "mlf", "-o", out)
    else:
        done = run_tvmc("compile", "--target", "vanilla_accelerator", CNN, "-f", "mlf", "-o", out,
                        env={"UMA_BACKENDS": str(VANILLA_EXT)})
    assert done.returncode == 0, done.stderr
    assert kernel_calls(out) == 3
    helped = " ".join(run_tvmc("compile", "--help").stdout.split())
    assert "--experimental-tvm-extension PATH, --experimental-tvmc-extension PATH, --uma-backends PATH" in helped
    assert "--uma-backends are aliases" in helped
    assert "$UMA_BACKENDS" in helped


def test_versions():
    import importlib.metadata
    import subprocess
    import sys

    import tvm

    ours = f"tvm-uma-extensions {importlib.metadata.version('tvm-uma-extensions')}, TVM {tvm.__version__}"
    done = run_tvmc("--version")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == tvm.__version__ and lines[1].startswith(ours), done.stdout  # TVM's line first, as before
    done = subprocess.run([sys.executable, "-m", "tvm_extension", "--version"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.startswith(ours), done.stdout + done.stderr


@pytest.mark.quick
def test_list_says_what_compile_says(tmp_path):
    """Two folders defining the same extension module: compile refuses, list reports the same line."""
    import subprocess
    import sys

    for folder, cls in (("a", "First"), ("b", "Second")):
        _write(tmp_path / folder / "tvm_extension" / "twin" / "__init__.py", f"""
            from tvm_extension.api import TVMExtension
            from uma_vanilla import VanillaAcceleratorBackend

            class {cls}(TVMExtension):
                def uma_backends(self):
                    return [VanillaAcceleratorBackend()]
        """)
    folders = ["--uma-backends", tmp_path / "a", "--uma-backends", tmp_path / "b"]
    done = run_tvmc("compile", "--target", "vanilla_accelerator", *folders, CNN, "-f", "mlf", "-o", tmp_path / "o.tar")
    line = assert_one_line_error(done, "extension module tvm_extension.twin of", "names must be unique")
    listed = subprocess.run([sys.executable, "-m", "tvm_extension", "list", *map(str, folders)],
                            capture_output=True, text=True)
    assert listed.returncode == 1, listed.stdout
    assert f"  why: {line[len('Error: '):]}" in listed.stdout.splitlines(), listed.stdout


def test_progress_line_is_cleared_when_its_stage_ends(monkeypatch):
    """An inner stage's line is cleared as it ends, while the outer stage still runs (the
    offload report printed next must not start on it)."""
    import io
    import time

    from tvm_extension.api import stages

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    monkeypatch.setattr(stages, "SHOW_AFTER", 0.1)
    with stages.stage("compiling"):
        with stages.stage("partitioning for slow_npu"):
            time.sleep(1.2)
        shown = terminal.getvalue()
        assert "partitioning for slow_npu (" in shown
        assert "\r\x1b[K" in shown[shown.rindex("partitioning for slow_npu ("):], shown
    assert terminal.getvalue().endswith("\r\x1b[K")
