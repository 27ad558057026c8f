"""The MLF on a microcontroller: real networks cross-built for Cortex-M boards (QEMU), outputs
equal to the host run of the same MLF, the memory report checked against the ELF, SysTick's
instruction count calibrated, and the kernel libraries warning-free for Cortex-M.

The default run takes one int8 and one float network on mps2-an386 (Cortex-M4) and
mps3-an547 (Cortex-M55), Chocolate and Strawberry on one board each.
The exhaustive run (scripts/test.sh --exhaustive) runs every real network of the suite with each
backend on both.
"""
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import (ROOT, VANILLA_EXT, ZOO_FLOAT_INPUTS, assert_one_line_error, mlf_sources, run_tvmc, shapes_option,
                      stand_in_checkout)
from tvm_extension.api.resources import data_folder
from tvm_extension.testing import tflite_interpreter
from tvm_extension.testing.model_zoo import fetch
from tvm_extension.mlf import board as boards
from tvm_extension.mlf import build

SHAPES = {"kws_dscnn_int8": {"input_1": (1, 50, 10, 1)},
          "kws_on_off_int8": {"serving_default_input_1:0": (1, 98, 1, 104)},
          **{n: ZOO_FLOAT_INPUTS[n] for n in ("mtcnn_pnet", "mtcnn_onet", "kws_on_off_float32", "blazeface", "face_landmark")}}
INT8 = ("kws_dscnn_int8", "kws_on_off_int8")
TARGETS = {"vanilla": "vanilla_accelerator", "qvanilla": "qvanilla", "strawberry": "strawberry",
           "chocolate": "chocolate"}
DEFAULT_CASES = [
    ("kws_dscnn_int8", "qvanilla", "mps2-an386"), ("kws_dscnn_int8", "qvanilla", "mps3-an547"),
    ("mtcnn_pnet", "vanilla", "mps2-an386"), ("mtcnn_pnet", "vanilla", "mps3-an547"),
    ("kws_dscnn_int8", "chocolate", "mps2-an386"), ("mtcnn_pnet", "strawberry", "mps3-an547"),
]
ALL_CASES = [(net, backend, board) for net in SHAPES for backend in
             (("qvanilla", "chocolate", "plain") if net in INT8 else ("vanilla", "strawberry", "chocolate", "plain"))
             for board in ("mps2-an386", "mps3-an547")]
# Real size limits, not bugs: face_landmark's code is larger than the MPS2's 4 MB ROM with Chocolate
# (only its convs offloaded, the depthwise ones in TVM's C) and with plain TVM; plain TVM's 2.9 MB
# workspace leaves no heap on the MPS3 for its 442 KB input. They must be refused in one line.
TOO_BIG = {
    ("face_landmark", "chocolate", "mps2-an386"): r"^the MLF does not fit the board's ROM: \d+ bytes too many$",
    ("face_landmark", "plain", "mps2-an386"): r"^the MLF does not fit the board's ROM: \d+ bytes too many$",
    ("face_landmark", "plain", "mps3-an547"): r"^the model failed on mps3-an547: error: no memory left for the "
                                              r"442368 bytes of in0.bin$",
}
CASES = [pytest.param(*case, marks=[] if case in DEFAULT_CASES else pytest.mark.exhaustive, id="-".join(case))
         for case in ALL_CASES]
# compiled for a microcontroller: QVanilla's calls take at most 4 KB of scratch each (c/qvanilla.h)
BOARD_OPTIONS = {"qvanilla": ("--target-qvanilla-scratch_budget=4096",)}
# ... and on Helium's Cortex-M55 with its dense weights as int8 (the packed8 entry)
CORE_OPTIONS = {("qvanilla", "mps3-an547"): ("--target-qvanilla-int8_weights=1",)}
# generated code's calls (the library's own calls pass a variable): the entry, the scratch's size
QVANILLA_CALL = re.compile(r"\bqvanilla_(\w*conv2d_nhwc_packed8?_s8)\((?:[^,()]+,){5}\s*(\d+),")
# plain TVM's C for microcontrollers: AOT, C interface, no vectors (TVMC's microTVM options)
PLAIN = ["--target", "c", "--executor", "aot", "--executor-aot-interface-api", "c", "--executor-aot-unpacked-api",
         "1", "--runtime", "crt", "--pass-config", "tir.disable_vectorize=1"]
