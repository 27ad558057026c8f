"""Layer by layer on the emulated Cortex-M boards: QVanilla's kernels in each variant beside plain TVM's
C of the same layer and CMSIS-NN's figures, instructions per multiply-add and scratch bytes,
written into docs/benchmarks.md.

    python benchmarks/layers.py                   # the seven layers of issue 34 and the zoo's int8 layers
    python benchmarks/layers.py --no-plain        # without plain TVM's C (a tvmc compile per layer)
    python benchmarks/layers.py --output -        # print the table only

QVanilla: ``uma_qvanilla.layers`` (one call of what generated code calls, in QEMU under -icount,
arm-none-eabi-gcc -O2 with the board's -mcpu), random int8 tensors with a trained layer's
quantization, TFLite's rounding; variants portable (plain C), dsp (SIMD32: SMLAD), mve (Helium, with
dense weights as int8: the packed8 entry, what ``--target-qvanilla-int8_weights=1`` compiles).
Every variant's output is compared with the portable C built for this machine, bit for bit.
Plain TVM: the same layer as a Relay function (qnn.conv2d NHWC, bias, per-channel
qnn.requantize) compiled by tvmc for `--target c` with the microcontroller options of
benchmarks/board.py, one inference counted by ``mlf run --board``'s method.  CMSIS-NN: the figures
issue 34 measured for the seven layers (same method, arm-none-eabi-gcc 12.2 -O2); the zoo's
layers have none.  Scratch: what ``_get_buffer_size`` asks (the compiler reserves it) in a
microcontroller's build (within 4 KB, ``--target-qvanilla-scratch_budget=4096``), and the bytes
the call wrote; each layer also runs in the roomy layout (a host's build), whose ratio to CMSIS-NN
and size are beside.  MACs count padding taps, as CMSIS-NN's figures do.
"""
import argparse
import dataclasses
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import tflite

from board import EMBEDDED, ROOT, TVMC, environment, write_section
from tvm_extension.mlf import board as boards
from tvm_extension.testing.model_zoo import fetch
from uma_qvanilla import layers

SEVEN = [layers.Shape("conv 49x10x1 -> 64, 10x4, stride 2", 49, 10, 1, 64, 10, 4, 2),
         layers.Shape("depthwise 3x3, 25x5x64", 25, 5, 64, 64, 3, 3, 1, True),
         layers.Shape("pointwise 25x5x64 -> 64", 25, 5, 64, 64, 1, 1),
         layers.Shape("conv 96x96x3 -> 8, 3x3, stride 2", 96, 96, 3, 8, 3, 3, 2),
         layers.Shape("depthwise 3x3, 48x48x16", 48, 48, 16, 16, 3, 3, 1, True),
         layers.Shape("pointwise 24x24x32 -> 64", 24, 24, 32, 64, 1, 1),
         layers.Shape("conv 3x3, 16x16x32 -> 32", 16, 16, 32, 32, 3, 3)]
# CMSIS-NN's instructions per MAC (issue 34): Cortex-M4, Cortex-M55
CMSIS_NN = dict(zip((s.name for s in SEVEN), [(3.49, 0.96), (7.79, 2.34), (2.09, 0.40), (6.12, 2.11), (8.44, 3.57),
                                              (2.69, 0.61), (1.93, 0.26)]))
ZOO = ["kws_dscnn_int8", "kws_on_off_int8"]
BUDGET = 4096  # QVANILLA_SCRATCH_BUDGET of a microcontroller build, the target's scratch_budget for the boards
BEGIN, END = "<!-- layers table: benchmarks/layers.py writes from here -->", "<!-- end of the layers table -->"


