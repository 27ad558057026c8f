"""Strawberry through TVM's own tvmc: MLF -> gcc -> run at several scratchpad sizes, compared with
onnx.reference and TVM's CPU build; the hardware model's counters against the compiler's plan;
a deleted DMA transfer caught by the model; columns and input channels split at a small
scratchpad; a layer too large for any split left on the CPU."""
import io
import os
import re
import subprocess
import tarfile

import numpy as np
import pytest

pytest.importorskip("tvm.relay", reason="the Relay engine's end-to-end tests (hhb-tvm: TVM 0.16's tvmc, its report and MLF layout); on apache-tvm test_strawberry_either_engine.py runs this example end to end")

from tvm_extension.mlf import build
from tvm_extension.testing import (assert_one_line_error, edited_mlf, example_model, mlf_sources, onnx_reference,
                                   random_inputs, run_program, run_tvmc, tvm_cpu_reference)

TOLERANCE = dict(rtol=1e-4, atol=1e-5)
# What the TIR pass logs per offloaded function (tvmc -v).
PLAN = re.compile(r"(tvmgen_\w+): (.*); DMA (\d+) bytes in (\d+) transfers "
                  r"\(lower bound (\d+) bytes, scratchpad (\d+) bytes in use\)")
ENTRIES = r"strawberry_(?:depthwise_)?conv2d_n(?:chw|hwc)"  # the engine entries (their names in messages)
KERNELS = ENTRIES + "_call"  # what the generated C calls: their packing functions


class Compiled:
    def __init__(self, path, done):
        self.path, self.stdout, self.stderr = path, done.stdout, done.stderr
        self.plans = {m[0]: dict(split=m[1], bytes=int(m[2]), transfers=int(m[3]), lower_bound=int(m[4]),
                                 occupancy=int(m[5]))
                      for m in PLAN.findall(done.stdout + done.stderr)}

    def planned(self, key):
        return sum(plan[key] for plan in self.plans.values())

    def peak_occupancy(self):
        return max(plan["occupancy"] for plan in self.plans.values())

    def offloaded_functions(self):
        match = re.search(r"\[strawberry\] offloaded: .* in (\d+) functions", self.stdout)
        assert match, self.stdout
        return int(match.group(1))


def compile_strawberry(model, out, spad, *extra):
    done = run_tvmc("compile", "--target", "strawberry", f"--target-strawberry-scratchpad_bytes={spad}", model,
                    "-f", "mlf", "-o", out, "-v", *extra)
    assert done.returncode == 0, done.stderr[-3000:]
    return Compiled(out, done)


def read_report(path):
    values = dict(line.split(": ") for line in path.read_text().splitlines())
    return {key.split(".", 1)[1]: int(value) for key, value in values.items()}


def run_with_counters(mlf, work, inputs, monkeypatch):
    """Build and run the MLF; the hardware model writes its counters at exit (STRAWBERRY_REPORT)."""
    report = work / "counters.txt"
    monkeypatch.setenv("STRAWBERRY_REPORT", str(report))
    outputs, _ = build(mlf, work / "build").run(inputs)
    monkeypatch.delenv("STRAWBERRY_REPORT")
    return list(outputs.values()), read_report(report)


def offloaded_sources(mlf):
    return {n: t for n, t in mlf_sources(mlf).items() if "// offloaded to strawberry" in t}


SIZES = [262144, 16384, 8192]  # every conv of cnn.onnx fits each; the smaller, the more tiles


@pytest.fixture(scope="module")
def cnn_builds(tmp_path_factory):
    work = tmp_path_factory.mktemp("cnn")
    return {spad: compile_strawberry(example_model("cnn"), work / f"cnn{spad}.tar", spad) for spad in SIZES}