# Each example backend's C library folder (uma_<name>/c), the kit's (which they include), and their sources
LIBRARY_FOLDERS = {name: Path(importlib.util.find_spec(f"uma_{name}").origin).parent / "c"
                   for name in ("vanilla", "qvanilla", "strawberry", "chocolate")}
LIBRARY_FOLDERS["kit"] = data_folder("tvm_extension.kit", "c")
QVANILLA_C = LIBRARY_FOLDERS["qvanilla"]
QVANILLA_LIBRARY = sorted(QVANILLA_C.glob("*.c"))  # every C file of its folder, as an MLF ships it
# every C file of each library's folder, as an MLF ships it
KERNEL_LIBRARIES = [f"{name}/{p.name}" for name, folder in LIBRARY_FOLDERS.items() for p in sorted(folder.glob("*.c"))]


@pytest.fixture(scope="module")
def mlf(tmp_path_factory):
    """The MLF of (network, backend), compiled once for every board (and for every pytest-xdist
    worker: the build cache holds it)."""
    cache = {}

    def compile_(net, backend, *options):
        options = BOARD_OPTIONS.get(backend, ()) + options
        if (net, backend, options) not in cache:
            out = tmp_path_factory.mktemp("mlf") / f"{net}_{backend}.tar"
            target = PLAIN if backend == "plain" else ["--target", TARGETS[backend], "--experimental-tvm-extension",
                                                       VANILLA_EXT]
            done = run_tvmc("compile", *target, *options, "--input-shapes", shapes_option(SHAPES[net]), fetch(net),
                            "-f", "mlf", "-o", out, reuse=True)  # the other worker's, when it compiled it first
            assert done.returncode == 0, done.stderr[-2000:]
            cache[net, backend, options] = out
        return cache[net, backend, options]
    return compile_


def inputs_for(program, seed=0):
    rng = np.random.default_rng(seed)
    return {t.name: rng.integers(-128, 128, t.shape).astype(t.dtype) if t.dtype == "int8"
            else (rng.standard_normal(t.shape) * 16).astype(t.dtype)
            for t in program.inputs}


def libm_calls(archive):
    """The C library's float functions the generated code calls (expf in a softmax...)."""
    return {name for text in mlf_sources(archive).values()
            for name in re.findall(r"\b(expf?|tanhf?|logf?|powf?|erff?|sqrtf?|sinf?|cosf?)\(", text)}


def section_totals(elf):
    """{section: bytes} as arm-none-eabi-size -A reads the ELF: independent of the map file."""
    text = subprocess.run(["arm-none-eabi-size", "-A", str(elf)], capture_output=True, text=True, check=True).stdout
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\.\S+)\s+(\d+)\s+\d+$", text, re.MULTILINE)}


@pytest.mark.real_model
@pytest.mark.parametrize("net, backend, board", CASES)
def test_network_on_board_equals_host(tmp_path, mlf, net, backend, board):
    archive = mlf(net, backend, *CORE_OPTIONS.get((backend, board), ()))
    host = build(archive, tmp_path / "host")
    inputs = inputs_for(host)
    if (net, backend, board) in TOO_BIG:
        with pytest.raises(boards.BoardError, match=TOO_BIG[net, backend, board]):
            boards.build(archive, tmp_path / "board", board).run(inputs)
        return
    firmware = boards.build(archive, tmp_path / "board", board)
    expected, _ = host.run(inputs)
    got, _ = firmware.run(inputs)
    assert list(got) == list(expected)
    # int8 equal; float bit-equal too (the same operations in the same order, no contraction
    # into fused multiply-adds under -std=c11), except through the C library's exp/tanh/...:
    # newlib's and glibc's differ in the last bits.
    max_ulp = 4 if libm_calls(archive) else 0
    for name in expected:
        assert got[name].dtype == expected[name].dtype and got[name].shape == expected[name].shape, name
        if max_ulp and expected[name].dtype.kind == "f":
            np.testing.assert_array_max_ulp(got[name], expected[name], maxulp=max_ulp)
        else:
            assert np.array_equal(got[name], expected[name]), name
        # a constant output proves little (a one-value output, a score, is what it is)
        assert expected[name].size == 1 or np.unique(expected[name]).size > 1, name

    memory = firmware.memory
    sections = section_totals(firmware.executable)
    placed = sum(sections.get(s, 0) for s in (".vectors", ".text", ".ARM.exidx", ".data"))
    assert memory.rom() == placed and memory.static_ram() == sections[".data"] + sections[".bss"]
    assert memory.sizes["generated"]["bss"] >= memory.workspace > 0
    assert (memory.sizes["kernel library"]["text"] > 0) == (backend != "plain")
    # measured by painting: within the 256 KiB stack (gcc's -fstack-usage frames count whole local
    # arrays, painting only the words a call touched)
    assert 64 < memory.stack < 256 * 1024
    # No kernel library keeps a large array on its stack: Vanilla's and QVanilla's kernels take their
    # scratch from the caller, and so does the kit's float engine that Strawberry and Chocolate call
    assert memory.largest_frame <= 1024
    # ... which is an output of each offloaded function (Vanilla, QVanilla), planned in the workspace;
    # Strawberry's and Chocolate's hardware models keep their device's scratchpad on the heap: the
    # heap the inference took is measured (malloc's high-water mark) and counted in the RAM
    assert memory.heap is not None and memory.heap >= 0
    if backend in ("vanilla", "qvanilla"):
        assert memory.heap == 0, memory.heap  # planned, static
    assert memory.ram() == memory.static_ram() + memory.stack + memory.heap + memory.io
    assert firmware.instructions > 10_000
    if backend == "qvanilla":  # each call's scratch, as generated code passes it
        calls = [call for text in mlf_sources(archive).values() for call in QVANILLA_CALL.findall(text)]
        sizes = [int(size) for _, size in calls]
        assert len(sizes) >= 5 and max(sizes) <= 4096, sizes
        packed8 = sum(entry == "conv2d_nhwc_packed8_s8" for entry, _ in calls)
        assert (packed8 > 0) == (board == "mps3-an547"), calls  # int8 weights where Helium takes them


