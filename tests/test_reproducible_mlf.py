"""The same compile gives the same archive: two tvmc processes with different hash seeds write
byte-identical MLFs, for every example target and for plain ``--target c``; the time in them is
SOURCE_DATE_EPOCH when set."""
import io
import json
import tarfile

import pytest

from conftest import MODELS, VANILLA_EXT, assert_one_line_error, run_tvmc
from tvm_extension.testing.model_zoo import fetch
from tvm_extension.mlf import reproducible

PNET = ("mtcnn_pnet", "--input-shapes", "input_1:[1,24,24,3]")  # float
KWS = ("kws_dscnn_int8",)  # int8 (plain C cannot compile it: TVM's int32x64 vectors)
TARGETS = {"vanilla_accelerator": PNET, "strawberry": PNET, "qvanilla": KWS, "chocolate": KWS, "c": PNET}


def compile_mlf(target, out, seed, epoch=""):
    model, *options = TARGETS[target]
    extension = [] if target == "c" else ["--experimental-tvm-extension", VANILLA_EXT]
    done = run_tvmc("compile", "--target", target, *extension, *options, fetch(model), "-f", "mlf", "-o", out,
                    env={"PYTHONHASHSEED": str(seed), "SOURCE_DATE_EPOCH": epoch})
    assert done.returncode == 0, done.stderr[-2000:]
    return out


def members(archive):
    """[(header fields, content)] of each member, in archive order."""
    with tarfile.open(archive) as tar:
        return [((m.name, m.mode, m.uid, m.gid, m.uname, m.gname, m.mtime),
                 tar.extractfile(m).read() if m.isfile() else None) for m in tar.getmembers()]


@pytest.mark.real_model
@pytest.mark.parametrize("target", TARGETS)
def test_two_processes_write_the_same_archive(tmp_path, target):
    first = compile_mlf(target, tmp_path / "first.tar", seed=1)
    second = compile_mlf(target, tmp_path / "second.tar", seed=2)
    if first.read_bytes() != second.read_bytes():
        a, b = members(first), members(second)
        contents = [x[0][0] for x, y in zip(a, b) if x[1] != y[1]]
        headers = [x[0][0] for x, y in zip(a, b) if x[0] != y[0]]
        pytest.fail(f"the archives differ: contents of {contents[:5]}, headers of {headers[:5]} ({len(a)}, {len(b)} members)")
    entries = members(first)
    names = [header[0] for header, _ in entries]
    assert names == sorted(names) and len(names) == len(set(names))
    assert {header[1:] for header, _ in entries} <= {(mode, 0, 0, "root", "root", 0) for mode in (0o644, 0o755)}
    metadata = json.loads(dict((h[0], c) for h, c in entries)["./metadata.json"])
    assert metadata["modules"]["default"]["export_datetime"] == "1970-01-01 00:00:00Z"


@pytest.mark.real_model
def test_source_date_epoch_is_the_time_in_the_archive(tmp_path):
    archive = compile_mlf("qvanilla", tmp_path / "m.tar", seed=3, epoch="1700000000")
    entries = members(archive)
    assert {header[-1] for header, _ in entries} == {1700000000}
    metadata = json.loads(dict((h[0], c) for h, c in entries)["./metadata.json"])
    assert metadata["modules"]["default"]["export_datetime"] == "2023-11-14 22:13:20Z"


@pytest.mark.quick
@pytest.mark.parametrize("value", ["yesterday", "-1"])
def test_a_malformed_source_date_epoch_stops_tvmc(tmp_path, value):
    out = tmp_path / "m.tar"
    done = run_tvmc("compile", "--target", "vanilla_accelerator", "--experimental-tvm-extension", VANILLA_EXT,
                    MODELS / "conv2d.onnx", "-f", "mlf", "-o", out, env={"SOURCE_DATE_EPOCH": value})
    assert_one_line_error(done, "SOURCE_DATE_EPOCH", value)
    assert not out.exists()


@pytest.mark.quick
def test_attribute_maps_sorted_through_nesting_and_quotes():
    """The Relay text rewrite sorts keys at every level and leaves strings and arrays whole."""
    text = 'f(%x, Stage={"b"=[1, 2], "a"="x, \\"y\\"={", "c"={"z"={"q"=1, "p"=2}, "y"=(3, 4)}}) /* ty={x} */'
    assert reproducible.sorted_attribute_maps(text) == (
        'f(%x, Stage={"a"="x, \\"y\\"={", "b"=[1, 2], "c"={"y"=(3, 4), "z"={"p"=2, "q"=1}}}) /* ty={x} */'
    )