def test_cnn_at_three_scratchpad_sizes(cnn_builds, tmp_path, monkeypatch):
    """Same outputs (the references') at every size; a smaller scratchpad makes more transfers and
    moves at least as many bytes; the model counts exactly what the compiler planned."""
    inputs = random_inputs(example_model("cnn"), seed=3)
    expected = onnx_reference(example_model("cnn"), inputs)[0]
    cpu = tvm_cpu_reference(example_model("cnn"), inputs)[0]
    results = {}
    for spad, compiled in cnn_builds.items():
        assert compiled.offloaded_functions() == 3 and len(compiled.plans) == 3, compiled.stdout
        assert "not offloaded: nn.conv2d: dilation x1" in compiled.stdout  # Vanilla's engine has no dilation
        (got,), counters = run_with_counters(compiled.path, tmp_path / str(spad), inputs, monkeypatch)
        np.testing.assert_allclose(got, expected, **TOLERANCE)
        np.testing.assert_allclose(got, cpu, **TOLERANCE)
        assert counters["spad_bytes"] == spad and counters["layers"] == 3 and counters["compute_calls"] >= 3
        assert counters["dma_in_bytes"] + counters["dma_out_bytes"] == compiled.planned("bytes")
        assert counters["dma_in_calls"] + counters["dma_out_calls"] == compiled.planned("transfers")
        assert counters["spad_high_water"] <= spad
        assert counters["spad_peak_bytes"] == compiled.peak_occupancy() <= spad
        results[spad] = got, counters, compiled
    transfers = [results[s][1]["dma_in_calls"] + results[s][1]["dma_out_calls"] for s in SIZES]
    moved = [results[s][1]["dma_in_bytes"] + results[s][1]["dma_out_bytes"] for s in SIZES]
    assert transfers[0] < transfers[1] < transfers[2], transfers
    assert moved[0] <= moved[1] <= moved[2], moved
    # The largest scratchpad holds every layer whole: each byte moves once.
    assert moved[0] == cnn_builds[SIZES[0]].planned("lower_bound")
    for spad in SIZES[1:]:
        np.testing.assert_allclose(results[spad][0], results[SIZES[0]][0], rtol=1e-6, atol=1e-6)


def test_offloaded_code_moves_data_only_by_dma(cnn_builds):
    """In an offloaded function the CPU touches no tensor element: only strawberry_* calls (with
    integer scratchpad addresses for the engine), every status checked; tiles are loops of them."""
    for spad, compiled in cnn_builds.items():
        sources = offloaded_sources(compiled.path)
        assert len(sources) == 3
        for name, text in sources.items():
            body = text[text.index("// tvm target"):]
            assert "[" not in re.sub(r"//.*", "", body), f"{name} indexes an array"
            calls = re.findall(r"= (\w+)\(", body)
            assert calls and all(c.startswith("strawberry_") for c in calls), calls
            assert len(re.findall(r"if \(status\w* != 0\) \{\s*return status", body)) == len(calls)
            assert calls[0] == "strawberry_begin_call" and "strawberry_dma_in_call" in calls and "strawberry_dma_out_call" in calls
            assert re.search(KERNELS, body)
        looped = any("for (" in t for t in sources.values())
        assert looped == (spad != SIZES[0]), f"{spad}: tiles run as loops exactly when a layer is split"


@pytest.mark.parametrize("which,what", [(0, "weights"), (1, "bias"), (-1, "ifmap")])
def test_a_deleted_transfer_fails_loudly(cnn_builds, tmp_path, which, what):
    """Delete one DMA call from the generated C (the weights, bias or input tile of the conv with a
    bias) and rebuild: the hardware model refuses to read what nothing wrote, the inference fails."""
    compiled = cnn_builds[SIZES[0]]
    deleted = []

    def delete_one(name, text):
        if "// offloaded to strawberry" not in text or "strawberry_dma_in_call(" not in text or deleted:
            return text
        if not re.search(r"= strawberry_conv2d_nchw_call\((?:[^,]+, ){2}(?!-1)", text):  # the conv with a bias
            return text
        transfers = list(re.finditer(r"(?<== )strawberry_dma_in_call\([^;]*\)", text))  # calls, not declarations
        victim = transfers[which]
        deleted.append(victim.group(0))
        return text[:victim.start()] + "0" + text[victim.end():]

    broken = edited_mlf(compiled.path, tmp_path / "broken.tar", delete_one)
    assert len(deleted) == 1
    program = build(broken, tmp_path / "build")
    done = run_program(program, random_inputs(example_model("cnn"), seed=3), tmp_path)
    assert done.returncode != 0
    assert re.search(rf"strawberry: {ENTRIES}: reads {what} bytes \[\d+, \d+\) of the scratchpad that nothing has "
                     r"written since the layer began \(a missing transfer\?\) \(STRAWBERRY_EUNWRITTEN\)", done.stderr), \
        done.stderr
    # The generated status check returned STRAWBERRY_EUNWRITTEN; TVM's AOT main reports any failure as -1.
    assert "error: inference failed with status -1" in done.stderr