@pytest.mark.real_model
@pytest.mark.parametrize("net, board", [pytest.param(n, b, marks=pytest.mark.exhaustive if (n, b) == (
    "kws_on_off_int8", "mps2-an386") else []) for n in sorted(INT8) for b in ("mps2-an386", "mps3-an547")])
def test_tflite_exact_network_on_board_equals_tflite(tmp_path, mlf, net, board):
    """QVanilla's kernels in TFLite's rounding on the boards, the DSP variant (Cortex-M4) and the
    Helium one (Cortex-M55): the zoo's int8 networks' outputs are TFLite's reference kernels', bit for bit."""
    model = fetch(net)
    archive = mlf(net, "qvanilla", "--tflite-exact", *CORE_OPTIONS.get(("qvanilla", board), ()))
    firmware = boards.build(archive, tmp_path / "board", board)
    rng = np.random.default_rng(11)
    for _ in range(2):
        inputs = {t.name: rng.integers(-128, 128, t.shape).astype(t.dtype) if t.dtype == "int8"
                  else rng.uniform(-40, 80, t.shape).astype(t.dtype) for t in firmware.inputs}  # DS-CNN's scale: 0.88
        got, _ = firmware.run(inputs)
        interpreter = tflite_interpreter().Interpreter(model_path=str(model), experimental_op_resolver_type=(
            tflite_interpreter().OpResolverType.BUILTIN_REF))
        interpreter.allocate_tensors()
        for detail in interpreter.get_input_details():
            interpreter.set_tensor(detail["index"], inputs[detail["name"]])
        interpreter.invoke()
        expected = [interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()]
        assert len(got) == len(expected) == 1
        assert np.array_equal(list(got.values())[0], expected[0])
        assert np.unique(expected[0]).size > 1


