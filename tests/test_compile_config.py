"""One configuration per compile: two models with different target attributes, compiled in one
process one after the other and in two threads (whose compiles take turns: TVM's lowering is not
thread-safe), each get their own settings (the C of
each uses its own attribute values and equals a compile alone in a fresh process), and the
backend objects are never changed by a compile."""
import subprocess
import sys
import tarfile
import textwrap

import numpy as np
import pytest

from conftest import MODELS, VANILLA_EXT, assert_close, kernel_calls, onnx_reference, run_tvmc

CNN = MODELS / "cnn.onnx"
# (target string, what its C must show): Vanilla offloads the 5x5 conv only with max_kernel_size >= 5;
# Strawberry's scratchpad size is the argument of strawberry_begin in the generated C.
POINTS = {
    "vanilla3": ("vanilla_accelerator -max_kernel_size=3", 2),
    "vanilla7": ("vanilla_accelerator -max_kernel_size=7", 3),
    "strawberry16k": ("strawberry -scratchpad_bytes=16384", 16384),
    "strawberry64k": ("strawberry -scratchpad_bytes=65536", 65536),
}

SCRIPT = textwrap.dedent("""
    import sys, threading
    from tvm_extension import uma
    from tvm_extension.tvmc import compile_model

    ext, model, out, points = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    targets = dict(p.split("=", 1) for p in points)

    failed = []

    def compile_one(name, suffix):
        try:
            compile_model(model, targets[name], f"{out}/{name}{suffix}.tar", extensions=[ext])
        except BaseException as err:  # a thread's exception would otherwise only be printed
            failed.append(f"{name}{suffix}: {err!r}")
            raise

    # one after the other, then the first again: it must not have kept the second's settings
    names = list(targets)
    for name in names:
        compile_one(name, "_seq")
    compile_one(names[0], "_again")
    # two at once, in threads
    threads = [threading.Thread(target=compile_one, args=(name, "_thread")) for name in names]
    for t in threads: t.start()
    for t in threads: t.join()
    assert not failed, failed
    backends = uma.registered_backends()
    assert not any(hasattr(b, "target_attrs") for b in backends.values()), "a compile changed a backend object"
    assert uma.current() is None
""")


def _members(archive):
    with tarfile.open(archive) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def _check_point(archive, target, expected):
    if target.startswith("vanilla"):
        assert kernel_calls(archive) == expected, archive
    else:
        c = "".join(text.decode() for name, text in _members(archive).items() if name.endswith(".c"))
        assert f"strawberry_begin_call({expected}" in c.replace(" ", "").replace("(int32_t)", ""), archive


def _run_pair(tmp_path, names):
    out = tmp_path / "out"
    out.mkdir()
    script = tmp_path / "two.py"
    script.write_text(SCRIPT)
    points = [f"{name}={POINTS[name][0]}" for name in names]
    done = subprocess.run([sys.executable, str(script), str(VANILLA_EXT), str(CNN), str(out), *points],
                          capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


@pytest.mark.parametrize("names", [["vanilla3", "vanilla7"], ["strawberry16k", "strawberry64k"]], ids=["vanilla", "strawberry"])
def test_two_attribute_sets_in_one_process_and_in_two_threads(tmp_path, names):
    out = _run_pair(tmp_path, names)
    for name in names:
        target, expected = POINTS[name]
        alone = tmp_path / f"{name}_alone.tar"  # the same compile by itself, in a fresh process
        done = run_tvmc("compile", "--target", target, "--experimental-tvm-extension", VANILLA_EXT, CNN,
                        "-f", "mlf", "-o", alone)
        assert done.returncode == 0, done.stderr
        _check_point(alone, target, expected)
        for how in ("seq", "thread"):
            assert _members(out / f"{name}_{how}.tar") == _members(alone), (name, how)
    assert _members(out / f"{names[0]}_again.tar") == _members(out / f"{names[0]}_seq.tar")
    # and what the threads built runs right
    inputs = {"input": np.random.default_rng(8).standard_normal((1, 3, 16, 16)).astype(np.float32)}
    np.savez(tmp_path / "in.npz", **inputs)
    for name in names:
        done = subprocess.run([sys.executable, "-m", "tvm_extension.mlf", "run", str(out / f"{name}_thread.tar"),
                               "-i", str(tmp_path / "in.npz"), "-o", str(tmp_path / f"{name}.npz")],
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        got = np.load(tmp_path / f"{name}.npz")
        assert_close(got[got.files[0]], onnx_reference(CNN, inputs)[0], what=name)