def zoo_shapes(net):
    """The distinct conv and depthwise layers of a zoo TFLite model."""
    model = tflite.Model.GetRootAsModel(fetch(net).read_bytes(), 0)
    graph, found = model.Subgraphs(0), {}
    for i in range(graph.OperatorsLength()):
        op = graph.Operators(i)
        code = model.OperatorCodes(op.OpcodeIndex())
        builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
        if builtin not in (tflite.BuiltinOperator.CONV_2D, tflite.BuiltinOperator.DEPTHWISE_CONV_2D):
            continue
        depthwise = builtin == tflite.BuiltinOperator.DEPTHWISE_CONV_2D
        options = tflite.DepthwiseConv2DOptions() if depthwise else tflite.Conv2DOptions()
        options.Init(op.BuiltinOptions().Bytes, op.BuiltinOptions().Pos)
        _, h, w, ic = graph.Tensors(op.Inputs(0)).ShapeAsNumpy().tolist()
        filt = graph.Tensors(op.Inputs(1)).ShapeAsNumpy().tolist()  # OHWI, or 1HWO if depthwise
        oc, kh, kw = (filt[3] if depthwise else filt[0]), filt[1], filt[2]
        same = options.Padding() == tflite.Padding.SAME
        kind = "depthwise" if depthwise else "conv"
        name = f"{net}: {kind} {kh}x{kw}, {h}x{w}x{ic} -> {oc}, stride {options.StrideH()}{'' if same else ', valid'}"
        found.setdefault(name, layers.Shape(name, h, w, ic, oc, kh, kw, options.StrideH(), depthwise, same))
    return list(found.values())


def relay_text(layer):
    """The layer as Relay text with its constants: what plain TVM compiles."""
    import tvm  # pylint: disable=import-outside-toplevel
    from tvm import relay  # pylint: disable=import-outside-toplevel
    s, (pt, pl), (oh, ow) = layer.shape, layer.shape.pads, layer.shape.out_hw
    pb, pr = (oh - 1) * s.stride + s.kh - s.h - pt, (ow - 1) * s.stride + s.kw - s.w - pl
    bias, multiplier, shift = layer.table.astype(np.int64)
    scale = (multiplier / 2.0 ** 31 * 2.0 ** shift).astype(np.float32)
    x = relay.var("x", shape=(1, s.h, s.w, s.ic), dtype="int8")
    if s.depthwise:  # packed: [tap][channel] int16; HWOI int8
        w = layer.packed.astype(np.int8).reshape(s.kh, s.kw, s.ic, 1)
    else:  # packed: [o][k] int16, k = (ky * kw + kx) * ic + c; HWIO int8
        w = layer.packed[:s.oc, :s.kh * s.kw * s.ic].astype(np.int8).T.reshape(s.kh, s.kw, s.ic, s.oc)
    conv = relay.qnn.op.conv2d(
        x, relay.const(w), relay.const(layer.input_zp), relay.const(0), relay.const(1.0), relay.const(1.0),
        kernel_size=(s.kh, s.kw), channels=s.oc, strides=(s.stride, s.stride), padding=(pt, pl, max(pb, 0), max(pr, 0)),
        data_layout="NHWC", kernel_layout="HWOI" if s.depthwise else "HWIO", groups=s.ic if s.depthwise else 1,
        out_dtype="int32")
    # the packed bias has the input zero point folded in: the graph's bias is it less that fold
    graph_bias = (bias + layer.input_zp * w.reshape(-1, s.oc).astype(np.int64).sum(axis=0)).astype(np.int32)
    out = relay.qnn.op.requantize(relay.nn.bias_add(conv, relay.const(graph_bias), axis=3), relay.const(scale),
                                  relay.const(0), relay.const(1.0), relay.const(layer.output_zp), axis=3,
                                  out_dtype="int8")
    return tvm.IRModule.from_expr(relay.Function([x], out)).astext(show_meta_data=True)


