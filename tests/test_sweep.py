"""Design-space sweeps (python -m tvm_extension.sweep): a tiny grid on Ray, Strawberry at two
scratchpad sizes on cnn.onnx and Chocolate at two tile shapes and two scratchpads (one too small
for a tile) on an int8 QDQ conv; every point checked against TVM's CPU build, its counters equal to a direct compile's;
a sweep interrupted halfway computes only the rest when run again, and the same plan again
computes nothing; bad plans end in one line before anything runs."""
import csv
import dataclasses
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time

import numpy as np
import pytest
pytest.importorskip("tvm.relay", reason="the Relay engine's tests (hhb-tvm, Python 3.10): not installed here")

from conftest import MODELS, ROOT
from tvm_extension import sweep
from tvm_extension.mlf import build
from tvm_extension.sweep import cache as sweep_cache
from tvm_extension.sweep import engine, plots
from tvm_extension.sweep import point as sweep_point
from tvm_extension.sweep.__main__ import main as sweep_main
from tvm_extension.sweep.grid import GridError, values
from tvm_extension.testing import assert_one_line_error, onnx_reference, qdq_model, run_tvmc

# the sweeps fixture and the Ray clusters: one worker starts them (pytest-xdist runs the module in one worker)
pytestmark = pytest.mark.xdist_group("sweep")

CNN = str(MODELS / "cnn.onnx")


def plan(qdq, sizes):
    return {"backends": {"strawberry": {"models": [CNN], "scratchpad_bytes": sizes},
                         "chocolate": {"models": [str(qdq)], "tile_m": [4, 8], "scratchpad_bytes": [8, 65536]}}}