def test_columns_and_input_channels_split_at_4_kib(tmp_path, monkeypatch):
    """At 4 KiB every conv of cnn.onnx runs on Strawberry (before columns and input channels were
    split, two stayed on the CPU): the output tiles cut columns, the input channels come in chunks
    whose sums the engine keeps in the scratchpad (accumulate flags 2, 3, 1); right outputs, and the
    model counts exactly the planned transfers."""
    compiled = compile_strawberry(example_model("cnn"), tmp_path / "small.tar", 4096)
    assert compiled.offloaded_functions() == 3 and len(compiled.plans) == 3, compiled.stdout
    assert "too large" not in compiled.stdout
    splits = " ".join(plan["split"] for plan in compiled.plans.values())
    assert re.search(r"[2-9] x \d+ columns", splits) and re.search(r"\d\d+ x 1 input channels", splits), splits
    calls = "".join(offloaded_sources(compiled.path).values())
    # the last argument of the engine's calls: accumulate flags computed from the chunk's index
    assert re.search(r"= strawberry_conv2d_nchw_call\([^;]*\(int32_t\)\(0 < in_tile\)", calls), calls
    inputs = random_inputs(example_model("cnn"), seed=5)
    (got,), counters = run_with_counters(compiled.path, tmp_path, inputs, monkeypatch)
    np.testing.assert_allclose(got, onnx_reference(example_model("cnn"), inputs)[0], **TOLERANCE)
    np.testing.assert_allclose(got, tvm_cpu_reference(example_model("cnn"), inputs)[0], **TOLERANCE)
    assert counters["dma_in_bytes"] + counters["dma_out_bytes"] == compiled.planned("bytes")
    assert counters["dma_in_calls"] + counters["dma_out_calls"] == compiled.planned("transfers")
    assert counters["spad_peak_bytes"] == compiled.peak_occupancy() <= 4096


def test_layer_too_large_for_any_split_stays_on_the_cpu(tmp_path):
    """At 64 bytes not even one window of one input channel fits: those convs run on the CPU, the
    offload report says why, and the outputs are still right."""
    compiled = compile_strawberry(example_model("cnn"), tmp_path / "tiny.tar", 64)
    assert compiled.offloaded_functions() == 0
    assert ("nn.conv2d: too large for the scratchpad at any split (one output reads 36 bytes of input "
            "(1 channel x 3 rows x 3 columns), the ifmap partition holds 24; scratchpad_bytes 64) x2") in compiled.stdout
    assert "(1 channel x 5 rows x 5 columns)" in compiled.stdout
    inputs = random_inputs(example_model("cnn"), seed=5)
    (got,) = build(compiled.path, tmp_path / "b").run(inputs)[0].values()
    np.testing.assert_allclose(got, onnx_reference(example_model("cnn"), inputs)[0], **TOLERANCE)


