"""Backend authoring and distribution: scaffold, pip install, discovery, listing, the MLonMCU
spelling, isolation between compiles, and backends failing in their own code."""
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import tomli
from onnx.reference import ReferenceEvaluator

from conftest import (MODELS, ROOT, VANILLA_EXT, assert_one_line_error, kernel_calls, mlf_sources, new_environment,
                      pip_into, run_tvmc, tvm_cpu_reference, tvmc_in, without_example_backends)
from tvm_extension.testing.model_zoo import fetch
from test_setup_scripts import closure, distributions_of, imported_modules
from test_tflite_exact import random_inputs, reference_kernels
from test_upstream_backend import BACKEND as TINY_RELU_BACKEND
from tvm_extension.mlf import build
from tvm_extension.scaffold import create

# the int8 project fixture: made and installed once (pytest-xdist runs the module in one worker)
pytestmark = pytest.mark.xdist_group("authoring")

CNN = MODELS / "cnn.onnx"


def tvm_extension_cli(*args, cwd=None, env=None, python=sys.executable):
    return subprocess.run([python, "-m", "tvm_extension", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, env=dict(os.environ, **(env or {})))


def test_scaffold_install_test_compile_run(tmp_path, framework_wheel):
    done = tvm_extension_cli("new", "probe_npu", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    project = tmp_path / "probe_npu"
    assert (project / "tvm_extension" / "probe_npu" / "__init__.py").is_file()
    for module in ("backend", "patterns", "passes", "codegen", "strategies"):
        assert (project / "probe_npu" / f"{module}.py").is_file()
    # The commands it prints work as printed (a bare "probe_npu" would be looked up on PyPI), from this folder.
    install, run_tests = (shlex.split(line.split("#")[0]) for line in done.stdout.splitlines()[1:3])
    assert install == ["pip", "install", "./probe_npu[test,relay]"], done.stdout  # the engine at hand
    assert run_tests == ["pytest", "./probe_npu/tests"], done.stdout
    # installed into an environment of its own (with the framework's wheel): other tests, running
    # beside this one, see only the example backends
    python = new_environment(tmp_path / "env", framework_wheel, constraints=ROOT / "requirements.lock")
    installed = pip_into(python, *install[2:], cwd=tmp_path)
    assert "does not provide the extra" not in installed.stderr, installed.stderr[-2000:]
    # Its own tests pass, straight after generation.
    tests = subprocess.run([python.parent / "pytest", "-p", "no:cacheprovider", *run_tests[1:]],
                           cwd=tmp_path, capture_output=True, text=True)
    assert tests.returncode == 0 and "1 passed" in tests.stdout, tests.stdout[-2000:] + tests.stderr[-2000:]
    # Plain tvmc finds the installed backend: no flag, no environment variable.
    out = tmp_path / "cnn.tar"
    done = tvmc_in(python, "compile", "--target", "probe_npu", CNN, "-f", "mlf", "-o", out, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert kernel_calls(out, "probe_npu_conv2d") == 3
    x = np.random.default_rng(0).standard_normal((1, 3, 16, 16)).astype(np.float32)
    got = build(out, tmp_path / "b").run({"input": x})[0]["output"]
    np.testing.assert_allclose(got, ReferenceEvaluator(str(CNN)).run(None, {"input": x})[0], rtol=1e-4, atol=1e-5)
    listing = tvm_extension_cli("list", cwd=tmp_path, python=python)
    assert "tvm_extension.probe_npu:ProbeNpuExtension" in listing.stdout
    assert "from: distribution tvm-extension-probe-npu 0.1.0" in listing.stdout


def test_scaffold_editable_install_sees_edits(tmp_path, framework_wheel):
    assert tvm_extension_cli("new", "probe_edit", cwd=tmp_path).returncode == 0
    python = new_environment(tmp_path / "env", "--no-deps", framework_wheel)
    pip_into(python, "--no-deps", "-e", "./probe_edit", cwd=tmp_path)
    patterns = tmp_path / "probe_edit" / "probe_edit" / "patterns.py"
    # An edit to the backend (take 3x3 kernels only) shows in the next compile, without reinstalling.
    patterns.write_text(patterns.read_text().replace(
        "    return None\n", "    return None if kh == 3 else 'edited: 3x3 only'\n"))
    out = tmp_path / "cnn.tar"
    done = tvmc_in(python, "compile", "--target", "probe_edit", CNN, "-f", "mlf", "-o", out, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "edited: 3x3 only x1" in done.stdout
    assert kernel_calls(out, "probe_edit_conv2d") == 2


@pytest.mark.parametrize("int8", [False, True], ids=["float", "int8"])
def test_scaffold_test_extra_brings_what_its_tests_import(tmp_path, int8):
    """`pip install './NAME[test,relay]' && pytest` works in an environment without pytest (the demo's):
    the project's dependencies and its [test] and engine extras bring every module its tests import."""
    project = create("probe_extra", tmp_path, int8=int8)
    metadata = tomli.loads((project / "pyproject.toml").read_text())["project"]
    extras = metadata["optional-dependencies"]
    brought = closure(metadata["dependencies"] + extras["test"] + extras["relay"])  # next_steps' [test,relay]
    needed = distributions_of(imported_modules((project / "tests").glob("*.py")) - {"probe_extra"} | {"pytest"})
    assert "tvm-uma-extensions" in needed.values()  # the scan sees the tests' imports
    assert {module: dist for module, dist in needed.items() if dist not in brought} == {}


INT8 = "probe_int8"
INT8_CALL = rf"= {INT8}_conv2d_s8\(([^;]*)\);"  # the generated calls (not the declaration)
# As tvm_extension.testing.clib's sanitized builds, less "left shift of a negative value", which TVM's own code
# (the CPU part of an MLF) does and the kernel does not.
SANITIZE = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all",
            "-fno-omit-frame-pointer"]


@pytest.fixture(scope="module")
def int8_project(tmp_path_factory, framework_wheel):
    """A project made by ``new --int8``, pip-installed as the float one is, in an environment of
    its own: (the project's folder, that environment's python)."""
    folder = tmp_path_factory.mktemp("int8")
    done = tvm_extension_cli("new", INT8, "--int8", cwd=folder)
    assert done.returncode == 0, done.stderr
    python = new_environment(folder / "env", framework_wheel, constraints=ROOT / "requirements.lock")
    pip_into(python, f"./{INT8}", cwd=folder)
    return folder / INT8, python


@pytest.mark.real_model
def test_int8_scaffold_install_test_compile(int8_project, tmp_path):
    assert "--int8" in tvm_extension_cli("new", "--help").stdout
    project, python = int8_project
    for module in ("backend", "patterns", "passes", "codegen", "strategies"):
        source = (project / INT8 / f"{module}.py").read_text()
        assert "qvanilla" not in source  # not part of the installed framework
    assert "## Two roundings" in (project / "README.md").read_text()
    # The C mock compiles without a warning.
    done = subprocess.run(["gcc", "-std=c99", "-Wall", "-Wextra", "-Wconversion", "-pedantic", "-Werror", "-c", "-o",
                           tmp_path / "k.o", project / INT8 / "c" / f"{INT8}.c"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    # Its own tests pass, straight after generation (the kernel alone, then tvmc -> MLF -> run).
    tests = subprocess.run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"], cwd=project,
                           capture_output=True, text=True)
    assert tests.returncode == 0 and " passed" in tests.stdout, tests.stdout[-2000:] + tests.stderr[-2000:]
    # Plain tvmc offloads a real int8 TFLite network's dense convs; the depthwise ones stay on the CPU, with why.
    out = tmp_path / "kws.tar"
    done = tvmc_in(python, "compile", "--target", INT8, fetch("kws_dscnn_int8"), "-f", "mlf", "-o", out, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"[{INT8}] offloaded: qnn.conv2d x5, nn.bias_add x5, qnn.requantize x5, clip x5 in 5 functions" in done.stdout
    assert "qnn.conv2d: groups=64 (depthwise or grouped; the kernel takes groups=1) x4" in done.stdout
    assert kernel_calls(out, f"{INT8}_conv2d_s8") == 5


@pytest.mark.real_model
def test_int8_template_is_exact_on_a_real_network(int8_project, tmp_path, monkeypatch):
    """DS-CNN through the generated backend: with --tflite-exact its calls round as TFLite does
    and the network equals TFLite's reference kernels; without, its calls round as TVM does and
    the network equals TVM's own CPU build (the two differ).  The generated kernel also runs
    under AddressSanitizer and UndefinedBehaviorSanitizer."""
    model = fetch("kws_dscnn_int8")
    programs = {}
    for option, rounding in (("--tflite-exact", 1), (None, 0)):
        out = tmp_path / f"{rounding}.tar"
        done = tvmc_in(int8_project[1], "compile", "--target", INT8, *filter(None, [option]), model, "-f", "mlf",
                       "-o", out, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert f"[{INT8}] offloaded: qnn.conv2d x5," in done.stdout and " in 5 functions" in done.stdout
        calls = [c for text in mlf_sources(out).values() for c in re.findall(INT8_CALL, text)]
        assert len(calls) == 5 and all(c.replace(" ", "").endswith(f",{rounding}") for c in calls), calls
        programs[rounding] = build(out, tmp_path / f"b{rounding}")
    rng = np.random.default_rng(7)
    differs = 0
    for _ in range(3):
        inputs = random_inputs(programs[0], rng, (-40, 80))  # DS-CNN's input scale: 0.88
        expected = reference_kernels(model, inputs)
        for got, want in zip(programs[1].run(inputs)[0].values(), expected, strict=True):
            np.testing.assert_array_equal(got, want)
        tvm_own = list(programs[0].run(inputs)[0].values())
        for got, want in zip(tvm_own, tvm_cpu_reference(model, inputs), strict=True):
            np.testing.assert_array_equal(got, want)
        differs += any(not np.array_equal(t, e) for t, e in zip(tvm_own, expected))
    assert differs, "TVM's rounding matched TFLite's on every input: the test shows nothing"
    monkeypatch.setenv("ASAN_OPTIONS", "detect_leaks=1")
    for rounding in (0, 1):
        sanitized = build(tmp_path / f"{rounding}.tar", tmp_path / f"s{rounding}",
                          cflags=("-O1", *SANITIZE))
        inputs = random_inputs(sanitized, rng, (-40, 80))
        for got, want in zip(sanitized.run(inputs)[0].values(), programs[rounding].run(inputs)[0].values()):
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name,message", [
    ("My-NPU", "not a valid backend name"),
    ("class", "not a valid backend name"),
    ("llvm", "already a TVM target kind"),
    ("cmsis-nn", "not a valid backend name"),
    ("existing", "already exists"),
])
@pytest.mark.quick
def test_scaffold_rejects_bad_names(tmp_path, name, message):
    (tmp_path / "existing").mkdir()
    before = sorted(p.name for p in tmp_path.iterdir())
    done = tvm_extension_cli("new", name, "--directory", tmp_path)
    assert done.returncode != 0 and message in done.stderr and "Traceback" not in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before, "nothing left behind"


MLONMCU_EXTENSION = '''
from tvm.driver.tvmc.extensions import TVMCExtension
from uma_vanilla import VanillaAcceleratorBackend


class MyExt(TVMCExtension):
    def __init__(self):
        self.backend = VanillaAcceleratorBackend()

    def uma_backends(self):
        return [self.backend]
'''


@pytest.fixture
def mlonmcu_folder(tmp_path):
    package = tmp_path / "mlonmcu" / "tvmc_extension" / "vanilla_ext"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(MLONMCU_EXTENSION)
    return tmp_path / "mlonmcu"


def test_mlonmcu_spelling(tmp_path, mlonmcu_folder):
    out = tmp_path / "o.tar"
    done = run_tvmc("compile", "--target", "vanilla_accelerator", "--experimental-tvmc-extension", mlonmcu_folder,
                    CNN, "-f", "mlf", "-o", out)
    assert done.returncode == 0, done.stderr
    assert kernel_calls(out) == 3
    done = run_tvmc("compile", "--target", "vanilla_accelerator", CNN, "-f", "mlf", "-o", out,
                    env={"TVMC_EXTENSION_DIR": str(mlonmcu_folder)})
    assert done.returncode == 0, done.stderr


def test_listing_shows_origins(tmp_path, mlonmcu_folder):
    broken = tmp_path / "broken" / "tvm_extension" / "broken"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise ImportError('driver library missing')\n")
    done = tvm_extension_cli("list", "--experimental-tvm-extension", VANILLA_EXT,
                             "--experimental-tvm-extension", tmp_path / "broken",
                             env={"TVMC_EXTENSION_DIR": str(mlonmcu_folder)})
    assert done.returncode == 1  # something failed to load
    out = done.stdout
    assert f"tvm_extension.vanilla:VanillaExtension\n  from: path {VANILLA_EXT}" in out
    assert "target vanilla_accelerator: max_kernel_size=7" in out
    assert "tvmc_extension.vanilla_ext:MyExt\n  from: environment TVMC_EXTENSION_DIR" in out
    assert "FAILED tvm_extension.broken" in out and "ImportError: driver library missing" in out


def test_entry_point_group(tmp_path):
    site = tmp_path / "site"
    (site / "ep_backend").mkdir(parents=True)
    (site / "ep_backend" / "__init__.py").write_text(textwrap.dedent('''
        from tvm_extension.api import TVMExtension
        from uma_vanilla import VanillaAcceleratorBackend

        class EntryPointExtension(TVMExtension):
            def uma_backends(self):
                return [VanillaAcceleratorBackend()]
    '''))
    info = site / "ep_backend-1.2.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ep-backend\nVersion: 1.2\n")
    (info / "entry_points.txt").write_text("[tvm_extension]\nvanilla = ep_backend:EntryPointExtension\n")
    done = tvm_extension_cli("list", env={"PYTHONPATH": str(site)})
    assert "ep_backend:EntryPointExtension\n  from: entry point vanilla of ep-backend" in done.stdout
    out = tmp_path / "o.tar"
    done = run_tvmc("compile", "--target", "vanilla_accelerator", CNN, "-f", "mlf", "-o", out, env={"PYTHONPATH": str(site)})
    assert done.returncode == 0, done.stderr
    assert kernel_calls(out) == 3


def test_two_backends_in_one_compile(tmp_path):
    package = tmp_path / "ext" / "tvm_extension" / "tiny"
    (package / "clib").mkdir(parents=True)
    (package / "__init__.py").write_text(TINY_RELU_BACKEND)
    (package / "clib" / "tiny_relu.h").write_text("#include <stdint.h>\nint32_t tiny_relu(float* in, float* out, int n);\n")
    (package / "clib" / "tiny_relu.c").write_text(
        '#include "tiny_relu.h"\nint32_t tiny_relu(float* in, float* out, int n) {\n'
        "  for (int i = 0; i < n; ++i) out[i] = in[i] > 0.0f ? in[i] : 0.0f;\n  return 0;\n}\n")
    out = tmp_path / "o.tar"
    done = run_tvmc("compile", "--target", "tiny_relu, vanilla_accelerator, c", "--experimental-tvm-extension",
                    VANILLA_EXT, "--experimental-tvm-extension", tmp_path / "ext", CNN, "-f", "mlf", "-o", out)
    assert done.returncode == 0, done.stderr
    # The first target partitions first: tiny_relu takes every ReLU, Vanilla the convs (+ bias) without them.
    assert "[tiny_relu] offloaded: nn.relu x3 in 3 functions" in done.stdout
    assert "[vanilla_accelerator] offloaded: nn.conv2d x3, nn.bias_add x1 in 3 functions" in done.stdout
    x = np.random.default_rng(0).standard_normal((1, 3, 16, 16)).astype(np.float32)
    got = build(out, tmp_path / "b").run({"input": x})[0]["output"]
    np.testing.assert_allclose(got, ReferenceEvaluator(str(CNN)).run(None, {"input": x})[0], rtol=1e-4, atol=1e-5)


def test_parallel_compiles_do_not_see_each_other(tmp_path):
    for name in ("vanilla", "qvanilla"):  # each backend's folder, with the installed ones out of sight
        shutil.copytree(ROOT / f"uma_{name}", tmp_path / name, ignore=shutil.ignore_patterns("tests", "__pycache__"))

    def compile_with(folder, out):
        return without_example_backends("tvm.driver.tvmc", "compile", "--target", "qvanilla", CNN, "-f", "mlf",
                                        "--experimental-tvm-extension", folder, "-o", out)
    env = {k: v for k, v in os.environ.items() if k not in ("TVM_EXTENSION_PATH", "TVMC_EXTENSION_DIR")}
    first = subprocess.Popen(compile_with(tmp_path / "vanilla", tmp_path / "a.tar"), stderr=subprocess.PIPE,
                             text=True, env=env)
    second = subprocess.Popen(compile_with(tmp_path / "qvanilla", tmp_path / "b.tar"), stderr=subprocess.PIPE,
                              text=True, env=env)
    first_err, second_err = first.communicate(timeout=600)[1], second.communicate(timeout=600)[1]
    assert first.returncode != 0 and "unknown target 'qvanilla'" in first_err
    assert second.returncode == 0, second_err  # a float model: nothing to offload, but it compiles
    assert not (tmp_path / "a.tar").exists() and (tmp_path / "b.tar").exists()


def _failing_backend(folder, body):
    package = folder / "tvm_extension" / "boom"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(textwrap.dedent('''
        import tvm
        from tvm.relay.backend.contrib.uma.api.utils import PassPhase
        from tvm_extension.api import TVMExtension
        from uma_vanilla import VanillaAcceleratorBackend

        @tvm.tir.transform.prim_func_pass(opt_level=0)
        class FailingPass:
            def transform_function(self, func, mod, ctx):
                raise ValueError("unsupported kernel size")

        @tvm.transform.module_pass(opt_level=0)
        class FailingRelayPass:
            def transform_module(self, mod, ctx):
                raise ValueError("unsupported layout")

        class Boom(VanillaAcceleratorBackend):
        ''') + textwrap.indent(textwrap.dedent(body), "    ") + textwrap.dedent('''
            @property
            def target_name(self):
                return "boom"

        class BoomExtension(TVMExtension):
            def uma_backends(self):
                return [Boom()]
        '''))
    return folder


def test_predicate_that_raises_leaves_the_operator_on_the_cpu(tmp_path):
    """A backend's pattern check meeting a graph it did not expect never stops the compile."""
    folder = _failing_backend(tmp_path / "ext", '''
        def _offloadable(self, matched):
            raise KeyError("max_channels")
        ''')
    out = tmp_path / "o.tar"
    done = run_tvmc("compile", "--target", "boom", "--experimental-tvm-extension", folder, CNN, "-f", "mlf", "-o", out)
    assert done.returncode == 0, done.stderr
    assert "[boom] offloaded: none in 0 functions" in done.stdout
    raised = next(l for l in done.stdout.splitlines() if l.startswith("[boom] pattern checks that raised (taken as no match): "))
    assert "nn.conv2d: pattern 'boom.conv2d_alone' raised KeyError: 'max_channels'" in raised
    x = np.random.default_rng(0).standard_normal((1, 3, 16, 16)).astype(np.float32)
    got = build(out, tmp_path / "b").run({"input": x})[0]["output"]
    np.testing.assert_allclose(got, ReferenceEvaluator(str(CNN)).run(None, {"input": x})[0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("body,message", [
    ('''
     def __init__(self):
         super().__init__()
         self._relay_to_relay._relay_passes.append((PassPhase.POST_PARTITIONING_0, FailingRelayPass()))
     ''', ("backend 'boom' failed while partitioning:", "unsupported layout")),
    ('''
     def __init__(self):
         super().__init__()
         self._relay_to_tir._tir_passes = [(PassPhase.TIR_PHASE_0, FailingPass())]
     ''', ("backend 'boom' failed to generate code for tvmgen_default_boom_main_", "nn.conv2d",
           "unsupported kernel size")),
])
def test_backend_failures_are_named(tmp_path, body, message):
    folder = _failing_backend(tmp_path / "ext", body)
    done = run_tvmc("compile", "--target", "boom", "--experimental-tvm-extension", folder, CNN, "-f", "mlf",
                    "-o", tmp_path / "o.tar")
    assert_one_line_error(done, *message)
    assert not (tmp_path / "o.tar").exists()
