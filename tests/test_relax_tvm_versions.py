"""The Relax engine on every apache-tvm release it claims (``tvm_internals.TESTED_VERSIONS``: 0.26 and
0.27, issue #47): one network per example backend compiled into an MLF on each release gives the
same outputs bit for bit, and the same C but for the spellings of TVM's C printer.

apache-tvm 0.27 is .venv-relax's; each other release is an environment of its own, named by its Python
in ``TVM_VERSIONS_PYTHON`` (os.pathsep between several), with this checkout and the example backends
installed editable as in .venv-relax: ``scripts/test.sh --tvm-versions`` makes apache-tvm 0.26's and
runs this file.  Without the variable those tests are skipped (CI's default run: a release's compiles
take minutes); with it, a missing environment or any difference fails.

TVM 0.26's Relax TFLite frontend refuses the zoo's int8 networks (per-channel int8 depthwise convs,
quantized average pools; 0.27 imports them): on every release the int8 backends compile an ONNX QDQ
network (``qdq_network``) instead, and the int8 zoo network is compared where it imports.

``test_relax_constants_only_through_tvm_internals`` runs in the default run: what 0.26 and 0.27 spell
differently is used through ``tvm_internals`` only.
"""
import os
import re
import subprocess
import tarfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import MODELS, ROOT, fetch
from test_relax_engine import RELAX_PYTHON
from tvm_extension.mlf import build

VARIABLE = "TVM_VERSIONS_PYTHON"
OTHERS = [Path(p) for p in os.environ.get(VARIABLE, "").split(os.pathsep) if p.strip()]
ASKED = pytest.mark.skipif(not OTHERS, reason=f"the zoo on each apache-tvm release: set {VARIABLE} to another "
                           "Relax environment's python (scripts/test.sh --tvm-versions makes apache-tvm 0.26's)")

# What each environment's engine is: its apache-tvm, whether the engine vouches for it, where it is.
ABOUT = """
import tvm
from tvm_extension.relax import tvm_internals
print(tvm.__version__, tvm.__version__ in tvm_internals.TESTED_VERSIONS, tvm_internals.__file__,
      ",".join(tvm_internals.TESTED_VERSIONS))
"""


def _environment():
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


def _about(python: Path, cwd: Path):
    """(its apache-tvm version, vouched for, its engine's tvm_internals.py, TESTED_VERSIONS); run in
    ``cwd``, away from a checkout (``python -c`` imports from the current directory first)."""
    assert python.is_file(), f"{VARIABLE} names {python}, which is not a file"
    done = subprocess.run([str(python), "-c", ABOUT], capture_output=True, text=True, timeout=300, env=_environment(),
                          cwd=cwd)
    assert done.returncode == 0, f"{python}: the Relax engine does not import:\n{done.stderr[-2000:]}"
    version, vouched, package, tested = done.stdout.split()
    return version, vouched == "True", Path(package), tested.split(",")


@pytest.fixture(scope="module")
def releases(tmp_path_factory):
    """{apache-tvm version: its environment's python}: .venv-relax's first, then TVM_VERSIONS_PYTHON's."""
    found, cwd = {}, tmp_path_factory.mktemp("releases")
    for python in [RELAX_PYTHON, *OTHERS]:
        version, vouched, package, tested = _about(python, cwd)
        assert package.resolve().is_relative_to(ROOT.resolve()), f"{python} runs {package}, not this checkout's engine"
        assert vouched, f"{python}: apache-tvm {version} is not in TESTED_VERSIONS ({', '.join(tested)})"
        assert version not in found, f"{python} and {found.get(version)} are both apache-tvm {version}"
        found[version] = python
    return found


@ASKED
def test_every_tested_release_is_compared(releases, tmp_path):
    """The releases the engine claims are the ones compared here: no more, no fewer."""
    _, _, _, tested = _about(next(iter(releases.values())), tmp_path)
    assert sorted(releases) == sorted(tested), f"compared {sorted(releases)}, TESTED_VERSIONS {tested}"


