"""tvmc on apache-tvm (the Relax engine) against TVM 0.16's own tvmc (the Relay engine): the
mission's command verbatim, and the options of docs/using-tvmc.md's table that both engines take,
give MLFs whose outputs are equal bit for bit with the same calls of the backend's C API; what
only the Relay engine does is refused in one line (tests/test_bad_input.py has those)."""
import collections
import re
import tarfile

import numpy as np
import pytest

from conftest import MODELS, ROOT, run_tvmc
from test_relax_engine import relax_engine
from tvm_extension.mlf import build

SEED = ["compile", "--target", "vanilla_accelerator", "--experimental-tvm-extension", "./uma_vanilla",
        "examples/models/cnn.onnx", "-f", "mlf", "-o", "out.tar"]  # the seed's words, run in a checkout-like folder


def c_api_calls(archive) -> collections.Counter:
    """The calls of Vanilla's C API in the generated C: each function with its integer arguments
    (the geometry; buffers are named differently by the engines), counted."""
    with tarfile.open(archive) as tar:
        text = "".join(tar.extractfile(m).read().decode() for m in tar.getmembers()
                       if re.fullmatch(r"(\./)?codegen/host/src/\w+_lib\d+\.c", m.name))
    calls = re.findall(r"(?<!TVM_DLL int32_t )\b(vanilla_\w+)\(([^;]*?)\)[;)]", text)
    return collections.Counter((name, tuple(a.strip() for a in args.split(",") if re.fullmatch(r"-?\d+", a.strip())))
                               for name, args in calls)


def outputs(archive, work, inputs):
    return build(archive, work).run(inputs)[0]


@pytest.fixture
def checkout_like(tmp_path):
    """A folder where the seed's relative paths (./uma_vanilla, examples/models) lead to this checkout's."""
    for name in ("uma_vanilla", "examples"):
        (tmp_path / name).symlink_to(ROOT / name)
    return tmp_path


@pytest.mark.quick
@pytest.mark.relay  # compares with the Relay engine
def test_the_seed_command_verbatim_gives_the_same_mlf_outputs_on_both_engines(checkout_like):
    relax = relax_engine(*SEED, cwd=checkout_like)
    assert relax.returncode == 0, relax.stderr
    (checkout_like / "out.tar").rename(checkout_like / "relax.tar")
    relay = run_tvmc(*SEED, cwd=checkout_like)
    assert relay.returncode == 0, relay.stderr
    assert c_api_calls(checkout_like / "relax.tar") == c_api_calls(checkout_like / "out.tar") != {}
    rng = np.random.default_rng(3)
    inputs = {"input": rng.standard_normal((1, 3, 16, 16)).astype(np.float32)}
    got, expected = (outputs(checkout_like / name, checkout_like / name.split(".")[0], inputs)
                     for name in ("relax.tar", "out.tar"))
    assert list(got) == list(expected)
    for name in got:
        assert got[name].tobytes() == expected[name].tobytes(), name


# Options both engines take (docs/using-tvmc.md's table), on one command line each.
BOTH_TAKE = {
    "target list, inline attribute, executor and runtime, module name, pass config": [
        "--target", "vanilla_accelerator -max_kernel_size=5, c", "--module-name", "net",
        "--pass-config", "tir.disable_vectorize=1", "--executor", "aot", "--runtime", "crt",
        "--executor-aot-unpacked-api", "1", "--executor-aot-interface-api", "c"],
    "attribute with a space, NHWC layout, model format, input shapes": [
        "--target", "vanilla_accelerator", "--target-vanilla_accelerator-max_kernel_size", "3",
        "--desired-layout", "NHWC", "--model-format", "onnx", "--input-shapes", "input:[1,3,16,16]"],
}


