"""The seed's Python flow: tvmc.load -> backend.partition -> tvmc.compile -> tvmc.run, and `tvmc run`."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest
pytest.importorskip("tvm.relay", reason="the Relay engine's tests (hhb-tvm, Python 3.10): not installed here")

from conftest import MODELS, VANILLA_EXT, assert_close, kernel_calls, run_tvmc, tflite_reference
from tvm_extension.testing.model_zoo import fetch

FLOW = textwrap.dedent("""
    import sys
    import numpy as np
    import tvm
    from tvm.driver import tvmc
    from tvm.relay.backend import Executor, Runtime
    from uma_vanilla import VanillaAcceleratorBackend

    model = tvmc.load(sys.argv[1])
    backend = VanillaAcceleratorBackend()
    backend.register()
    partitioned = backend.partition(model)               # a TVMCModel in, a TVMCModel out
    assert type(partitioned) is type(model), type(partitioned)
    mod, params = backend.partition((model.mod, model.params))  # an (IRModule, params) pair
    assert isinstance(mod, tvm.IRModule) and params == {}
    package = tvmc.compile(
        partitioned, target="vanilla_accelerator", output_format="mlf", package_path=sys.argv[2],
        executor=Executor("aot", {"interface-api": "c", "unpacked-api": True}), runtime=Runtime("crt"),
        pass_context_configs=["tir.disable_vectorize=1"],
    )
    inputs = {name: np.load(sys.argv[3])[name] for name in np.load(sys.argv[3]).files}
    result = tvmc.run(package, device="cpu", inputs=inputs, repeat=2, number=1)
    np.savez(sys.argv[4], *[result.get_output(name) for name in result.outputs])
""")


def test_load_partition_compile_run(tmp_path):
    model = fetch("kws_on_off_float32")
    rng = np.random.default_rng(2)
    inputs = {"serving_default_input_1:0": rng.standard_normal((1, 98, 1, 104)).astype(np.float32)}
    np.savez(tmp_path / "in.npz", **inputs)
    script = tmp_path / "flow.py"
    script.write_text(FLOW)
    done = subprocess.run([sys.executable, str(script), str(model), str(tmp_path / "m.tar"), str(tmp_path / "in.npz"),
                           str(tmp_path / "out.npz")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert kernel_calls(tmp_path / "m.tar") == 79  # all of its convs: 49 dense of stride 1, 6 of stride 2, 24 depthwise
    got = np.load(tmp_path / "out.npz")["arr_0"]
    assert_close(got, tflite_reference(model, inputs)[0], what="python flow vs TFLite")


@pytest.mark.quick
def test_partition_rejects_other_types():
    script = (
        "from uma_vanilla import VanillaAcceleratorBackend\n"
        "try:\n"
        "    VanillaAcceleratorBackend().partition('model.onnx')\n"
        "except TypeError as e:\n"
        "    print(e)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert "takes an IRModule, an (IRModule, params) pair or a TVMCModel, not str" in done.stdout, done.stderr


@pytest.mark.quick
def test_tvmc_run_on_host(tmp_path):
    out = tmp_path / "cnn.tar"
    done = run_tvmc("compile", "--target", "vanilla_accelerator", "--experimental-tvm-extension", VANILLA_EXT,
                    MODELS / "cnn.onnx", "-f", "mlf", "-o", out)
    assert done.returncode == 0, done.stderr
    inputs = {"input": np.random.default_rng(4).standard_normal((1, 3, 16, 16)).astype(np.float32)}
    np.savez(tmp_path / "in.npz", **inputs)
    done = run_tvmc("run", out, "--device", "cpu", "--inputs", tmp_path / "in.npz", "--outputs", tmp_path / "out.npz",
                    "--print-time", "--repeat", "3")
    assert done.returncode == 0, done.stderr
    assert "mean (ms)" in done.stdout
    from onnx.reference import ReferenceEvaluator

    expected = ReferenceEvaluator(str(MODELS / "cnn.onnx")).run(None, inputs)[0]
    assert_close(np.load(tmp_path / "out.npz")["output_0"], expected, what="tvmc run")  # keyed as tvmc keys it
    done = run_tvmc("run", out, "--device", "cpu", "--inputs", tmp_path / "in.npz", "--print-top", "3")
    assert done.returncode == 0, done.stderr
    top = np.argsort(expected.ravel())[::-1][:3]
    labels = done.stdout.strip().split("]")[0].strip("[ \n").split()  # tvmc prints [[labels] [values]]
    assert [int(float(x)) for x in labels] == list(top), done.stdout


@pytest.mark.quick
def test_registration_leaves_the_backend_unchanged():
    """Registering adds nothing to a backend's own pass lists: two instances stay alike."""
    script = textwrap.dedent("""
        from uma_vanilla import VanillaAcceleratorBackend

        def passes(backend):
            return ([(phase, getattr(p, "info", p).name if hasattr(p, "info") else type(p).__name__)
                     for phase, p in backend._relay_to_relay._relay_passes],
                    len(backend._relay_to_tir._tir_passes), len(backend._relay_to_relay._patterns))

        registered, fresh = VanillaAcceleratorBackend(), VanillaAcceleratorBackend()
        before = passes(registered)
        registered.register()
        print(passes(registered) == before == passes(fresh), len(before[0]) == len(VanillaAcceleratorBackend()._relay_to_relay._relay_passes) > 0)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.stdout.split() == ["True", "True"], done.stdout + done.stderr