def qdq_network(path: Path, seed=0) -> Path:
    """A small int8 ONNX QDQ network (NCHW): a 3x3 conv 4->8 with ReLU, a depthwise 3x3 conv with
    a clip, a 1x1 conv 8->8; per-channel weights, int32 biases, every layer quantized again."""
    rng = np.random.default_rng(seed)
    inits, nodes = [], []

    def tensor(name, array):
        inits.append(numpy_helper.from_array(array, name))
        return name

    def layer(x, scale, zero, i, cin, cout, group, kernel, activation):
        sw = rng.uniform(0.005, 0.02, cout).astype(np.float32)
        sy, zy = np.float32(rng.uniform(0.1, 0.3)), np.int8(rng.integers(-10, 11))
        w = tensor(f"w{i}", rng.integers(-127, 128, (cout, cin // group, kernel, kernel)).astype(np.int8))
        b = tensor(f"b{i}", rng.integers(-500, 500, cout).astype(np.int32))
        names = [tensor(f"{n}{i}", a) for n, a in (("sw", sw), ("zw", np.zeros(cout, np.int8)),
                                                    ("sb", (scale * sw).astype(np.float32)),
                                                    ("zb", np.zeros(cout, np.int32)), ("sy", sy), ("zy", zy))]
        nodes.extend([helper.make_node("DequantizeLinear", [x, f"sx{i}", f"zx{i}"], [f"xf{i}"]),
                      helper.make_node("DequantizeLinear", [w, names[0], names[1]], [f"wf{i}"], axis=0),
                      helper.make_node("DequantizeLinear", [b, names[2], names[3]], [f"bf{i}"], axis=0),
                      helper.make_node("Conv", [f"xf{i}", f"wf{i}", f"bf{i}"], [f"cf{i}"], group=group,
                                       kernel_shape=[kernel, kernel], pads=[kernel // 2] * 4)])
        tensor(f"sx{i}", np.float32(scale)), tensor(f"zx{i}", np.int8(zero))
        out = f"cf{i}"
        if activation == "relu":
            nodes.append(helper.make_node("Relu", [out], [f"r{i}"]))
            out = f"r{i}"
        elif activation == "clip":
            tensor(f"lo{i}", np.float32(0.0)), tensor(f"hi{i}", np.float32(6.0))
            nodes.append(helper.make_node("Clip", [out, f"lo{i}", f"hi{i}"], [f"r{i}"]))
            out = f"r{i}"
        nodes.append(helper.make_node("QuantizeLinear", [out, names[4], names[5]], [f"y{i}"]))
        return f"y{i}", sy, zy

    y, sy, zy = layer("x", np.float32(0.05), 3, 0, 4, 8, 1, 3, "relu")
    y, sy, zy = layer(y, sy, zy, 1, 8, 8, 8, 3, "clip")
    y, _, _ = layer(y, sy, zy, 2, 8, 8, 1, 1, None)
    nodes.append(helper.make_node("Identity", [y], ["y"]))
    graph = helper.make_graph(nodes, "qdq_network", [helper.make_tensor_value_info("x", TensorProto.INT8, [1, 4, 10, 10])],
                              [helper.make_tensor_value_info("y", TensorProto.INT8, [1, 8, 10, 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def compile_on(python: Path, model: Path, target: str, out: Path, *options):
    """``tvmc compile -f mlf`` with the Relax engine of ``python``'s environment."""
    tvmc = python.with_name("tvmc")
    return subprocess.run([str(tvmc), "compile", str(model), "--target", target, *options, "-f", "mlf", "-o", str(out)],
                          cwd=out.parent, capture_output=True, text=True, timeout=1200, env=_environment())


def _outer_parentheses_dropped(line: str) -> str:
    """``if (((a) && (b))) {`` (0.26's printer) as ``if ((a) && (b)) {`` (0.27's)."""
    match = re.fullmatch(r"(\s*)if \((\(.*\))\) \{", line)
    if not match:
        return line
    inner, depth = match.group(2), 0
    for i, char in enumerate(inner):
        depth += (char == "(") - (char == ")")
        if depth == 0 and i < len(inner) - 1:
            return line  # ``(a) && (b)``: not one parenthesized expression
    return f"{match.group(1)}if ({inner[1:-1]}) {{"


def printed_alike(text: str) -> str:
    """C as both releases' printers write it: 0.27 writes a null pointer ``(uint64_t)0ULL`` where 0.26
    writes ``(uint64_t)0``, and drops the parentheses 0.26 puts around an ``if``'s whole condition."""
    text = text.replace("(uint64_t)0ULL", "(uint64_t)0")
    return "\n".join(_outer_parentheses_dropped(line) for line in text.splitlines())


def members(archive: Path) -> dict:
    with tarfile.open(archive) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def assert_same_archive_but_printing(archives: dict):
    (first, reference), *rest = ((v, members(a)) for v, a in archives.items())
    for version, files in rest:
        assert sorted(files) == sorted(reference), f"{version} and {first}: other files"
        for name, content in files.items():
            if name.endswith((".c", ".h")):
                ours, theirs = printed_alike(content.decode()), printed_alike(reference[name].decode())
                if ours != theirs:
                    line = next(i for i, (a, b) in enumerate(zip(ours.splitlines(), theirs.splitlines())) if a != b)
                    pytest.fail(f"{name}, line {line + 1}: {version} writes {ours.splitlines()[line]!r}, "
                                f"{first} {theirs.splitlines()[line]!r}")
            else:
                assert content == reference[name], f"{name} differs between {version} and {first}"


def random_input(rng, shape, dtype, spread: float) -> np.ndarray:
    """Integers over their whole range, floats normal with deviation ``spread``."""
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        return rng.integers(np.iinfo(dtype).min, np.iinfo(dtype).max, shape, endpoint=True).astype(dtype)
    return (rng.standard_normal(shape) * spread).astype(dtype)


def assert_outputs_bit_equal(archives: dict, tmp_path: Path, spread=1.0):
    programs = {v: build(a, tmp_path / f"run-{v}") for v, a in archives.items()}
    rng = np.random.default_rng(47)
    first = next(iter(programs.values()))
    inputs = {t.name: random_input(rng, t.shape, t.dtype, spread) for t in first.inputs}
    (reference_version, reference), *rest = ((v, p.run(inputs)[0]) for v, p in programs.items())
    for version, outputs in rest:
        assert list(outputs) == list(reference), f"{version} and {reference_version}: other outputs"
        for name, value in outputs.items():
            expected = reference[name]
            assert value.dtype == expected.dtype and value.shape == expected.shape, name
            differ = np.count_nonzero(value.view(np.uint8) != expected.view(np.uint8))
            assert differ == 0, f"{name}: {differ} bytes differ between apache-tvm {version} and {reference_version}"


NETWORKS = [  # (id, target, model, options)
    ("cnn-vanilla", "vanilla_accelerator", "cnn", []),
    ("blazeface-vanilla", "vanilla_accelerator", "blazeface", []),
    ("cnn-strawberry", "strawberry", "cnn", []),
    ("qdq-qvanilla", "qvanilla", "qdq", []),
    ("qdq-chocolate", "chocolate", "qdq", []),
]
UNVOUCHED = "the Relax engine was tested with"  # tvm_internals.check_version's warning


def model_path(name: str, tmp_path: Path) -> Path:
    if name == "cnn":
        return MODELS / "cnn.onnx"
    if name == "qdq":
        return qdq_network(tmp_path / "qdq_network.onnx")
    return fetch(name)


@ASKED
@pytest.mark.real_model
@pytest.mark.parametrize("target, name, options", [n[1:] for n in NETWORKS], ids=[n[0] for n in NETWORKS])
def test_a_network_per_backend_equal_on_every_release(releases, tmp_path, target, name, options):
    """Each release compiles the network and offloads what the others do; outputs equal bit for bit,
    the archives equal but for the C printer's spellings."""
    model = model_path(name, tmp_path)
    archives, reports = {}, {}
    for version, python in releases.items():
        (tmp_path / version).mkdir()
        done = compile_on(python, model, target, tmp_path / version / "model.tar", *options)
        assert done.returncode == 0, f"apache-tvm {version}:\n{done.stderr[-3000:]}"
        assert UNVOUCHED not in done.stderr, done.stderr
        archives[version], reports[version] = tmp_path / version / "model.tar", done.stdout
    assert len(set(reports.values())) == 1, reports
    assert f"[{target}] offloaded: " in next(iter(reports.values())), reports
    assert_same_archive_but_printing(archives)
    assert_outputs_bit_equal(archives, tmp_path)


@ASKED
@pytest.mark.real_model
@pytest.mark.parametrize("target", ["qvanilla", "chocolate"])
def test_int8_zoo_network_where_tvms_tflite_frontend_imports_it(releases, tmp_path, target):
    """DS-CNN int8 (TFLite): apache-tvm 0.27 imports it, and so does every release but 0.26, whose
    frontend refuses it in one line (per-channel int8 depthwise convs, quantized average pools);
    the releases that import it give equal outputs."""
    model, archives = fetch("kws_dscnn_int8"), {}
    for version, python in releases.items():
        (tmp_path / version).mkdir()
        done = compile_on(python, model, target, tmp_path / version / "model.tar")
        if version.startswith("0.26.") and done.returncode != 0:
            assert done.stderr.startswith("error: TVM's Relax TFLite frontend cannot import"), done.stderr[-2000:]
            assert "Traceback" not in done.stderr, done.stderr[-2000:]
            continue
        assert done.returncode == 0, f"apache-tvm {version}:\n{done.stderr[-3000:]}"
        assert UNVOUCHED not in done.stderr, done.stderr
        archives[version] = tmp_path / version / "model.tar"
    assert any(not v.startswith("0.26.") for v in archives), archives
    if len(archives) > 1:
        assert_same_archive_but_printing(archives)
        assert_outputs_bit_equal(archives, tmp_path, spread=30.0)  # float input quantized: int8's range


def test_printed_alike_takes_only_the_printers_spellings():
    assert printed_alike("f(((void*)(uint64_t)0ULL));") == printed_alike("f(((void*)(uint64_t)0));")
    assert printed_alike("  if (((2 <= a) && (a < 18))) {") == "  if ((2 <= a) && (a < 18)) {"
    assert printed_alike("  if ((2 <= a) && (a < 18)) {") == "  if ((2 <= a) && (a < 18)) {"
    assert printed_alike("  if ((0x0.0p+0f < x)) {") == "  if (0x0.0p+0f < x) {"
    assert printed_alike("x = (uint64_t)1ULL;") != printed_alike("x = (uint64_t)1;")
    assert printed_alike("  if ((a < b)) {") != printed_alike("  if ((a <= b)) {")


# The spellings of a Relax constant that differ between the tested releases (0.27's tvm.ir.GenericConst
# and ``.value``; 0.26's relax.Constant and ``.data``): tvm_internals' Constant, constant_tensor and
# constant_array settle them; elsewhere either one breaks the engine on the other release.
RELEASE_SPECIFIC = re.compile(r"\bGenericConst\b|\brelax\.Constant\b|\.value\.numpy\(\)|\.data\.numpy\(\)|"
                              r"\btvm\.ir\.StringImm\b|\btirx\.StringImm\b")


def test_relax_constants_only_through_tvm_internals():
    engine = [p for p in (ROOT / "tvm_extension" / "relax").glob("*.py") if p.name != "tvm_internals.py"]
    engine += [*ROOT.glob("uma_*/uma_*/relax_patterns.py"), *(ROOT / "tvm_extension" / "scaffold").glob("*/*/relax_patterns.py.tmpl")]
    found = [f"{p.relative_to(ROOT)}:{i}: {line.strip()}" for p in sorted(engine)
             for i, line in enumerate(p.read_text().splitlines(), 1) if RELEASE_SPECIFIC.search(line)]
    assert not found, "use tvm_internals.Constant / constant_tensor / constant_array (apache-tvm 0.26 and 0.27 " \
                      "spell a Relax constant differently):\n" + "\n".join(found)