def test_partitions_and_rates_from_the_command_line(tmp_path, monkeypatch):
    """Partition split and rates are target attributes; the model is configured with them."""
    compiled = compile_strawberry(
        example_model("conv2d"), tmp_path / "o.tar", 32768, "--target-strawberry-ifmap_percent=20",
        "--target-strawberry-weights_percent=50", "--target-strawberry-dma_bytes_per_cycle=16",
        "--target-strawberry-dma_setup_cycles=5", "--target-strawberry-macs_per_cycle=128")
    inputs = random_inputs(example_model("conv2d"), seed=1)
    (got,), counters = run_with_counters(compiled.path, tmp_path, inputs, monkeypatch)
    np.testing.assert_allclose(got, onnx_reference(example_model("conv2d"), inputs)[0], **TOLERANCE)
    assert (counters["dma_bytes_per_cycle"], counters["dma_setup_cycles"], counters["macs_per_cycle"]) == (16, 5, 128)
    assert counters["compute_cycles"] == -(-counters["macs"] // 128)
    assert "strawberry_begin_call(32768, 16, 5, 128)" in "".join(offloaded_sources(compiled.path).values())


@pytest.mark.parametrize("args,fragment", [
    (["--target-strawberry-ifmap_percent=80", "--target-strawberry-weights_percent=20"],
     "ifmap_percent 80 and weights_percent 20"),
    (["--target-strawberry-scratchpad_bytes=1002"], "scratchpad_bytes 1002 must be a multiple of 4"),
    (["--target-strawberry-dma_bytes_per_cycle=0"], "attribute 'dma_bytes_per_cycle' must be in 1..2147483647, got 0"),
])
def test_bad_attribute_values(tmp_path, args, fragment):
    done = run_tvmc("compile", "--target", "strawberry", *args, example_model("cnn"), "-f", "mlf",
                    "-o", tmp_path / "o.tar")
    assert_one_line_error(done, "strawberry", fragment)
    assert not (tmp_path / "o.tar").exists()


def test_help_lists_the_attributes():
    done = run_tvmc("compile", "--help")
    assert done.returncode == 0, done.stderr
    for attr in ("scratchpad_bytes", "ifmap_percent", "weights_percent", "dma_bytes_per_cycle", "dma_setup_cycles",
                 "macs_per_cycle"):
        assert f"--target-strawberry-{attr}" in done.stdout, attr


def output_stage_model(path):
    """NCHW layers covering what a call carries: a dense conv with bias and ReLU; a depthwise conv of
    stride 2 with asymmetric padding and a per-channel PReLU; a 1x1 conv with bias, a residual add
    and a ReLU6 clip.  13 rows: row tiles with a remainder at small scratchpads."""
    import onnx
    from onnx import helper, numpy_helper
    from tvm_extension.testing.models import float_model

    rng = np.random.default_rng(7)
    const = lambda name, shape: numpy_helper.from_array((rng.standard_normal(shape) * 0.4).astype(np.float32), name)
    nodes = [
        helper.make_node("Conv", ["input", "w1", "b1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], kernel_shape=[3, 3], pads=[0, 1, 1, 0], strides=[2, 2],
                         group=8),
        helper.make_node("PRelu", ["c2", "slope"], ["p2"]),
        helper.make_node("Conv", ["p2", "w3", "b3"], ["c3"], kernel_shape=[1, 1]),
        helper.make_node("Add", ["c3", "p2"], ["a3"]),
        helper.make_node("Clip", ["a3", "zero", "six"], ["output"]),
    ]
    inits = [const("w1", (8, 6, 3, 3)), const("b1", (8,)), const("w2", (8, 1, 3, 3)), const("b2", (8,)),
             const("slope", (8, 1, 1)), const("w3", (8, 8, 1, 1)), const("b3", (8,)),
             numpy_helper.from_array(np.array(0, np.float32), "zero"),
             numpy_helper.from_array(np.array(6, np.float32), "six")]
    onnx.save(float_model(nodes, inits, [1, 6, 13, 11], [1, 8, 6, 5], "strawberry_stage"), path)
    return path


@pytest.mark.parametrize("spad", [262144, 4096])
def test_output_stage_depthwise_and_residual_in_nchw(tmp_path, monkeypatch, spad):
    model = output_stage_model(tmp_path / "stage.onnx")
    compiled = compile_strawberry(model, tmp_path / "stage.tar", spad)
    assert compiled.offloaded_functions() == 3, compiled.stdout
    for op in ("nn.prelu x1", "clip x1", "add x1", "nn.relu x1"):
        assert op in compiled.stdout, compiled.stdout
    calls = "".join(offloaded_sources(compiled.path).values())
    assert "= strawberry_depthwise_conv2d_nchw_call(" in calls and "= strawberry_conv2d_nchw_call(" in calls
    inputs = random_inputs(model, seed=2)
    (got,), counters = run_with_counters(compiled.path, tmp_path, inputs, monkeypatch)
    np.testing.assert_allclose(got, onnx_reference(model, inputs)[0], **TOLERANCE)
    np.testing.assert_allclose(got, tvm_cpu_reference(model, inputs)[0], **TOLERANCE)
    assert counters["dma_in_bytes"] + counters["dma_out_bytes"] == compiled.planned("bytes")
    assert counters["dma_in_calls"] + counters["dma_out_calls"] == compiled.planned("transfers")
    if spad == 4096:  # split, the last row tile of 13 rows shorter
        rows = re.match(r"(\d+) x (\d+) rows", compiled.plans["tvmgen_default_strawberry_main_0"]["split"])
        assert "for (" in calls and int(rows[1]) > 1 and 13 % int(rows[2]) != 0, rows


def test_split_model_under_sanitizers(cnn_builds, tmp_path, monkeypatch):
    """The generated tile loops, the hardware model and the engine together under ASan (leaks
    included) and UBSan."""
    monkeypatch.setenv("ASAN_OPTIONS", "detect_leaks=1:halt_on_error=1")
    monkeypatch.setenv("UBSAN_OPTIONS", "halt_on_error=1:print_stacktrace=1")
    program = build(cnn_builds[8192].path, tmp_path / "b",
                    cflags=["-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all"])
    inputs = random_inputs(example_model("cnn"), seed=3)
    done = run_program(program, inputs, tmp_path)
    assert done.returncode == 0 and "runtime error" not in done.stderr, done.stderr
    got = np.fromfile(tmp_path / "out0.bin", np.float32).reshape(program.outputs[0].shape)
    np.testing.assert_allclose(got, onnx_reference(example_model("cnn"), inputs)[0], **TOLERANCE)