def plain_instructions(layer, board, work):
    """Instructions of plain TVM's C for the layer, one inference on ``board`` (compiled once into ``work``)."""
    source, archive, s = work / "layer.relay", work / "layer.tar", layer.shape
    if not archive.is_file():
        work.mkdir(exist_ok=True)
        source.write_text(relay_text(layer))
        done = subprocess.run([str(TVMC), "compile", "--target", "c", *EMBEDDED, "--input-shapes",
                               f"x:[1,{s.h},{s.w},{s.ic}]", str(source), "-f", "mlf", "-o", str(archive)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"error: tvmc failed for {s.name}: {done.stderr.strip().splitlines()[-1]}")
    firmware = boards.build(archive, work / board, board)
    firmware.run({firmware.inputs[0].name: layer.x.reshape(1, s.h, s.w, s.ic)})
    return firmware.instructions


def table(shapes, plain, command):
    variants = {board: names for board, names in layers.BOARD_VARIANTS.items()}
    header = (f"| layer | MACs | board | CMSIS-NN insns/MAC | QVanilla insns/MAC within {BUDGET:,} bytes: portable / dsp "
              f"/ mve | plain TVM insns/MAC | the board's build vs CMSIS-NN: within {BUDGET:,} bytes / roomy | "
              f"plain TVM / the board's build | scratch bytes within {BUDGET:,} (asked / written) / roomy (asked) |")
    lines = [environment(command), "", header, "| " + " | ".join(["---"] * 9) + " |"]
    rng = np.random.default_rng(0)
    chosen = [layers.random_layer(s, rng) for s in shapes]
    # each layer in the microcontroller's scratch (the board's _get_buffer_size) and in the roomy layout
    calls = [dataclasses.replace(layer, budget=budget) for budget in (BUDGET, 0) for layer in chosen]
    # Helium's build takes dense weights as int8 (--target-qvanilla-int8_weights=1: the packed8 entry)
    calls8 = [layer.with_int8_weights() or layer for layer in calls]
    with tempfile.TemporaryDirectory(prefix="layers-bench-") as tmp:
        work = Path(tmp)
        host = layers.run(layers.build(work / "host"), calls)
        host8 = layers.run(layers.build(work / "host"), calls8)
        if any(not np.array_equal(a.output, b.output) for a, b in zip(host, host8)):
            sys.exit("error: the packed8 entry differs from the packed one on the host")
        for board, names in variants.items():
            runs = {v: layers.run(layers.build(work / board, board, v), calls8 if v == "mve" else calls, board)
                    for v in names}
            for i, layer in enumerate(calls):
                for v, results in runs.items():
                    if not np.array_equal(results[i].output, host[i].output) or results[i].status != 0:
                        sys.exit(f"error: {v} on {board} differs from the host for {layer.shape.name}")
            for i, layer in enumerate(chosen):
                roomy = len(chosen) + i
                macs = layer.shape.macs
                per = {v: runs[v][i].instructions / macs for v in names}
                best = per[names[-1]]  # what an MLF built for the board runs: its core's best variant
                best_roomy = runs[names[-1]][roomy].instructions / macs
                cmsis = CMSIS_NN.get(layer.shape.name, (None, None))[0 if board == "mps2-an386" else 1]
                plain_per = None
                if plain:
                    plain_per = plain_instructions(layer, board, work / f"plain{i}") / macs
                cells = " / ".join(f"{per[v]:.2f}" if v in per else "-" for v in ("portable", "dsp", "mve"))
                lines.append(
                    f"| {layer.shape.name} | {macs:,} | {board} | {cmsis if cmsis else '-'} | {cells} | "
                    f"{f'{plain_per:.2f}' if plain_per else '-'} | "
                    f"{f'{best / cmsis:.2f}x / {best_roomy / cmsis:.2f}x' if cmsis else '-'} | "
                    f"{f'{plain_per / best:.1f}x' if plain_per else '-'} | "
                    f"{calls[i].scratch:,} / {max(runs[v][i].scratch_used for v in names):,} / {calls[roomy].scratch:,} |")
                print(lines[-1], flush=True)
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--no-plain", action="store_true", help="leave plain TVM's C out (no tvmc compiles)")
    parser.add_argument("--no-zoo", action="store_true", help="only the seven layers")
    parser.add_argument("--output", default=str(ROOT / "docs" / "benchmarks.md"), help="page to write, '-': print only")
    args = parser.parse_args()
    boards.check_tools()
    shapes = SEVEN + ([] if args.no_zoo else [s for net in ZOO for s in zoo_shapes(net)])
    command = "python benchmarks/layers.py" + (" --no-plain" if args.no_plain else "") + \
              (" --no-zoo" if args.no_zoo else "")
    text = table(shapes, not args.no_plain, command)
    if args.output != "-":
        write_section(Path(args.output), BEGIN, END, text)
        print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