def cli_run_equals_host(tmp_path, archive, board, *options, seed=3) -> str:
    """``python -m tvm_extension.mlf run --board BOARD OPTIONS`` of ``archive``: its outputs are the
    host run's; its stdout."""
    host = build(archive, tmp_path / "host")
    inputs = inputs_for(host, seed=seed)
    np.savez(tmp_path / "in.npz", **inputs)
    done = subprocess.run([sys.executable, "-m", "tvm_extension.mlf", "run", "--board", board, *options, str(archive),
                           "-i", str(tmp_path / "in.npz"), "-o", str(tmp_path / "out.npz")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    expected, _ = host.run(inputs)
    with np.load(tmp_path / "out.npz") as got:
        assert all(np.array_equal(got[name], value) for name, value in expected.items())
    return done.stdout


def test_cli_runs_on_a_board(tmp_path, mlf):
    stdout = cli_run_equals_host(tmp_path, mlf("kws_dscnn_int8", "qvanilla"), "mps2-an386")
    instructions = re.search(r"instructions per inference on mps2-an386 \(Cortex-M4\): (\d+)", stdout)
    assert instructions and int(instructions.group(1)) > 1_000_000, stdout
    for fragment in ("ROM", "generated: text", "kernel library: text", "runtime: text", "AOT workspace 52096",
                     "peak stack of an inference", "the heap it took"):
        assert fragment in stdout, stdout


@pytest.mark.real_model
@pytest.mark.parametrize("board, spelling", [("mps2-an386", ["--cflags", "-O0"]), ("mps3-an547", ["--cflags=-O0"]),
                                             ("mps2-an386", ["--cflags=-O2 -fno-omit-frame-pointer"])])
def test_a_debug_build_runs_on_the_board(tmp_path, mlf, board, spelling):
    """A firmware team's debug build of a QVanilla network (the DSP extension's asm on the M4,
    Helium's on the M55): mlf run --board with -O0 (either spelling) or a frame pointer builds and
    gives the host's outputs."""
    cli_run_equals_host(tmp_path, mlf("kws_dscnn_int8", "qvanilla", *CORE_OPTIONS.get(("qvanilla", board), ())), board,
                        *spelling, seed=4)


# Random QVanilla layers (dense and depthwise, both roundings, shifts from -12 to +3, zero
# points, clamps, odd sizes), their outputs written to the file argv[1]: the same program on the
# host and on a board must write the same bytes (the board runs QVanilla's Cortex-M paths).
KERNEL_DRIVER = r"""
#include <stdio.h>
#include <stdlib.h>
#include "qvanilla.h"
static uint32_t state = 12345u;
static int32_t draw(int32_t lo, int32_t hi) { state = state * 1664525u + 1013904223u; return lo + (int32_t)((state >> 8) % (uint32_t)(hi - lo + 1)); }
int main(int argc, char** argv) {
  FILE* out = fopen(argv[argc - 1], "wb");
  static int8_t input[4096], weights[16384], output[4096];
  static int32_t params[3 * 64];
  static int64_t scratch[12 * 1024]; /* 96 KB, 8-byte aligned */
  for (int layer = 0; layer < 40; ++layer) {
    const int depthwise = layer % 3 == 2, rounding = layer % 2;
    const int32_t kh = draw(1, 3), kw = draw(1, 3), ih = draw(kh, 9), iw = draw(kw, 9), ic = draw(1, 40);
    const int32_t oc = depthwise ? ic : draw(1, 40), sh = draw(1, 2), sw = draw(1, 2);
    const int32_t pt = draw(0, kh - 1), pl = draw(0, kw - 1);
    const int32_t oh = (ih + 2 * pt - kh) / sh + 1, ow = (iw + 2 * pl - kw) / sw + 1;
    for (int i = 0; i < ih * iw * ic; ++i) input[i] = (int8_t)draw(-128, 127);
    for (int i = 0; i < kh * kw * ic * (depthwise ? 1 : oc); ++i) weights[i] = (int8_t)draw(-128, 127);
    for (int o = 0; o < oc; ++o) {
      params[o] = draw(-30000, 30000);
      params[oc + o] = draw(1 << 30, 0x7fffffff) * (draw(0, 9) ? 1 : -1);
      params[2 * oc + o] = draw(-12, 3);
    }
    const int32_t zi = draw(-128, 127), zw = draw(-5, 5), zo = draw(-128, 127), lo = draw(-128, 0), hi = draw(lo, 127);
    const qvanilla_dims in = {1, ih, iw, ic}, filter = {depthwise ? 1 : oc, kh, kw, ic}, out_dims = {1, oh, ow, oc};
    const qvanilla_conv_params p = {{sh, sw}, {pt, pl}, zi, zw, zo, {lo, hi}, rounding};
    const qvanilla_per_channel_quant_params quant = {params + oc, params + 2 * oc};
    const qvanilla_context ctx = {scratch, depthwise ? qvanilla_depthwise_conv2d_s8_get_buffer_size(&in, &filter)
                                                     : qvanilla_conv2d_s8_get_buffer_size(&in, &filter)};
    if (ctx.size > (int32_t)sizeof scratch) return 2;
    const qvanilla_status status = depthwise
        ? qvanilla_depthwise_conv2d_s8(&ctx, &p, &quant, &in, input, &filter, weights, params, &out_dims, output)
        : qvanilla_conv2d_s8(&ctx, &p, &quant, &in, input, &filter, weights, params, &out_dims, output);
    if (status != 0 || fwrite(output, 1, (size_t)(oh * ow * oc), out) != (size_t)(oh * ow * oc)) return 1;
  }
  return fclose(out) != 0;
}
"""


@pytest.mark.parametrize("board", ["mps2-an385", "mps2-an386", "mps3-an547"])
def test_qvanilla_kernels_on_board_equal_the_host(tmp_path, board):
    spec, files = boards.BOARDS[board], boards.BOARD_FILES
    driver = tmp_path / "driver.c"
    driver.write_text(KERNEL_DRIVER)
    library = [f"-I{QVANILLA_C}", f"-I{LIBRARY_FOLDERS['kit']}", *map(str, QVANILLA_LIBRARY)]
    subprocess.run(["gcc", "-O2", "-std=c11", str(driver), *library, "-o", str(tmp_path / "host")], check=True)
    subprocess.run([str(tmp_path / "host"), str(tmp_path / "host.bin")], check=True)
    elf = tmp_path / "driver.elf"
    subprocess.run([boards.CC, *spec.cpu_flags, "-mthumb", "-O2", "-std=c11", "--specs=rdimon.specs", "-nostartfiles",
                    f"-I{files}", f"-L{files}", f"-T{spec.linker_script}", str(driver), *library,
                    str(files / "startup.c"), "-o", str(elf)], check=True)
    subprocess.run([boards.QEMU, "-machine", board, "-nographic", "-monitor", "none", "-serial", "none",
                    "-semihosting-config", "enable=on,target=native,arg=driver,arg=board.bin", "-kernel", str(elf)],
                   cwd=tmp_path, check=True, timeout=300)
    expected = (tmp_path / "host.bin").read_bytes()
    assert len(expected) > 10_000 and (tmp_path / "board.bin").read_bytes() == expected


@pytest.mark.quick
@pytest.mark.parametrize("board", list(boards.BOARDS))
def test_systick_counts_instructions(tmp_path, board):
    """c_runtime/board/calibrate.c: a loop of a known number of instructions, counted by SysTick
    under -icount shift=0, gives back that number with the board's clock."""
    spec = boards.BOARDS[board]
    elf = tmp_path / "calibrate.elf"
    files = boards.BOARD_FILES
    subprocess.run([boards.CC, *spec.cpu_flags, "-mthumb", "-O2", "--specs=rdimon.specs", "-nostartfiles",
                    f"-I{files}", f"-L{files}", f"-T{spec.linker_script}", str(files / "calibrate.c"),
                    str(files / "startup.c"), "-o", str(elf)], check=True)
    done = subprocess.run([boards.QEMU, "-machine", board, "-nographic", "-monitor", "none", "-serial", "none",
                           "-semihosting-config", "enable=on,target=native", "-icount", "shift=0", "-kernel", str(elf)],
                          capture_output=True, text=True, timeout=120, check=True)
    ticks, instructions = map(int, re.search(r"board: ticks (\d+) instructions (\d+)", done.stdout).groups())
    assert abs(ticks * 1_000_000_000 / spec.clock_hz - instructions) <= 0.001 * instructions


@pytest.mark.parametrize("board", ["mps2-an385", "mps2-an386", "mps2-an500", "mps3-an547"])
@pytest.mark.parametrize("library", KERNEL_LIBRARIES)
def test_kernel_libraries_build_for_cortex_m_without_warnings(tmp_path, board, library):
    """Each example backend's C library, as it ships in an MLF, for the board's core."""
    folders = [f"-I{folder}" for folder in LIBRARY_FOLDERS.values()]
    backend, source = library.split("/")
    obj = tmp_path / "lib.o"
    done = subprocess.run([boards.CC, *boards.BOARDS[board].cpu_flags, "-mthumb", "-O2", "-std=c11", "-Wall",
                           "-Wextra", "-Werror", *folders, "-c", str(LIBRARY_FOLDERS[backend] / source), "-o", str(obj)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    if library.startswith(("kit", "vanilla", "qvanilla")):  # kernels: no allocator, no stdio
        undefined = subprocess.run(["arm-none-eabi-nm", "-u", str(obj)], capture_output=True, text=True).stdout
        names = {line.split()[-1] for line in undefined.splitlines()}
        assert not names & {"malloc", "calloc", "realloc", "free", "printf", "fprintf", "fopen"}, names


def test_unknown_board_is_one_line(tmp_path, mlf):
    np.savez(tmp_path / "in.npz", input_1=np.zeros((1, 50, 10, 1), np.float32))
    done = subprocess.run([sys.executable, "-m", "tvm_extension.mlf", "run", "--board", "mps2-an999",
                           str(mlf("kws_dscnn_int8", "qvanilla")), "-i", str(tmp_path / "in.npz"),
                           "-o", str(tmp_path / "o.npz")], capture_output=True, text=True)
    assert_one_line_error(done, "unknown board 'mps2-an999'", "mps2-an386")
    assert not (tmp_path / "o.npz").exists()


@pytest.mark.parametrize("options, message", [(["--device", "fpga"], "no device 'fpga' (known: rtl)"),
                                             (["--device", "rtl", "--board", "mps2-an386"],
                                              "--board and --device exclude each other")])
def test_bad_device_is_one_line(tmp_path, mlf, options, message):
    np.savez(tmp_path / "in.npz", input_1=np.zeros((1, 50, 10, 1), np.float32))
    done = subprocess.run([sys.executable, "-m", "tvm_extension.mlf", "run", *options,
                           str(mlf("kws_dscnn_int8", "qvanilla")), "-i", str(tmp_path / "in.npz"),
                           "-o", str(tmp_path / "o.npz")], capture_output=True, text=True)
    assert_one_line_error(done, message)
    assert not (tmp_path / "o.npz").exists()


def test_missing_toolchain_says_how_to_install(tmp_path, mlf):
    archive = mlf("kws_dscnn_int8", "qvanilla")
    np.savez(tmp_path / "in.npz", input_1=np.zeros((1, 50, 10, 1), np.float32))
    env = dict(os.environ, PATH=str(tmp_path))  # no cross compiler, no QEMU
    done = subprocess.run([sys.executable, "-m", "tvm_extension.mlf", "run", "--board", "mps2-an386", str(archive),
                           "-i", str(tmp_path / "in.npz"), "-o", str(tmp_path / "o.npz")],
                          capture_output=True, text=True, env=env)
    assert_one_line_error(done, "arm-none-eabi-gcc is not installed", boards.INSTALL)
    assert not (tmp_path / "o.npz").exists()


STAND_IN = """#!/bin/bash
[ "$1" = -c ] && exit 0  # env.sh's check that python3.10 runs
echo "$(basename "$0") $*" >> "$CALLS"
if [ "$1 $2" = "-m venv" ]; then mkdir -p "$3/bin" && cp "$0" "$3/bin/python"; fi
"""


def test_test_setup_installs_the_toolchain_and_the_demo_does_not(tmp_path):
    """scripts/env.sh test, as root on a machine without the cross compiler, QEMU, ccache, Verilator and
    Yosys, installs them with apt-get and says so in one line; env.sh demo does not."""
    root, bin_dir, calls = tmp_path / "checkout", tmp_path / "bin", tmp_path / "calls"
    stand_in_checkout(root)
    bin_dir.mkdir()
    for tool in ("bash", "basename", "cat", "chmod", "cp", "cut", "dirname", "grep", "mkdir", "sha256sum"):
        (bin_dir / tool).symlink_to(shutil.which(tool))
    for stand_in in ("python3.10", "apt-get", "id"):
        (bin_dir / stand_in).write_text(STAND_IN if stand_in != "id" else "#!/bin/bash\necho 0\n")
        (bin_dir / stand_in).chmod(0o755)
    env = dict(os.environ, TVM_EXTENSION_VENV=str(tmp_path / "venv"), TVM_EXTENSION_RELAX_VENV=str(tmp_path / "relax"),
               CALLS=str(calls), PATH=str(bin_dir), PYENV_ROOT=str(tmp_path / "no-pyenv"))

    def setup(purpose):
        calls.write_text("")
        done = subprocess.run([str(bin_dir / "bash"), "-c", f"source scripts/env.sh {purpose}"], cwd=root, env=env,
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done.stderr, [c for c in calls.read_text().splitlines() if c.startswith("apt-get")]

    said, apt = setup("demo")
    assert apt == [] and "apt-get" not in said
    said, apt = setup("test")
    assert apt == ["apt-get update -qq", "apt-get install -y -qq --no-install-recommends gcc-arm-none-eabi "
                   "libnewlib-arm-none-eabi qemu-system-arm ccache verilator yosys"], apt
    assert said.count("installing the Cortex-M cross compiler, QEMU, ccache, Verilator and Yosys") == 1, said
