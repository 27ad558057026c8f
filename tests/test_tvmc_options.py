"""tvmc's own options with an extension target (--dump-code, --dump-offloads, tune, --desired-layout)
and the Python entry point ``tvm_extension.tvmc.compile_model``, which must compile exactly as the
command line does."""
import subprocess
import sys
import tarfile
import textwrap

import numpy as np
import pytest
pytest.importorskip("tvm.relay", reason="the Relay engine's tests (hhb-tvm, Python 3.10): not installed here")

from conftest import MODELS, VANILLA_EXT, assert_close, assert_one_line_error, kernel_calls, onnx_reference, run_tvmc
from tvm_extension.testing.model_zoo import fetch

EXT = ["--experimental-tvm-extension", VANILLA_EXT]
CNN = MODELS / "cnn.onnx"


def _compile(out, *extra, model=CNN, target="vanilla_accelerator"):
    return run_tvmc("compile", "--target", target, *EXT, model, "-f", "mlf", "-o", out, *extra)


def _members(archive):
    with tarfile.open(archive) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


@pytest.mark.quick
def test_dump_code_writes_every_generated_c_file_beside_the_output(tmp_path):
    out = tmp_path / "out.tar"
    done = _compile(out, "--dump-code", "relay,c")
    assert done.returncode == 0, done.stderr
    relay_dump = (tmp_path / "out.tar.relay").read_text()
    c_dump = (tmp_path / "out.tar.c").read_text()
    assert 'Compiler="vanilla_accelerator"' in relay_dump
    generated = {n for n in _members(out) if n.startswith("./codegen/host/src/default_lib")}
    assert {f"/* ---- {n[2:]} ---- */" for n in generated} <= set(c_dump.splitlines())
    # the host's run function and every offloaded function, each calling the kernel once
    assert "tvmgen_default___tvm_main__" in c_dump
    for index in range(3):
        assert f"tvmgen_default_vanilla_accelerator_main_{index}(" in c_dump
    assert c_dump.count("= vanilla_conv2dnchw") == kernel_calls(out) == 3


def test_dump_code_of_what_c_targets_do_not_generate_is_refused(tmp_path):
    done = _compile(tmp_path / "out.tar", "--dump-code", "relay,ll")
    assert_one_line_error(done, "--dump-code ll", "choose from relay, tir, c")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.quick
def test_dump_offloads_names_the_extension_target(tmp_path):
    done = _compile(tmp_path / "out.tar", "--dump-offloads", "-")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "vanilla_accelerator: 7" in lines  # 3 convs, 3 relus, 1 bias_add
    assert "generic: 5" in lines  # the dilated conv, pool, flatten, dense, add
    offloaded = [l for l in lines if l.startswith("vanilla_accelerator<-") and "nn.conv2d(" in l]
    assert len(offloaded) == 3
    assert any(l.startswith("generic") and "dilation=[2, 2]" in l for l in lines)


def test_tune_refuses_an_extension_target_in_one_line(tmp_path):
    done = run_tvmc("tune", "--target", "vanilla_accelerator", *EXT, CNN, "-o", tmp_path / "records.json")
    assert_one_line_error(done, "target 'vanilla_accelerator' has nothing to tune", "tvmc compile --target")
    assert not (tmp_path / "records.json").exists()


def test_desired_layout_before_the_model(tmp_path):
    out = tmp_path / "out.tar"
    done = run_tvmc("compile", "--desired-layout", "NHWC", CNN, "--target", "vanilla_accelerator", *EXT,
                    "-f", "mlf", "-o", out)
    assert done.returncode == 0, done.stderr
    assert kernel_calls(out, r"vanilla_conv2dnhwc\w*") == 3  # the layout was applied: the kernel reads NHWC


FLOW = textwrap.dedent("""
    import sys
    from tvm.driver import tvmc
    from tvm_extension.tvmc import compile_model

    model, ext, out, kind = sys.argv[1:5]
    if kind == "path":
        compile_model(model, sys.argv[5], out, extensions=[ext], tflite_exact=len(sys.argv) > 6)
    else:  # a TVMCModel, as tvmc.load gives it
        compile_model(tvmc.load(model), sys.argv[5], out, extensions=[ext])
""")


def _python_compile(tmp_path, model, out, kind, target, *flags):
    script = tmp_path / "flow.py"
    script.write_text(FLOW)
    return subprocess.run([sys.executable, str(script), str(model), str(VANILLA_EXT), str(out), kind, target, *flags],
                          capture_output=True, text=True, timeout=900)


def test_python_entry_point_compiles_as_the_command_line(tmp_path):
    cli = tmp_path / "cli.tar"
    assert _compile(cli).returncode == 0
    for kind in ("path", "loaded"):
        out = tmp_path / f"{kind}.tar"
        done = _python_compile(tmp_path, CNN, out, kind, "vanilla_accelerator")
        assert done.returncode == 0, done.stderr[-3000:]
        assert "[vanilla_accelerator] offloaded: nn.conv2d x3" in done.stdout  # the same report
        assert _members(out) == _members(cli), kind  # the same defaults and options: the same archive
    # and it runs: built with gcc (no vector types in the C), equal to onnx.reference
    inputs = {"input": np.random.default_rng(3).standard_normal((1, 3, 16, 16)).astype(np.float32)}
    np.savez(tmp_path / "in.npz", **inputs)
    done = subprocess.run([sys.executable, "-m", "tvm_extension.mlf", "run", str(tmp_path / "loaded.tar"),
                           "-i", str(tmp_path / "in.npz"), "-o", str(tmp_path / "out.npz")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    got = np.load(tmp_path / "out.npz")
    assert_close(got[got.files[0]], onnx_reference(CNN, inputs)[0], what="compile_model vs onnx.reference")


def test_python_entry_point_takes_tflite_exact(tmp_path):
    model = fetch("kws_dscnn_int8")
    cli = tmp_path / "cli.tar"
    done = _compile(cli, "--tflite-exact", model=model, target="qvanilla")
    assert done.returncode == 0, done.stderr
    out = tmp_path / "py.tar"
    done = _python_compile(tmp_path, model, out, "path", "qvanilla", "--tflite-exact")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "[tflite-exact] made exact:" in done.stdout
    assert _members(out) == _members(cli)