@pytest.mark.parametrize("options", BOTH_TAKE.values(), ids=BOTH_TAKE)
@pytest.mark.relay  # compares with the Relay engine
def test_options_both_engines_take_give_the_same_outputs(tmp_path, options):
    extension = ["--experimental-tvm-extension", str(ROOT / "uma_vanilla")]
    relax = relax_engine("compile", *options, *extension, str(MODELS / "cnn.onnx"), "-f", "mlf", "-o", "relax.tar",
                         cwd=tmp_path)
    assert relax.returncode == 0, relax.stderr
    relay = run_tvmc("compile", *options, *extension, MODELS / "cnn.onnx", "-f", "mlf", "-o", "relay.tar", cwd=tmp_path)
    assert relay.returncode == 0, relay.stderr
    assert c_api_calls(tmp_path / "relax.tar") == c_api_calls(tmp_path / "relay.tar") != {}
    x = {"input": np.random.default_rng(4).standard_normal((1, 3, 16, 16)).astype(np.float32)}
    got, expected = (outputs(tmp_path / f"{e}.tar", tmp_path / e, x) for e in ("relax", "relay"))
    assert got["output"].tobytes() == expected["output"].tobytes()


def test_dumps_and_run_options(tmp_path):
    """--dump-code relax,c and --dump-offloads write what they name; run takes tvmc's options on the
    MLF: --fill-mode for inputs not given, --print-top, -o."""
    done = relax_engine("compile", "--target", "vanilla_accelerator", str(MODELS / "cnn.onnx"), "-f", "mlf",
                        "-o", "cnn.tar", "--dump-code", "relax,c", "--dump-offloads", "offloads.txt", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "R.call_tir" in (tmp_path / "cnn.tar.relax").read_text()
    assert "tvmgen_default_run" in (tmp_path / "cnn.tar.c").read_text()
    offloads = (tmp_path / "offloads.txt").read_text().splitlines()
    assert offloads[:4] == ["Total number of operators and distribution by targets", "Total: 12",
                            "vanilla_accelerator: 7", "generic: 5"], offloads
    done = relax_engine("run", "cnn.tar", "--fill-mode", "ones", "--print-top", "3", "-o", "out.npz", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    with np.load(tmp_path / "out.npz") as out:
        scores = out["output_0"][0]
    expected = outputs(tmp_path / "cnn.tar", tmp_path / "again", {"input": np.ones((1, 3, 16, 16), np.float32)})
    assert scores.tobytes() == expected["output"][0].tobytes()
    top = np.argsort(scores, kind="stable")[::-1][:3]
    printed = [float(v) for v in re.findall(r"[-\d.e+]+", done.stdout)]
    assert printed[:3] == list(top) and np.allclose(printed[3:6], scores[top], rtol=1e-6), done.stdout


PYTHON_FLOW = """
import sys
from tvm_extension.tvmc import compile_model
print(compile_model(sys.argv[1], "vanilla_accelerator", "python.tar", extensions=[sys.argv[2]],
                    pass_config=["tir.disable_vectorize=1"], target_vanilla_accelerator_max_kernel_size=5))
"""


def test_the_python_flow_compiles_as_the_command_line(tmp_path):
    """README's "From Python" on apache-tvm: compile_model takes tvmc's options by name, as on the
    Relay engine, and writes the archive the command line writes, byte for byte."""
    from test_relax_engine import RELAX_PYTHON  # pylint: disable=import-outside-toplevel

    import subprocess  # pylint: disable=import-outside-toplevel

    done = subprocess.run([str(RELAX_PYTHON), "-c", PYTHON_FLOW, str(MODELS / "cnn.onnx"), str(ROOT / "uma_vanilla")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and done.stdout.splitlines()[-1] == "python.tar", done.stderr
    cli = relax_engine("compile", "--target", "vanilla_accelerator", str(MODELS / "cnn.onnx"), "-f", "mlf",
                       "-o", "cli.tar", "--pass-config", "tir.disable_vectorize=1",
                       "--target-vanilla_accelerator-max_kernel_size", "5", cwd=tmp_path)
    assert cli.returncode == 0, cli.stderr
    assert (tmp_path / "python.tar").read_bytes() == (tmp_path / "cli.tar").read_bytes()