def plan_toml(path, qdq):
    path.write_text(f'[backends.strawberry]\nmodels = ["{CNN}"]\nscratchpad_bytes = "16K..32K*2"\n'
                    f'[backends.chocolate]\nmodels = ["{qdq}"]\ntile_m = [4, 8]\nscratchpad_bytes = [8, 65536]\n')
    return path


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):
    """A sweep from the command line, interrupted (SIGINT, as Ctrl-C) once its first point is
    cached; then the same plan again, in this process."""
    work = tmp_path_factory.mktemp("sweep")
    qdq = qdq_model(work / "qconv.onnx", True, True, cin=8, cout=12)
    points = work / "cache" / "points"
    first = subprocess.Popen([sys.executable, "-m", "tvm_extension.sweep", plan_toml(work / "plan.toml", qdq),
                              "-o", work / "out1", "--cache", work / "cache"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True,
                             # as in a terminal: a shell's background job (CI run with &) inherits SIGINT ignored
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 600
    while first.poll() is None and time.time() < deadline and not (points.is_dir() and any(points.glob("*.json"))):
        time.sleep(0.1)
    first.send_signal(signal.SIGINT)
    _, stderr = first.communicate(timeout=120)
    finished = {p.stem for p in points.glob("*.json")}
    second = sweep.run_sweep(plan(qdq, ["16K", 32768]), work / "out2", work / "cache", workers=2)
    return work, qdq, (first.returncode, stderr, finished), second


@pytest.fixture
def ray_temp(monkeypatch):
    """Ray's default temporary folder (``RAY_TMPDIR``) of the test's own, for its clusters and
    what they start: where a cluster names itself (ray_current_cluster) for any ``ray.init()`` on
    the machine to join, seen by this test's processes only, not another copy of the suite's.
    Short, since Ray's sockets live in it."""
    folder = tempfile.mkdtemp(prefix="ray-test-")
    monkeypatch.setenv("RAY_TMPDIR", folder)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def by_point(records):
    return {(r["model"], r["attributes"]): r for r in records}


def test_every_point_recorded_and_checked(sweeps):
    points = by_point(sweeps[3])
    assert sorted(points) == [("cnn", "scratchpad_bytes=16384"), ("cnn", "scratchpad_bytes=32768"),
                              ("qconv", "scratchpad_bytes=65536 tile_m=4"), ("qconv", "scratchpad_bytes=65536 tile_m=8"),
                              ("qconv", "scratchpad_bytes=8 tile_m=4"), ("qconv", "scratchpad_bytes=8 tile_m=8")]
    for key, record in points.items():
        if key[1].startswith("scratchpad_bytes=8 "):
            continue
        assert record["matched"] and record["error"] is None, record
        assert record["offloaded_functions"] >= 1 and record["engine_calls"] >= record["offloaded_functions"]
        assert record["dma_bytes"] >= record["lower_bound_bytes"] > 0
        assert record["est_cycles"] == record["dma_cycles"] + record["compute_cycles"] > 0
        assert record["code_bytes"] > 0 and record["workspace_bytes"] > 0 and record["compile_seconds"] > 0
    small, large = points[("cnn", "scratchpad_bytes=16384")], points[("cnn", "scratchpad_bytes=32768")]
    assert small["dma_transfers"] > large["dma_transfers"] and small["c_spad_bytes"] == 16384
    assert large["max_error"] < 1e-4
    narrow, wide = points[("qconv", "scratchpad_bytes=65536 tile_m=4")], points[("qconv", "scratchpad_bytes=65536 tile_m=8")]
    assert narrow["max_error"] == wide["max_error"] == 0  # int8: bit-exact
    assert narrow["c_tile_m"] == 4 and wide["c_tile_m"] == 8 and narrow["engine_calls"] > wide["engine_calls"]
    assert narrow["macs"] == wide["macs"] and 0 < wide["utilisation"] <= 1 and narrow["macs_per_cycle"] == 32


def test_an_interrupted_sweep_computes_only_the_rest(sweeps):
    _, _, (code, stderr, finished), second = sweeps
    assert code == 130 and "Traceback" not in stderr, stderr
    assert stderr.splitlines()[-1] == "interrupted: the finished points are cached; the same command resumes"
    assert 1 <= len(finished) < 6
    assert {r["key"] for r in second if r["cached"]} == finished


def test_a_failing_point_is_recorded_and_the_others_complete(sweeps):
    """A scratchpad within its declared range, too small for one tile: tvmc's one line."""
    _, _, _, second = sweeps
    failed = [r for r in second if r["error"]]
    assert [r["attributes"] for r in failed] == ["scratchpad_bytes=8 tile_m=4", "scratchpad_bytes=8 tile_m=8"]
    for record in failed:
        assert not record["matched"] and record["error"].startswith("compile: Error: ") and "\n" not in record["error"]
        assert "scratchpad_bytes 8 must be" in record["error"]
    assert sum(r["matched"] for r in second) == 4


def test_counters_equal_a_direct_compile(sweeps, tmp_path, monkeypatch):
    """The recorded counters are those of the same point compiled, built and run by hand, on the
    inputs whose reference the sweep cached (itself equal to onnx.reference's outputs)."""
    work, _, _, second = sweeps
    point = by_point(second)[("cnn", "scratchpad_bytes=32768")]
    done = run_tvmc("compile", "--target", "strawberry", "--target-strawberry-scratchpad_bytes=32768", CNN,
                    "-f", "mlf", "-o", tmp_path / "m.tar")
    assert done.returncode == 0, done.stderr[-2000:]
    model = sweep.grid.resolve_model(CNN)
    inputs, expected = sweep_cache.Cache(work / "cache").get_reference(model)
    np.testing.assert_allclose(expected[0], onnx_reference(CNN, inputs)[0], rtol=1e-4, atol=1e-5)
    monkeypatch.setenv("STRAWBERRY_REPORT", str(tmp_path / "report.txt"))
    outputs, _ = build(tmp_path / "m.tar", tmp_path / "build").run(inputs)
    counters = dict(line.split(": ") for line in (tmp_path / "report.txt").read_text().splitlines())
    assert {f"c_{k.split('.', 1)[1]}": int(v) for k, v in counters.items()} == \
        {k: v for k, v in point.items() if k.startswith("c_")}
    got = list(outputs.values())[0]
    assert float(np.max(np.abs(got - expected[0]))) == pytest.approx(point["max_error"])


def test_the_relax_engine_sweeps_the_same_points_with_the_same_counters(sweeps, tmp_path):
    """``engine = "relax"``: every point compiled by the Relax engine's MLF, built, run and checked as
    the Relay engine's points are; the same points compile, match and count the same."""
    work, qdq, _, relay = sweeps
    records = sweep.run_sweep({**plan(qdq, ["16K", 32768]), "engine": "relax"}, tmp_path / "out",
                              tmp_path / "cache", workers=2, use_ray=False)
    relay = by_point(relay)
    assert len(records) == len(relay) == 6
    for record in records:
        same = relay[record["model"], record["attributes"]]
        assert record["engine"] == "relax" and same["engine"] == "relay"
        assert bool(record["error"]) == bool(same["error"]), (record["error"], same["error"])
        if same["error"]:
            continue
        assert record["matched"], record
        assert record["offloaded_functions"] == same["offloaded_functions"] > 0
        assert {k: v for k, v in record.items() if k.startswith("c_")} == \
            {k: v for k, v in same.items() if k.startswith("c_")}, record["attributes"]
        # the columns mean the same: the lower bound of DMA bytes, machine code apart from the weights
        assert record["lower_bound_bytes"] == same["lower_bound_bytes"] > 0, record["attributes"]
        assert same["code_bytes"] / 1.1 <= record["code_bytes"] <= same["code_bytes"] * 1.1, \
            (record["code_bytes"], same["code_bytes"])
    assert sum(bool(r["error"]) for r in records) == 2  # Chocolate's 8-byte scratchpad, on either engine


def test_a_missing_relax_engine_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TVM_EXTENSION_RELAX", str(tmp_path / "nowhere" / "tvmc"))
    assert sweep_main(["--model", CNN, "--backend", "strawberry", "--engine", "relax", "-o", str(tmp_path / "o")]) == 2
    assert "TVM_EXTENSION_RELAX" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def _files(mlf):
    with tarfile.open(mlf) as archive:
        return {m.name: hashlib.sha256(archive.extractfile(m).read()).hexdigest() for m in archive if m.isfile()}


def test_points_compiled_in_one_process_equal_separate_compiles(tmp_path, monkeypatch):
    """A worker compiles its points in its own process, one after another: each MLF holds exactly
    the files of a separate ``tvmc compile`` of the same point (nothing of an earlier point, its
    backend or attributes, leaks into a later one)."""
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "0")  # the MLF's export time
    runs = [("strawberry", "scratchpad_bytes=16384"), ("chocolate", "tile_m=4"), ("strawberry", "scratchpad_bytes=32768")]
    for i, (backend, attr) in enumerate(runs):
        args = ["compile", "--target", backend, f"--target-{backend}-{attr}", CNN, "-f", "mlf", "-o"]
        code, stdout, stderr = sweep_point._tvmc([*args, str(tmp_path / f"in{i}.tar")], tmp_path)
        assert code == 0, stderr
        done = run_tvmc(*args, tmp_path / f"direct{i}.tar")
        assert done.returncode == 0, done.stderr[-2000:]
        assert _files(tmp_path / f"in{i}.tar") == _files(tmp_path / f"direct{i}.tar")
        assert f"[{backend}] offloaded: " in stdout and stdout.splitlines()[-3:] == done.stdout.splitlines()[-3:]


def test_outputs_written(sweeps):
    work, _, _, second = sweeps
    out = work / "out2"
    with open(out / "results.csv") as file:
        rows = list(csv.DictReader(file))
    assert [(r["model"], r["attributes"], r["matched"]) for r in rows] == \
        [(r["model"], r["attributes"], str(r["matched"])) for r in second]
    from pyarrow import parquet

    table = parquet.read_table(out / "results.parquet").to_pylist()
    assert [t["dma_bytes"] for t in table] == [r.get("dma_bytes") for r in second]
    for name in ("dma_vs_scratchpad", "utilisation_vs_shape", "cycles_vs_cost"):
        assert (out / "figures" / f"{name}.png").read_bytes()[:4] == b"\x89PNG"
        assert "<svg" in (out / "figures" / f"{name}.svg").read_text()
    report = (out / "report.md").read_text()
    cached = sum(r["cached"] for r in second)
    assert f"6 points (2 models, 2 backends): {6 - cached} computed, {cached} from the cache, 2 failed" in report
    assert "![cycles_vs_cost](figures/cycles_vs_cost.png)" in report
    section = report.split("## Time per point")[1].split("\n## ")[0]
    times = {line.split(" | ")[0][2:]: line.split(" | ")[1:] for line in section.splitlines() if line.startswith("| ")}
    for model, backend, points in (("cnn", "strawberry", "2"), ("qconv", "chocolate", "4")):  # time per point
        assert times[model][:2] == [backend, points]
        median, longest = float(times[model][3]), float(times[model][4])
        assert 0 < median <= longest == round(max(r["seconds"] for r in second if r["model"] == model), 1)
    assert "- qconv on chocolate (scratchpad_bytes=8 tile_m=4): compile: Error: " in report
    macs = {r["model_macs"] for r in second if r["backend"] == "chocolate" and r.get("model_macs")}
    assert macs == {10 * 10 * 12 * 9 * 8}  # a 10x10 output, 12 channels, 3x3x8 windows: all on the core
    never = report.split("## MACs the core never sees")[1].split("\n## ")[0]
    assert "| qconv | chocolate | 86,400 | 86,400 (100.0 %) | depthwise convs 0 (0.0 %), others 0 (0.0 %) |" in never
    assert "| cnn |" not in never  # Strawberry does not report it
    for model, backend in (("cnn", "strawberry"), ("qconv", "chocolate")):  # each model's offload drawing
        assert (out / "figures" / f"graph_{model}_{backend}.png").read_bytes()[:4] == b"\x89PNG"
        assert f"![{model} on {backend}](figures/graph_{model}_{backend}.png)" in report


def test_the_same_plan_again_computes_nothing(sweeps, tmp_path):
    """Through the command line, with a TOML plan: every point from the cache, no engine started."""
    work, _, _, second = sweeps
    done = subprocess.run([sys.executable, "-m", "tvm_extension.sweep", work / "plan.toml", "-o", tmp_path / "out",
                           "--cache", work / "cache", "--address", "unused:1"], capture_output=True, text=True)
    assert done.returncode == 1, done.stderr  # two points failed
    assert "sweep: 6/6 points, 2 failed, 6 cached" in done.stderr and "Traceback" not in done.stderr
    assert "drawing" not in done.stderr  # the graphs too come from the cache
    assert (tmp_path / "out" / "figures" / "graph_cnn_strawberry.svg").is_file()
    assert done.stdout.strip() == f"6 points, 2 failed: {tmp_path / 'out' / 'report.md'}"
    with open(tmp_path / "out" / "results.csv") as file:
        rows = list(csv.DictReader(file))
    assert [r["cached"] for r in rows] == ["True"] * 6
    assert [r["dma_bytes"] for r in rows] == [str(r.get("dma_bytes") or "") for r in second]


USER_ERRORS = [
    (["--model", CNN, "--backend", "nope"], "unknown backend 'nope' (installed: chocolate, "),
    (["--model", "resnet9000", "--backend", "strawberry"], "unknown model 'resnet9000': neither a file nor a zoo "
                                                            "name (known: blazeface, "),
    (["--model", CNN, "--attr", "strawberry.spad=4K"], "backend 'strawberry' has no attribute 'spad' "),
    (["--model", CNN, "--attr", "strawberry.scratchpad_bytes="], "strawberry.scratchpad_bytes: empty list"),
    (["--model", CNN, "--attr", "strawberry.scratchpad_bytes=64K..16K"], "range '64K..16K' is empty"),
    (["--model", CNN, "--attr", "strawberry.scratchpad_bytes=big"], "'big' is not a int like its default"),
    (["--model", CNN, "--attr", "chocolate.tile_m=4,0"], "target 'chocolate': attribute 'tile_m' must be in 2.."),
    (["--model", CNN, "--backend", "strawberry", "--board", "mps2-an999"], "board: unknown board 'mps2-an999'"),
    (["--model", CNN, "--backend", "strawberry", "--device", "fpga"], "device: no device 'fpga' (known: rtl)"),
    (["--model", CNN, "--backend", "strawberry", "--address", "127.0.0.1:1"], "cannot reach Ray at 127.0.0.1:1: "),
    (["plan.toml"], "plan.toml is not valid TOML: "),
]


@pytest.mark.quick
@pytest.mark.parametrize("command, args, message", [(["tvm_extension.sweep"], *USER_ERRORS[0]),
                                                    (["tvm_extension", "sweep"], *USER_ERRORS[-1])])
def test_user_errors_in_one_line_before_anything_runs(tmp_path, command, args, message):
    (tmp_path / "plan.toml").write_text("[backends.strawberry\n")
    done = subprocess.run([sys.executable, "-m", *command, *args, "-o", tmp_path / "out",
                           "--cache", tmp_path / "cache"], capture_output=True, text=True, cwd=tmp_path)
    assert message in assert_one_line_error(done)
    assert not (tmp_path / "out").exists() and not (tmp_path / "cache").exists()


@pytest.mark.parametrize("args, message", USER_ERRORS[1:-1])
def test_bad_grids_rejected_before_anything_runs(tmp_path, capsys, args, message):
    """The same checks in this process (no interpreter start-up each)."""
    assert sweep_main(args + ["-o", str(tmp_path / "out"), "--cache", str(tmp_path / "cache")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "out").exists() and not (tmp_path / "cache").exists()


def test_device_points_record_the_rtls_cycles_and_the_cores_area(tmp_path):
    """device = "rtl": each point also run on Chocolate's core as Verilog (every core call compared
    with the C model), its outputs equal to the host run's; the record has the RTL's cycles (each
    MATMUL's as the design takes them), the core's synthesized area growing with the tile, and the
    cycles-against-cost figure its panel."""
    qdq = qdq_model(tmp_path / "qconv.onnx", True, True, cin=8, cout=12)
    records = sweep.run_sweep({"device": "rtl", "backends": {"chocolate": {"models": [str(qdq)], "tile_m": [2, 4],
                                                                          "tile_n": [2], "tile_k": [4]}}},
                              tmp_path / "out", tmp_path / "cache", use_ray=False, workers=2)
    assert [r["error"] for r in records] == [None, None] and all(r["matched"] for r in records), records
    for record in records:
        m, n, k = record["tile_m"], record["tile_n"], record["tile_k"]
        calls = record["c_core_calls"]
        assert calls > 0 and record["dev_rtl_matmul_calls"] == calls
        assert record["dev_rtl_matmul_cycles"] == calls * (m * k + k * n + 2 + k + 2 * m * n)
        assert record["device_cycles"] > record["compute_cycles"]  # the model estimates k cycles a call
    small, large = records
    assert 0 < small["area_cells"] < large["area_cells"] and small["area_flip_flops"] < large["area_flip_flops"]
    assert (tmp_path / "out" / "figures" / "cycles_vs_cost.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.quick
def test_ranges_and_pareto_front():
    assert values("16K..512K*2", "a") == [16384 << i for i in range(6)]
    assert values("4..32+4", "a") == [4, 8, 12, 16, 20, 24, 28, 32]
    assert values([3, 5], "a") == [3, 5]
    with pytest.raises(GridError, match="empty list"):
        values([], "a")
    assert plots.pareto([(1, 9), (2, 9), (2, 5), (4, 6), (8, 1)]) == [(1, 9), (2, 5), (8, 1)]


def fails_on_three(value):
    if value == 3:
        raise ValueError("three")
    return value * 10


@pytest.mark.quick
def test_the_process_pool_stands_in_for_ray():
    """Without Ray, the same interface: results as they come, a task's exception returned."""
    pool = engine.LocalEngine(workers=2)
    try:
        got = dict(pool.imap(fails_on_three, [(1,), (3,), (5,)]))
    finally:
        pool.close()
    assert got[0] == 10 and got[2] == 50 and isinstance(got[1], ValueError)


def test_a_two_node_ray_cluster_shares_the_points(sweeps, tmp_path, ray_temp):
    """--address: a real two-node cluster on this machine (Ray's own Cluster), one CPU each: the
    two points run on both nodes and give the records of the local sweep."""
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    try:
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        records = sweep.run_sweep({"models": [CNN], "backends": {"strawberry": {"scratchpad_bytes": [16384, 32768]}}},
                                  tmp_path / "out", tmp_path / "cache", address=cluster.address)
    finally:
        cluster.shutdown()
    assert len({r["node"] for r in records}) == 2, [r["node"] for r in records]
    local = by_point(sweeps[3])
    same = ["matched", "dma_bytes", "lower_bound_bytes", "dma_transfers", "engine_calls", "est_cycles", "max_error"]
    for record in records:
        assert not record["cached"]
        assert {k: record[k] for k in same} == {k: local[(record["model"], record["attributes"])][k] for k in same}
    assert "on 2 node(s)" in (tmp_path / "out" / "report.md").read_text()


def test_board_points_record_what_a_direct_board_run_measures(tmp_path):
    """--board: each point also cross-built for the board and run in QEMU; its ROM, RAM and
    instructions equal those of the same MLF built and run on the board by hand (QEMU counts
    instructions exactly), its outputs equal the host run's."""
    from tvm_extension.mlf import board as boards

    records = sweep.run_sweep({"board": "mps2-an386", "backends": {"strawberry": {"models": [CNN],
                                                                                  "scratchpad_bytes": [32768]}}},
                              tmp_path / "out", tmp_path / "cache", use_ray=False, workers=1)
    (record,) = records
    assert record["error"] is None and record["board"] == "mps2-an386" and record["board_matches_host"], record
    done = run_tvmc("compile", "--target", "strawberry", "--target-strawberry-scratchpad_bytes=32768", CNN,
                    "-f", "mlf", "-o", tmp_path / "m.tar")
    assert done.returncode == 0, done.stderr[-2000:]
    inputs, _ = sweep_cache.Cache(tmp_path / "cache").get_reference(sweep.grid.resolve_model(CNN))
    program = boards.build(tmp_path / "m.tar", tmp_path / "board", "mps2-an386")
    program.run(inputs)
    assert (record["board_rom"], record["board_ram"], record["board_instructions"]) == \
        (program.memory.rom(), program.memory.ram(), program.instructions)
    assert "## On the board" in (tmp_path / "out" / "report.md").read_text()


@pytest.mark.quick
def test_a_graph_drawing_says_where_each_operator_runs():
    """The drawing's nodes are the offload report's: cnn.onnx on Vanilla with a 3x3 window buffer
    offloads two conv functions, refuses the dilated conv and the 5x5 one with their reasons."""
    from tvm_extension.sweep import graphs, grid

    nodes = graphs.model_nodes(grid.resolve_model(CNN), grid.known_backends()["vanilla_accelerator"],
                               (("max_kernel_size", 3),))
    assert [(n.label, n.where) for n in nodes] == [
        ("conv2d+relu", "offloaded"), ("conv2d+bias_add+relu", "offloaded"), ("conv2d", "refused"),
        ("max_pool2d", "cpu"), ("conv2d", "refused"), ("relu", "cpu"), ("batch_flatten", "cpu"), ("dense", "cpu"),
        ("add", "cpu")]
    assert [n.why for n in nodes if n.why] == ["dilation", "kernel 5x5 larger than the window buffer (max_kernel_size 3)"]
    assert [n.inputs for n in nodes] == [[]] + [[i] for i in range(8)]


@pytest.mark.quick
def test_an_edited_backend_is_computed_again(tmp_path, monkeypatch):
    """The cache key holds a digest of the backend package's sources: editing its C library (or
    its passes) makes its points new; the same sources find the same points."""
    from tvm_extension.sweep.grid import Model, Point, known_backends, source_digest

    package = tmp_path / "edited_backend"
    (package / "c").mkdir(parents=True)
    (package / "__init__.py").write_text("class Backend:\n    pass\n")
    kernel = package / "c" / "kernel.c"
    kernel.write_text("int kernel(void) { return 1; }\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import edited_backend  # pylint: disable=import-error,import-outside-toplevel

    before = source_digest(edited_backend.Backend())
    assert before == source_digest(edited_backend.Backend())
    kernel.write_text("int kernel(void) { return 2; }\n")
    after = source_digest(edited_backend.Backend())
    assert before and after and before != after
    cache = sweep_cache.Cache(tmp_path / "cache", version="v")
    point = Point(Model("cnn", MODELS / "cnn.onnx", "0" * 64, None), "edited", (("size", 1),), None, before)
    cache.put(point, {"dma_bytes": 1})
    assert cache.get(point) == {"dma_bytes": 1}
    assert cache.get(dataclasses.replace(point, backend_code=after)) is None
    assert all(source_digest(b) for b in known_backends().values()), "every installed backend has sources"


# A sweep and the engine under it: its own local Ray, never another's cluster; a dead worker's
# point run again; the framework's code in the cache key.

def _sweep_command(out, cache, *extra):
    return [sys.executable, "-m", "tvm_extension.sweep", "--model", CNN, "--attr",
            "strawberry.scratchpad_bytes=16K,32K", "-o", str(out), "--cache", str(cache), *extra]


def _rows(out):
    with open(out / "results.csv") as file:
        return list(csv.DictReader(file))


def test_sweeps_run_on_their_own_ray_beside_another_cluster(tmp_path, ray_temp):
    """Two sweeps started at once while a Ray cluster of someone else's runs on this machine (a
    ``ray.cluster_utils.Cluster``, which names itself in /tmp/ray/ray_current_cluster for any
    ``ray.init()`` to join): each starts a Ray of its own and finishes every point, matched, on its
    own node, although the other cluster shuts down while they run."""
    import psutil
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    theirs = {cluster.head_node.node_id[:12]}
    sweeps = [subprocess.Popen(_sweep_command(tmp_path / f"out{i}", tmp_path / f"cache{i}", "--workers", "1"),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(2)]
    try:
        # once both sweeps run a point on their Ray, the other cluster goes away
        deadline = time.time() + 600
        while time.time() < deadline and not all(any(p.cmdline()[:1] == ["ray::_located"] for p in
                                                      psutil.Process(s.pid).children(recursive=True)
                                                      if _alive(p)) for s in sweeps):
            assert all(s.poll() is None for s in sweeps), [s.communicate() for s in sweeps]
            time.sleep(0.2)
    finally:
        cluster.shutdown()
    for i, done in enumerate(sweeps):
        stdout, stderr = done.communicate(timeout=900)
        assert done.returncode == 0, stderr[-3000:]
        rows = _rows(tmp_path / f"out{i}")
        assert [r["matched"] for r in rows] == ["True", "True"] and not {r["node"] for r in rows} & theirs, rows
        assert len({r["node"] for r in rows}) == 1


def _alive(process) -> bool:
    try:
        return bool(process.cmdline())
    except Exception:  # pylint: disable=broad-except  # gone between listing and reading
        return False


def test_a_point_whose_worker_is_killed_runs_again(tmp_path):
    """The Ray worker computing a point is killed mid-point (SIGKILL, as the kernel's OOM killer
    does): Ray runs the point again, the sweep finishes with every point matched, and the point's
    record says it was retried."""
    import psutil

    sweep_process = subprocess.Popen(_sweep_command(tmp_path / "out", tmp_path / "cache", "--workers", "1",
                                                    "--keep-work"),
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    work = tmp_path / "cache" / "work"
    deadline, killed = time.time() + 600, None
    while killed is None and time.time() < deadline and sweep_process.poll() is None:
        if work.is_dir() and any(work.iterdir()):  # a point has started in its folder
            for process in psutil.Process(sweep_process.pid).children(recursive=True):
                if _alive(process) and process.cmdline()[:1] == ["ray::_located"]:
                    process.kill()
                    killed = process.pid
        time.sleep(0.1)
    stdout, stderr = sweep_process.communicate(timeout=900)
    assert killed, stderr[-3000:]
    assert sweep_process.returncode == 0, stderr[-3000:]
    rows = _rows(tmp_path / "out")
    assert [r["matched"] for r in rows] == ["True", "True"], rows
    assert sorted(r["retried"] for r in rows) == ["", "by Ray, attempt 2"], rows
    assert "retried" in (tmp_path / "out" / "report.md").read_text()


def dies_on_first_try(marker):
    """A point whose process dies the first time (its marker file not yet written)."""
    if not os.path.exists(marker):
        open(marker, "w").close()
        os._exit(9)
    return {"value": 1}


@pytest.mark.quick
def test_the_process_pool_runs_again_what_a_dead_worker_had(tmp_path):
    pool = engine.LocalEngine(workers=1)
    try:
        got = dict(pool.imap(dies_on_first_try, [(str(tmp_path / "a"),), (str(tmp_path / "b"),)]))
    finally:
        pool.close()
    assert [got[0]["value"], got[1]["value"]] == [1, 1]
    assert got[0]["retried"].startswith("locally, attempt ") and got[1]["retried"].startswith("locally, attempt ")


def test_an_edited_framework_computes_its_points_again(tmp_path):
    """The cache key covers the framework's own code: the same plan in an environment whose MLF
    writer is a copy is computed, the same copy again comes from the cache, and once the copy's
    MLF writer is edited the point is computed again."""
    copy = tmp_path / "framework"
    shutil.copytree(ROOT / "tvm_extension", copy / "tvm_extension", ignore=shutil.ignore_patterns("__pycache__"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(copy), os.environ.get("PYTHONPATH")) if p)}
    command = [sys.executable, "-m", "tvm_extension.sweep", "--model", CNN, "--attr",
               "strawberry.scratchpad_bytes=32K", "--cache", str(tmp_path / "cache"), "--no-ray"]

    def sweep_once(name):
        done = subprocess.run([*command, "-o", str(tmp_path / name)], env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-3000:]
        (row,) = _rows(tmp_path / name)
        assert row["matched"] == "True", row
        return row

    first, again = sweep_once("first"), sweep_once("again")
    assert (first["cached"], again["cached"]) == ("False", "True") and first["key"] == again["key"]
    writer = copy / "tvm_extension" / "mlf" / "export.py"
    writer.write_text(writer.read_text() + "\n# edited: the MLF writer of another version\n")
    edited = sweep_once("edited")
    assert edited["cached"] == "False" and edited["key"] != first["key"]
