"""QVanilla's kernels on the emulated boards, every variant (portable C, the DSP extension's, Helium's)
against the portable C built for this machine, bit for bit, on random layers: shapes with channel
tails, odd and long tap counts (more than a group of 64), strides, padding on every side, both
roundings, and quantization at the ends of its ranges (any multiplier, shifts -31 .. 30), each in
the roomy scratch layout, within 4 KB and in the least scratch the entry accepts; dense layers
whose weights fit int8 also through the packed8 entry; each variant built at -O2, at -O0 and for a
part that traps unaligned loads.  The host's build runs under the sanitizers."""
import dataclasses

import numpy as np
import pytest

from uma_qvanilla import layers
from uma_qvanilla.packing import pack_conv, pack_depthwise

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


def _quantization(rng, oc, k, quiet):
    """Per-channel multipliers and shifts: mostly a trained layer's (or shifts around 0 for a quiet
    layer's small sums), some at the ends of the ranges."""
    typical = np.round(np.log2(40 / (74 * 73 * np.sqrt(k) * 0.75))) if not quiet else -2
    shift = np.clip(typical + rng.integers(-2, 3, oc), -31, 30)
    multiplier = rng.integers(1 << 30, INT32_MAX, oc, dtype=np.int64)
    wild = rng.random(oc) < 0.2
    # any shift, the ends of each output stage's fast ranges more often than not
    shift[wild] = rng.choice([*range(-31, 31), -1, 0, 1, -2, -22, -23, -24, -31, 30], wild.sum())
    multiplier[wild] = rng.choice([INT32_MIN, INT32_MAX, -(1 << 30), 0, 1, 12345], wild.sum())
    return multiplier.astype(np.int32), shift.astype(np.int32)


def random_layers(seed, count):
    rng = np.random.default_rng(seed)
    made = []
    for i in range(count):
        depthwise = i % 2 == 1
        kh, kw = (9, 9) if i % 11 == 5 else (int(rng.integers(1, 6)), int(rng.integers(1, 6)))
        ic = int(rng.integers(1, 71))
        oc = ic if depthwise else int(rng.integers(1, 41))
        h, w, stride = int(rng.integers(1, 13)), int(rng.integers(1, 13)), int(rng.integers(1, 3))
        shape = layers.Shape(f"random {i}", h, w, ic, oc, kh, kw, stride, depthwise)
        quiet = i % 3 == 2  # small sums: outputs near the shifts' rounding points, few clamped
        span = 4 if quiet else 128
        x = rng.integers(-span, span, (h, w, ic), dtype=np.int8)
        input_zp, output_zp = (int(v) for v in rng.integers(-span, span, 2))
        bias = rng.integers(INT32_MIN // 4, INT32_MAX // 4, oc, dtype=np.int64).astype(np.int32)
        if quiet:
            bias = rng.integers(-40, 41, oc).astype(np.int32)
        elif rng.random() < 0.8:
            bias //= 1 << 16
        weight_zp = 0 if i % 4 < 2 else int(rng.integers(-3, 4))  # 0: int8 weights (Helium's int8 path)
        weights = rng.integers(-3 if quiet else -128, 3 if quiet else 128, (kh, kw, ic) if depthwise else (kh, kw, ic, oc),
                               dtype=np.int8)
        packed, folded = (pack_depthwise if depthwise else pack_conv)(weights, weight_zp, input_zp, bias)
        multiplier, shift = _quantization(rng, oc, kh * kw * (1 if depthwise else ic), quiet)
        lo = int(rng.integers(-128, 0))
        act = (lo, int(rng.integers(lo, 128))) if i % 5 else (-128, 127)  # int8's range: no clamp (the DSP's SSAT)
        made.append(layers.Layer(shape, x, packed, np.stack([folded, multiplier, shift]).astype(np.int32), input_zp,
                                 output_zp, act, int(rng.integers(0, 2))))
    return made


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    work = tmp_path_factory.mktemp("boards")
    # each layer in the roomy layout, a microcontroller's 4 KB and the least scratch the entry takes
    # dense layers whose weights fit int8 also as the packed8 entry takes them
    made = random_layers(seed=3407, count=44)
    made += [twin for layer in made if (twin := layer.with_int8_weights()) is not None]
    chosen = [dataclasses.replace(layer, budget=budget) for layer in made for budget in (0, 4096, 1)]
    # the portable C under AddressSanitizer and UndefinedBehaviorSanitizer: any report stops it
    sanitized = layers.build(work, cflags=("-O2", "-fsanitize=address,undefined", "-fno-sanitize-recover=all"))
    return work, chosen, layers.run(sanitized, chosen)


# A firmware team's builds: -O2, a debug build (-O0), and a part that traps unaligned loads
# (UNALIGN_TRP set by the start-up code, -mno-unaligned-access, the weights only 2-byte aligned as
# the API allows): the DSP and Helium paths load words only where that is allowed.
FLAGS = {"O2": ("-O2",), "O0": ("-O0",),
         "trap": ("-O2", "-mno-unaligned-access", "-DBOARD_TRAP_UNALIGNED", "-DLAYERS_WEIGHTS_OFFSET=2")}
RUNS = [(b, v, f) for b, vs in layers.BOARD_VARIANTS.items() for v in vs for f in FLAGS
        if f != "trap" or v != "portable"]


@pytest.mark.parametrize("board,variant,flags", RUNS)
def test_every_variant_on_the_boards_equals_the_portable_c(case, board, variant, flags):
    work, chosen, host = case
    assert all(r.status == 0 and r.repeatable for r in host)
    on_board = layers.run(layers.build(work / flags, board, variant, FLAGS[flags]), chosen, board)
    for layer, expected, got in zip(chosen, host, on_board):
        assert got.status == 0 and got.repeatable, layer.shape
        np.testing.assert_array_equal(got.output, expected.output, err_msg=str(layer.shape))
        assert got.scratch_used <= layer.scratch, layer.shape
        assert got.instructions > 0
