"""The C kernels under AddressSanitizer and UndefinedBehaviorSanitizer.

Both kernel libraries are linked into a small C driver twice: as shipped (-O2) and with
``-fsanitize=address,undefined -fno-sanitize-recover=all``.  The driver reads calls from stdin
(entry, integer and float arguments, arrays), allocates every array with its own malloc of
exactly its size (so ASan sees one element too far), calls the entry and writes back the status
and every array.  Each test sends its calls to both builds: the sanitized one must exit 0 with
an empty stderr (a sanitizer report aborts it), both must return the same statuses and bits,
and the results must match a numpy reference.  The status codes come from the headers.
"""
import os
import re
import struct
import subprocess

import numpy as np
import pytest

from tvm_extension.kit import quantization
from uma_qvanilla import packing, scratch
from uma_qvanilla.codegen import KERNEL_DIR as QVANILLA
from uma_vanilla.buffer_size import buffer_size as vanilla_buffer_size
from uma_vanilla.codegen import KERNEL_DIR as VANILLA, KIT_DIR as KIT

# The kit's conv engine first (VANILLA_BUILDS' flags are for it), then Vanilla's entries over it.
# QVanilla's library (every C file of its folder, as an MLF ships it) and its reference kernels.
QVANILLA_SOURCES = sorted(QVANILLA.glob("*.c")) + [QVANILLA / "reference" / "qvanilla_conv2d_ref.c"]
SOURCES = [KIT / "kit_conv_f32.c", *sorted(VANILLA.glob("*.c")), *QVANILLA_SOURCES]

SANITIZE = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer", "-g"]
SANITIZER_ENV = {"ASAN_OPTIONS": "detect_leaks=0:abort_on_error=0:halt_on_error=1",
                 "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1"}

DRIVER = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qvanilla.h"
#include "vanilla_accelerator.h"

/* QVanilla's plain reference kernels (c/reference/qvanilla_conv2d_ref.c) */
void qvanilla_conv2d_s8_ref(const qvanilla_conv_params*, const qvanilla_per_channel_quant_params*,
                            const qvanilla_dims*, const int8_t*, const qvanilla_dims*, const int8_t*, const int32_t*,
                            const qvanilla_dims*, int8_t*);
void qvanilla_depthwise_conv2d_s8_ref(const qvanilla_conv_params*, const qvanilla_per_channel_quant_params*,
                                      const qvanilla_dims*, const int8_t*, const qvanilla_dims*, const int8_t*,
                                      const int32_t*, const qvanilla_dims*, int8_t*);

enum { MAX_INTS = 32, MAX_FLOATS = 4, MAX_ARRAYS = 8 };

static void get(void* p, size_t n) {
  if (n != 0 && fread(p, 1, n, stdin) != n) { fprintf(stderr, "driver: short read\n"); exit(2); }
}

static int32_t get_i32(void) { int32_t v; get(&v, sizeof v); return v; }

/* Request: op, nints, ints, nfloats, floats, narrays, then per array: element size (0: NULL),
 * element count, bytes.  Reply: status, then every array's bytes. */
int main(void) {
  int32_t op;
  while (fread(&op, sizeof op, 1, stdin) == 1) {
    int32_t n[MAX_INTS] = {0}, ni = get_i32(), nf, na;
    float f[MAX_FLOATS] = {0};
    void* a[MAX_ARRAYS] = {0};
    size_t bytes[MAX_ARRAYS] = {0};
    if (ni < 0 || ni > MAX_INTS) return 3;
    get(n, (size_t)ni * sizeof n[0]);
    nf = get_i32();
    if (nf < 0 || nf > MAX_FLOATS) return 3;
    get(f, (size_t)nf * sizeof f[0]);
    na = get_i32();
    if (na < 0 || na > MAX_ARRAYS) return 3;
    for (int i = 0; i < na; ++i) {
      const int32_t size = get_i32();
      int64_t count;
      get(&count, sizeof count);
      if (size == 0) continue;
      bytes[i] = (size_t)size * (size_t)count;
      a[i] = malloc(bytes[i]);
      if (a[i] == NULL) return 4;
      get(a[i], bytes[i]);
    }
    float* v[MAX_ARRAYS];
    for (int i = 0; i < MAX_ARRAYS; ++i) v[i] = (float*)a[i];
    int32_t status;
    switch (op) {
      case 0: case 1: case 2: case 3: { /* Vanilla's flat calls (vanilla_accelerator.c); their scratch is
                                          * the driver's malloc of exactly the last int's bytes (NULL for 0) */
        const int32_t size = n[op < 2 ? 12 : 11];
        float* const scratch = size > 0 ? (float*)malloc((size_t)size) : NULL;
        if (size > 0 && scratch == NULL) return 4;
        if (op < 2)
          status = (op ? vanilla_conv2dnhwc_general : vanilla_conv2dnchw_general)(
              scratch, size, v[0], v[1], v[2], v[3], v[4], v[5], n[0], n[1], n[2], n[3], n[4], n[5], n[6], n[7],
              n[8], n[9], n[10], n[11], f[0], f[1]);
        else
          status = (op == 3 ? vanilla_depthwise_conv2dnhwc : vanilla_depthwise_conv2dnchw)(
              scratch, size, v[0], v[1], v[2], v[3], v[4], v[5], n[0], n[1], n[2], n[3], n[4], n[5], n[6], n[7],
              n[8], n[9], n[10], f[0], f[1]);
        free(scratch);
        break;
      }
      case 4: { /* the _get_buffer_size of Vanilla's entry n[0] (conv nchw, nhwc, depthwise nchw, nhwc) for
                 * stride n[1..2], padding n[3..4], dims input n[5..8], filter n[9..12], output n[13..16] */
        int32_t (*const sizes[4])(const vanilla_conv_params*, const vanilla_dims*, const vanilla_dims*,
                                  const vanilla_dims*) = {
            vanilla_conv2d_nchw_get_buffer_size, vanilla_conv2d_nhwc_get_buffer_size,
            vanilla_depthwise_conv2d_nchw_get_buffer_size, vanilla_depthwise_conv2d_nhwc_get_buffer_size};
        const vanilla_conv_params p = {{n[1], n[2]}, {n[3], n[4]}, {f[0], f[1]}};
        const vanilla_dims in = {n[5], n[6], n[7], n[8]}, fd = {n[9], n[10], n[11], n[12]},
                           out = {n[13], n[14], n[15], n[16]};
        status = sizes[n[0] & 3](&p, &in, &fd, &out);
        break;
      }
      case 12: case 13: case 15: case 16: case 17: case 19: { /* QVanilla's struct entries; 13, 19: the references */
        /* n: input, filter and output dims (n, h, w, c each), stride (h, w), padding (h, w), input_zp,
         * weight_zp, output_zp, act_min, act_max, rounding, ctx size, then bits: NULL for ctx (1), params
         * (2), quant (4), input_dims (8), filter_dims (16), output_dims (32); 64: ctx->buf one byte in.
         * Arrays: input, weights, bias, output, multiplier, shift, scratch. */
        const qvanilla_dims in = {n[0], n[1], n[2], n[3]}, fd = {n[4], n[5], n[6], n[7]};
        const qvanilla_dims od = {n[8], n[9], n[10], n[11]};
        const qvanilla_conv_params cp = {{n[12], n[13]}, {n[14], n[15]}, n[16], n[17], n[18], {n[19], n[20]}, n[21]};
        const qvanilla_per_channel_quant_params qp = {(const int32_t*)a[4], (const int32_t*)a[5]};
        const int32_t bits = n[23];
        const qvanilla_context cx = {bits & 64 ? (void*)((char*)a[6] + 1) : a[6], n[22]};
        const qvanilla_context* ctx = bits & 1 ? NULL : &cx;
        const qvanilla_conv_params* params = bits & 2 ? NULL : &cp;
        const qvanilla_per_channel_quant_params* quant = bits & 4 ? NULL : &qp;
        const qvanilla_dims *id = bits & 8 ? NULL : &in, *fdp = bits & 16 ? NULL : &fd, *odp = bits & 32 ? NULL : &od;
        const int8_t* x = (const int8_t*)a[0];
        const int32_t* bias = (const int32_t*)a[2];
        int8_t* y = (int8_t*)a[3];
        status = 0;
        if (op == 12) status = qvanilla_conv2d_s8(ctx, params, quant, id, x, fdp, (const int8_t*)a[1], bias, odp, y);
        if (op == 15) status = qvanilla_conv2d_packed_s8(ctx, params, quant, id, x, fdp, (const int16_t*)a[1], bias, odp, y);
        if (op == 16) status = qvanilla_depthwise_conv2d_s8(ctx, params, quant, id, x, fdp, (const int8_t*)a[1], bias, odp, y);
        if (op == 17) {
          status = qvanilla_depthwise_conv2d_packed_s8(ctx, params, quant, id, x, fdp, (const int16_t*)a[1], bias, odp, y);
        }
        if (op == 13) qvanilla_conv2d_s8_ref(params, quant, id, x, fdp, (const int8_t*)a[1], bias, odp, y);
        if (op == 19) qvanilla_depthwise_conv2d_s8_ref(params, quant, id, x, fdp, (const int8_t*)a[1], bias, odp, y);
        break;
      }
      case 20: /* what generated code calls: input, packed weights, table, output, scratch; its ints */
        status = qvanilla_conv2d_nhwc_packed_s8((int8_t*)a[0], (int16_t*)a[1], (int32_t*)a[2], (int8_t*)a[3],
                                                (int8_t*)a[4], n[0], n[1], n[2], n[3], n[4], n[5], n[6], n[7], n[8],
                                                n[9], n[10], n[11], n[12], n[13], n[14], n[15], n[16], n[17]);
        break;
      case 21:
        status = qvanilla_depthwise_conv2d_nhwc_packed_s8((int8_t*)a[0], (int16_t*)a[1], (int32_t*)a[2],
                                                          (int8_t*)a[3], (int8_t*)a[4], n[0], n[1], n[2], n[3], n[4],
                                                          n[5], n[6], n[7], n[8], n[9], n[10], n[11], n[12], n[13],
                                                          n[14], n[15], n[16]);
        break;
      case 22: { /* the _get_buffer_size of entry n[0] for input dims n[1..4], filter dims n[5..8] */
        int32_t (*const sizes[4])(const qvanilla_dims*, const qvanilla_dims*) = {
            qvanilla_conv2d_s8_get_buffer_size, qvanilla_conv2d_packed_s8_get_buffer_size,
            qvanilla_depthwise_conv2d_s8_get_buffer_size, qvanilla_depthwise_conv2d_packed_s8_get_buffer_size};
        const qvanilla_dims in = {n[1], n[2], n[3], n[4]}, fd = {n[5], n[6], n[7], n[8]};
        status = sizes[n[0] & 3](&in, &fd);
        break;
      }
      case 14: case 18: { /* qvanilla_requantize (_tflite if 18) over arrays: acc, multiplier, shift -> result */
        const int32_t *acc = (const int32_t*)a[0], *m = (const int32_t*)a[1], *s = (const int32_t*)a[2];
        int32_t* out = (int32_t*)a[3];
        for (size_t i = 0; i < bytes[3] / sizeof(int32_t); ++i) {
          out[i] = (op == 18 ? qvanilla_requantize_tflite : qvanilla_requantize)(acc[i], m[i], s[i]);
        }
        status = 0;
        break;
      }
      case 99: { /* the harness's self-test: signed overflow for n[0] = INT32_MAX */
        volatile int32_t x = n[0];
        status = x + 1;
        break;
      }
      default: return 5;
    }
    fwrite(&status, sizeof status, 1, stdout);
    for (int i = 0; i < na; ++i) {
      if (a[i] != NULL) fwrite(a[i], 1, bytes[i], stdout);
      free(a[i]);
    }
  }
  return 0;
}
"""

OPS = {"conv2dnchw_general": 0, "conv2dnhwc_general": 1, "depthwise_conv2dnchw": 2, "depthwise_conv2dnhwc": 3,
       "vanilla_get_buffer_size": 4,
       "qvanilla_conv2d_s8": 12, "qvanilla_conv2d_s8_ref": 13, "qvanilla_requantize": 14,
       "qvanilla_conv2d_packed_s8": 15, "qvanilla_depthwise_conv2d_s8": 16, "qvanilla_depthwise_conv2d_packed_s8": 17,
       "qvanilla_requantize_tflite": 18, "qvanilla_depthwise_conv2d_s8_ref": 19, "qvanilla_conv2d_nhwc_packed_s8": 20,
       "qvanilla_depthwise_conv2d_nhwc_packed_s8": 21, "qvanilla_get_buffer_size": 22, "overflow": 99}


def status_codes(header, prefix):
    """{name: value} of the #define PREFIX_NAME <int> lines of a header, and of its enum entries PREFIX_NAME = <int>."""
    return {m.group(1): int(m.group(2))
            for m in re.finditer(rf"^(?:#define |\s+){prefix}_(\w+)(?: | = )\(?(-?\d+)\)?", header.read_text(),
                                 re.MULTILINE)}


V = status_codes(VANILLA / "vanilla_accelerator.h", "VANILLA")
Q = status_codes(QVANILLA / "qvanilla.h", "QVANILLA")


class Call:
    """One call of an entry: ints, floats and arrays (numpy or None for NULL), in the entry's order."""

    scratch = ()  # the indices of arrays that are scratch memory: what is left in them is no result

    def __init__(self, op, arrays, ints, floats=()):
        self.op, self.arrays, self.ints, self.floats = OPS[op], list(arrays), [int(i) for i in ints], list(floats)

    def encode(self):
        parts = [struct.pack("=ii", self.op, len(self.ints)), struct.pack(f"={len(self.ints)}i", *self.ints),
                 struct.pack("=i", len(self.floats)), struct.pack(f"={len(self.floats)}f", *self.floats),
                 struct.pack("=i", len(self.arrays))]
        for a in self.arrays:
            if a is None:
                parts.append(struct.pack("=iq", 0, 0))
            else:
                assert a.size > 0 and a.dtype in (np.float32, np.int8, np.int16, np.int32)
                parts.append(struct.pack("=iq", a.itemsize, a.size) + np.ascontiguousarray(a).tobytes())
        return b"".join(parts)

    def decode(self, data, offset):
        status = struct.unpack_from("=i", data, offset)[0]
        offset += 4
        arrays = []
        for a in self.arrays:
            if a is None:
                arrays.append(None)
                continue
            arrays.append(np.frombuffer(data, a.dtype, a.size, offset).reshape(a.shape).copy())
            offset += a.nbytes
        return status, arrays, offset


class Driver:
    def __init__(self, executable, env=None):
        self.executable, self.env = executable, env

    def run(self, calls):
        """[(status, [arrays after the call])] of each call, in one process."""
        done = subprocess.run([str(self.executable)], input=b"".join(c.encode() for c in calls),
                              capture_output=True, env=self.env, timeout=120)
        report = done.stderr.decode(errors="replace")
        assert done.returncode == 0 and not report, f"{self.executable.name} exited {done.returncode}:\n{report[-6000:]}"
        replies, offset = [], 0
        for call in calls:
            status, arrays, offset = call.decode(done.stdout, offset)
            replies.append((status, arrays))
        assert offset == len(done.stdout)
        return replies


@pytest.fixture(scope="module")
def drivers(tmp_path_factory):
    """{"plain": the libraries as shipped, "sanitized": under ASan + UBSan}."""
    work = tmp_path_factory.mktemp("sanitizers")
    source = work / "driver.c"
    source.write_text(DRIVER)
    common = ["-std=c99", "-Wall", "-Wextra", f"-I{VANILLA}", f"-I{QVANILLA}", f"-I{KIT}", str(source), *map(str, SOURCES)]
    built = {}
    for name, flags in (("plain", ["-O2"]), ("sanitized", ["-O2", *SANITIZE])):
        executable = work / f"driver_{name}"
        done = subprocess.run(["gcc", *flags, "-o", str(executable), *common], capture_output=True, text=True)
        assert done.returncode == 0 and "warning" not in done.stderr, done.stderr
        env = dict(os.environ, **SANITIZER_ENV)
        env.pop("LD_PRELOAD", None)
        built[name] = Driver(executable, env)
    return built


def run_both(drivers, calls):
    """The replies of the sanitized build, which must equal the plain build's bit for bit."""
    plain, sanitized = drivers["plain"].run(calls), drivers["sanitized"].run(calls)
    for call, (ps, pa), (ss, sa) in zip(calls, plain, sanitized):
        assert ps == ss
        for i, (p, s) in enumerate(zip(pa, sa)):
            assert i in call.scratch or (p is None and s is None) or p.tobytes() == s.tobytes()
    return sanitized


# ---------------------------------------------------------------------------------------------
# Vanilla (float32)

# Vanilla's conv engine (the kit's) as shipped (-O2), with the host's vector units and FMA
# (-march=native: fmaf, 8 x 16 register blocks on AVX-512) and with odd register blocks (3 x 6)
# that leave partial blocks everywhere; the rest of the driver as shipped.
VANILLA_BUILDS = {"O2": None, "native": ["-O2", "-march=native"],
                  "odd_blocks": ["-O2", "-DKIT_CONV_F32_MR=3", "-DKIT_CONV_F32_NR=6"]}


@pytest.fixture(scope="module", params=list(VANILLA_BUILDS))
def vdrivers(request, drivers, tmp_path_factory):
    """Like drivers, with the conv engine (kit_conv_f32.c) compiled with one of VANILLA_BUILDS' flags."""
    flags = VANILLA_BUILDS[request.param]
    if flags is None:
        return drivers
    work = tmp_path_factory.mktemp(f"vanilla_{request.param}")
    source = work / "driver.c"
    source.write_text(DRIVER)
    built = {}
    for name, extra in (("plain", []), ("sanitized", SANITIZE)):
        library = work / f"kit_conv_f32_{name}.o"
        done = subprocess.run(["gcc", *flags, *extra, "-std=c99", "-Wall", "-Wextra", "-c", "-o", str(library),
                               f"-I{KIT}", str(SOURCES[0])], capture_output=True, text=True)
        assert done.returncode == 0 and "warning" not in done.stderr, done.stderr
        executable = work / f"driver_{name}"
        done = subprocess.run(["gcc", "-O2", *extra, "-std=c99", f"-I{VANILLA}", f"-I{QVANILLA}", f"-I{KIT}",
                               "-o", str(executable), str(source), str(library), *map(str, SOURCES[1:])],
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        env = dict(os.environ, **SANITIZER_ENV)
        env.pop("LD_PRELOAD", None)
        built[name] = Driver(executable, env)
    return built


UNBOUNDED = (-3.4e38, 3.4e38)


def numpy_conv(ifmap, weights, oh, ow, stride, pad):
    """float64 [oc][oh][ow]: output (y, x) reads input (y*sh - pt + ky, x*sw - pl + kx), zero outside."""
    (sh, sw), (pt, pl) = stride, pad
    oc, ic, kh, kw = weights.shape
    ih, iw = ifmap.shape[1:]
    padded = np.zeros((ic, pt + max(ih, (oh - 1) * sh + kh), pl + max(iw, (ow - 1) * sw + kw)))
    padded[:, pt:pt + ih, pl:pl + iw] = ifmap
    out = np.zeros((oc, oh, ow))
    for y in range(kh):
        for x in range(kw):
            window = padded[:, y:y + (oh - 1) * sh + 1:sh, x:x + (ow - 1) * sw + 1:sw]
            out += np.einsum("oc,chw->ohw", weights[:, :, y, x].astype(np.float64), window)
    return out


def numpy_depthwise(ifmap, weights, oh, ow, stride, pad):
    return np.stack([numpy_conv(ifmap[c:c + 1], weights[c][None, None], oh, ow, stride, pad)[0]
                     for c in range(weights.shape[0])])


def numpy_stage(conv, bias=None, residual=None, slope=None, lo=UNBOUNDED[0], hi=UNBOUNDED[1]):
    v = conv + (0 if bias is None else bias[:, None, None]) + (0 if residual is None else residual)
    if slope is not None:
        v = np.where(v < 0, v * slope[:, None, None], v)
    return np.clip(v, lo, hi)


def to_layout(a, layout):
    return None if a is None else np.ascontiguousarray(a.transpose(1, 2, 0)) if layout == "nhwc" else a


def from_layout(a, layout):
    return a.transpose(2, 0, 1) if layout == "nhwc" else a


def _largest_scratch():
    """The most scratch any Vanilla entry asks for, in any of VANILLA_BUILDS (uma_vanilla.buffer_size's
    mirror of the C, for the largest register blocks): enough for every call."""
    g = dict(ic=8, ih=8, iw=8, oc=8, oh=8, ow=8, kh=3, kw=3, stride_h=1, stride_w=1, pad_top=1, pad_left=1)
    return max(vanilla_buffer_size(depthwise, layout, g) for depthwise in (False, True) for layout in ("nchw", "nhwc"))


SCRATCH = _largest_scratch()


def window_call(layout, ifmap, weights, out_hw, stride=(1, 1), pad=(0, 0), bias=None, residual=None, slope=None,
                lo=UNBOUNDED[0], hi=UNBOUNDED[1], depthwise=False, result=None, scratch=SCRATCH):
    """vanilla_conv2d<layout>_general (or vanilla_depthwise_conv2d<layout>) on NCHW-shaped arrays,
    with ``scratch`` bytes of scratch."""
    oc, ic = weights.shape[0], ifmap.shape[0]
    kh, kw = weights.shape[-2:]
    (ih, iw), (oh, ow) = ifmap.shape[1:], out_hw
    if result is None:
        result = to_layout(np.full((oc, oh, ow), np.nan, np.float32), layout)
    sizes = [ic, ih, iw, oc, oh, ow] if not depthwise else [oc, ih, iw, oh, ow]
    ints = sizes + [kh, kw, stride[0], stride[1], pad[0], pad[1], scratch]
    op = f"depthwise_conv2d{layout}" if depthwise else f"conv2d{layout}_general"
    return Call(op, [to_layout(ifmap, layout), weights, bias, to_layout(residual, layout), slope, result], ints,
                [lo, hi])


def output_size(size, kernel, stride, pad, pad_end):
    return (size + pad + pad_end - kernel) // stride + 1


def assert_matches(got, expected):
    scale = max(1.0, float(np.max(np.abs(expected))))
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=2e-5 * scale)


# (oc, ic, ih, iw, kh, kw, stride, pad top/left, pad bottom/right)
WINDOWS = [
    (1, 1, 1, 1, 1, 1, (1, 1), (0, 0), (0, 0)),
    (4, 3, 8, 8, 3, 3, (1, 1), (1, 1), (1, 1)),             # "same"
    (3, 5, 5, 6, 3, 3, (1, 1), (4, 5), (4, 5)),             # pads beyond the kernel on every side
    (2, 3, 4, 5, 3, 3, (1, 1), (1, 100), (1, 3)),           # a left pad far beyond the tile: rows all zero
    (2, 3, 4, 5, 3, 3, (2, 3), (100, 37), (2, 40)),         # the same, strided; whole rows outside above
    (6, 2, 7, 150, 3, 5, (1, 1), (2, 2), (2, 2)),           # several column tiles with padding at both ends
    (5, 3, 9, 150, 2, 5, (2, 3), (1, 4), (0, 6)),           # the same, strided
    (8, 4, 9, 10, 3, 3, (2, 2), (0, 0), (1, 1)),            # asymmetric "same" of stride 2
    (5, 7, 13, 40, 10, 4, (2, 1), (4, 1), (5, 2)),
    (6, 2, 7, 9, 2, 2, (1, 3), (0, 1), (1, 0)),
    (33, 40, 20, 21, 5, 5, (3, 3), (2, 2), (2, 2)),         # reductions longer than one panel
    (12, 40, 49, 1, 9, 1, (2, 1), (3, 0), (4, 0)),          # one column (audio)
    (3, 2, 30, 1, 3, 1, (1, 1), (5, 0), (6, 0)),            # one column, padding beyond the kernel
    (24, 16, 16, 16, 1, 1, (1, 1), (0, 0), (0, 0)),         # 1x1: one long row (NCHW), matrix product (NHWC)
    (13, 70, 5, 7, 1, 1, (1, 1), (0, 0), (0, 0)),           # 1x1 with channel tails
    (9, 5, 6, 7, 1, 1, (1, 1), (2, 1), (2, 3)),             # 1x1 with padding: border outputs read only zeros
    (24, 16, 16, 16, 1, 1, (2, 2), (0, 0), (0, 0)),
    (2, 2, 2, 2100, 1, 2000, (1, 1), (0, 3), (0, 3)),       # kernel wider than a panel: column chunks
    (10, 6, 12, 32, 3, 3, (1, 1), (1, 1), (1, 1)),          # NCHW rows that fill the lanes, stride 1 and 2
    (9, 5, 11, 64, 3, 3, (2, 2), (1, 1), (1, 1)),
    (8, 7, 6, 6, 3, 3, (1, 1), (1, 1), (1, 1)),             # output channel tails: the half-width kernel,
    (12, 5, 5, 7, 3, 3, (1, 1), (1, 1), (1, 1)),            # a padded one, a whole block and a half
    (24, 6, 7, 5, 3, 3, (1, 1), (0, 0), (0, 0)),
    (40, 30, 4, 9, 3, 3, (1, 1), (1, 1), (1, 1)),           # ... with the reduction in chunks
    (20, 40, 5, 300, 3, 3, (1, 1), (1, 1), (1, 1)),         # a row's window too large: tiles of columns
    (6, 4, 9, 10, 1, 1, (2, 2), (1, 1), (1, 1)),            # strides wider than the kernel, padded
    (7, 3, 13, 17, 3, 3, (4, 4), (1, 2), (1, 1)),
    (3, 2, 5, 4, 3, 300, (1, 1), (1, 150), (1, 150)),       # a window wider than the kernels' reduction
]


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_windows_outside_the_image(vdrivers, layout):
    """Rows and columns outside the input on every side, strides, tiles, 1x1 and one-column paths."""
    calls, expected = [], []
    for i, (oc, ic, ih, iw, kh, kw, stride, pad, pad_end) in enumerate(WINDOWS):
        rng = np.random.default_rng(i)
        ifmap = rng.standard_normal((ic, ih, iw)).astype(np.float32)
        weights = rng.standard_normal((oc, ic, kh, kw)).astype(np.float32)
        oh, ow = (output_size(*a) for a in zip((ih, iw), (kh, kw), stride, pad, pad_end))
        calls.append(window_call(layout, ifmap, weights, (oh, ow), stride, pad))
        expected.append(numpy_conv(ifmap, weights, oh, ow, stride, pad))
    for (status, arrays), want in zip(run_both(vdrivers, calls), expected):
        assert status == V["OK"]
        assert_matches(from_layout(arrays[5], layout), want)


STAGES = [dict(), dict(bias=True), dict(residual=True), dict(slope=True), dict(lo=0.0, hi=6.0),
          dict(bias=True, residual=True, slope=True, lo=-1.0, hi=2.0), dict(bias=True, slope=True, lo=-0.5)]


@pytest.mark.parametrize("shape", [(10, 7, 9, 3, (2, 1), (1, 2)), (40, 11, 32, 3, (1, 1), (1, 1))],
                         ids=["small", "blocks"])
@pytest.mark.parametrize("depthwise", [False, True], ids=["conv", "depthwise"])
@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_every_output_stage(vdrivers, layout, depthwise, shape):
    """Bias, residual and PReLU slope each present or NULL, with and without a clamp, on a small
    map and on one of whole and partial register blocks."""
    rng = np.random.default_rng(3)
    c, ih, iw, k, stride, pad = shape
    ifmap = rng.standard_normal((c, ih, iw)).astype(np.float32)
    weights = rng.standard_normal((c, k, k) if depthwise else (c, c, k, k)).astype(np.float32)
    oh, ow = output_size(ih, k, stride[0], pad[0], pad[0]), output_size(iw, k, stride[1], pad[1], pad[1])
    conv = (numpy_depthwise if depthwise else numpy_conv)(ifmap, weights, oh, ow, stride, pad)
    calls, expected = [], []
    for stage in STAGES:
        parts = dict(bias=rng.standard_normal(c).astype(np.float32) if stage.get("bias") else None,
                     residual=rng.standard_normal((c, oh, ow)).astype(np.float32) if stage.get("residual") else None,
                     slope=rng.uniform(0.05, 0.5, c).astype(np.float32) if stage.get("slope") else None,
                     lo=stage.get("lo", UNBOUNDED[0]), hi=stage.get("hi", UNBOUNDED[1]))
        calls.append(window_call(layout, ifmap, weights, (oh, ow), stride, pad, depthwise=depthwise, **parts))
        expected.append(numpy_stage(conv, **parts))
    for (status, arrays), want in zip(run_both(vdrivers, calls), expected):
        assert status == V["OK"]
        assert_matches(from_layout(arrays[5], layout), want)


# (channels, ih, iw, kh, kw, stride, pad top/left, pad bottom/right)
DEPTHWISE = [
    (24, 16, 16, 3, 3, (1, 1), (1, 1), (1, 1)),
    (28, 16, 16, 3, 3, (2, 2), (0, 0), (1, 1)),
    (3, 9, 11, 5, 5, (1, 1), (6, 7), (6, 7)),               # pads beyond the kernel
    (150, 8, 7, 3, 3, (1, 1), (0, 0), (0, 0)),              # channel blocks with a tail
    (16, 20, 50, 7, 7, (2, 3), (3, 2), (3, 4)),
    (9, 4, 70, 1, 3, (1, 1), (0, 100), (0, 1)),             # a left pad far beyond the tile
    (5, 6, 6, 8, 8, (1, 1), (7, 7), (7, 7)),                # 64 taps, the window buffer's limit
    (4, 3, 80, 1, 64, (1, 2), (0, 30), (0, 30)),
    (4, 80, 3, 64, 1, (3, 1), (40, 0), (2, 0)),
    (28, 17, 17, 3, 3, (2, 2), (1, 1), (1, 1)),             # stride 2, a row's phases starting on odd columns
    (20, 9, 31, 5, 5, (2, 2), (2, 2), (2, 2)),
    (12, 10, 13, 3, 3, (3, 4), (1, 1), (1, 1)),             # strides wider than the kernel
    (10, 9, 9, 1, 1, (2, 2), (0, 0), (0, 0)),
    (40, 6, 7, 3, 3, (1, 1), (1, 1), (1, 1)),               # channel blocks of 16 + 16 + 8
    (300, 5, 6, 3, 3, (1, 1), (1, 1), (1, 1)),              # too many channels for one panel: groups
    (16, 4, 300, 3, 3, (1, 1), (1, 1), (1, 1)),             # a row too wide for one panel: tiles
    (5, 3, 200, 3, 3, (1, 2), (1, 1), (1, 1)),
    (24, 49, 1, 9, 1, (1, 1), (4, 0), (4, 0)),              # one column (audio), read as one row
    (20, 98, 1, 9, 1, (2, 1), (3, 0), (4, 0)),
    (3, 30, 1, 5, 1, (1, 1), (6, 0), (7, 0)),
]


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_depthwise_windows_outside_the_image(vdrivers, layout):
    calls, expected = [], []
    for i, (c, ih, iw, kh, kw, stride, pad, pad_end) in enumerate(DEPTHWISE):
        rng = np.random.default_rng(100 + i)
        ifmap = rng.standard_normal((c, ih, iw)).astype(np.float32)
        weights = rng.standard_normal((c, kh, kw)).astype(np.float32)
        bias = rng.standard_normal(c).astype(np.float32)
        oh, ow = (output_size(*a) for a in zip((ih, iw), (kh, kw), stride, pad, pad_end))
        calls.append(window_call(layout, ifmap, weights, (oh, ow), stride, pad, bias, lo=-1.0, hi=2.0,
                                 depthwise=True))
        expected.append(numpy_stage(numpy_depthwise(ifmap, weights, oh, ow, stride, pad), bias, lo=-1.0, hi=2.0))
    for (status, arrays), want in zip(run_both(vdrivers, calls), expected):
        assert status == V["OK"]
        assert_matches(from_layout(arrays[5], layout), want)


INT_MAX, INT_MIN = 2**31 - 1, -2**31
NAN = float("nan")


def one(dtype=np.float32):
    """A one-element array: a call rejected before it reads or writes must leave it alone (ASan
    reports any access past it)."""
    return np.full(1, np.nan if dtype == np.float32 else 77, dtype)


def vanilla_errors():
    """(expected code name, Call) for each kind of bad argument of every Vanilla entry family."""
    base = dict(oc=2, iw=4, ih=4, ic=3, kh=3, kw=3, ow=2, oh=2, sw=1, sh=1, pl=0, pt=0, scratch=SCRATCH)
    cases = []

    def add(code, family, arrays=None, floats=UNBOUNDED, **changed):
        g = dict(base, **changed)
        pointers = dict(ifmap=one(), weights=one(), result=one(), bias=None, residual=None, slope=None)
        pointers.update(arrays or {})
        for layout in ("nchw", "nhwc"):
            names = (["ic", "ih", "iw", "oc"] if family == "general" else ["oc", "ih", "iw"]) + [
                "oh", "ow", "kh", "kw", "sh", "sw", "pt", "pl", "scratch"]
            op = f"conv2d{layout}_general" if family == "general" else f"depthwise_conv2d{layout}"
            arrays_ = [pointers[k] for k in ("ifmap", "weights", "bias", "residual", "slope", "result")]
            cases.append((code, Call(op, arrays_, [g[k] for k in names], floats)))

    for family in ("general", "depthwise"):
        for role in ("ifmap", "weights", "result"):
            add("EINVAL", family, {role: None})
        for size in ("oc", "iw", "ih", "kh", "kw", "ow", "oh") + (("ic",) if family == "general" else ()):
            add("ESIZE", family, **{size: 0})
            add("ESIZE", family, **{size: INT_MIN})
        add("ESTRIDE", family, sw=0)
        add("ESTRIDE", family, sh=-1)
        add("EPAD", family, pl=-1)
        add("EPAD", family, pt=INT_MIN)
        add("ECLAMP", family, floats=(1.0, 0.0))
        add("ECLAMP", family, floats=(NAN, 1.0))
        add("ECLAMP", family, floats=(0.0, NAN))
        add("ERANGE", family, oh=3, sh=2**30)              # (oh-1)*sh + kh overflows int arithmetic
        add("ERANGE", family, ow=2**30, kw=3)
        add("ERANGE", family, ow=2, sw=INT_MAX)
        add("ERANGE", family, ih=INT_MAX, iw=INT_MAX, ic=INT_MAX, oc=INT_MAX)  # tensors beyond any address space
    add("ERANGE", "general", kh=50000, kw=50000, ih=4, iw=4, oh=1, ow=1)  # kh*kw overflows int
    add("ETAPS", "depthwise", kh=9, kw=9)
    add("ETAPS", "depthwise", kh=65, kw=1)
    add("ETAPS", "depthwise", kh=65536, kw=65536)           # kh*kw overflows int
    for family in ("general", "depthwise"):
        add("EBUFFER", family, scratch=0)  # no scratch
        add("EBUFFER", family, scratch=64)  # too little
        add("ESTRIDE", family, scratch=0, sw=0)  # the scratch is checked last
    # Several problems at once: the first in the order of the header's list.
    add("EINVAL", "general", {"ifmap": None}, oc=0, sw=0)
    add("ESIZE", "general", oc=0, sw=0, pl=-1)
    add("ESTRIDE", "depthwise", sw=0, pl=-1, kh=9, kw=9)
    add("EPAD", "general", floats=(1.0, 0.0), pl=-1)
    return cases


@pytest.mark.parametrize("depthwise", [False, True], ids=["conv", "depthwise"])
@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_pads_as_large_as_an_int(vdrivers, layout, depthwise):
    """Every window entirely in the padding (left, top, or right/bottom far past the image): the
    output is the output stage of zero, and no index or pointer leaves its tensor."""
    rng = np.random.default_rng(8)
    c, ih, iw, k = 3, 4, 5, 3
    ifmap = rng.standard_normal((c, ih, iw)).astype(np.float32)
    weights = rng.standard_normal((c, k, k) if depthwise else (c, c, k, k)).astype(np.float32)
    bias = rng.standard_normal(c).astype(np.float32)
    windows = [((2, 3), (1, 1), (0, INT_MAX)), ((3, 2), (2, 1), (INT_MAX, 0)), ((2, 2), (3, 5), (INT_MAX, INT_MAX)),
               ((70, 1), (1, 1), (INT_MAX - 5, 0)),
               ((2, 2), (2**29, 2**29), (0, 0))]  # no padding, but the second row and column are 2^29 away
    calls = [window_call(layout, ifmap, weights, out_hw, stride, pad, bias, depthwise=depthwise)
             for out_hw, stride, pad in windows]
    first = (numpy_depthwise if depthwise else numpy_conv)(ifmap, weights, 1, 1, (1, 1), (0, 0))[:, 0, 0]
    for (_, _, pad), (status, arrays) in zip(windows, run_both(vdrivers, calls)):
        assert status == V["OK"]
        got = from_layout(arrays[5], layout)
        expected = np.broadcast_to(bias[:, None, None], got.shape).copy()
        if pad == (0, 0):  # only the first output reads the image
            expected[:, 0, 0] += first
        assert_matches(got, expected)


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_scratch_of_exactly_get_buffer_size(vdrivers, layout):
    """Each call with a scratch of exactly its entry's _get_buffer_size (the driver's malloc: ASan
    sees any byte beyond it) computes; one byte less is VANILLA_EBUFFER, the output untouched."""
    shapes = [(oc, ic, ih, iw, kh, kw, stride, pad, depthwise) for oc, ic, ih, iw, kh, kw, stride, pad, _ in WINDOWS[::3]
              for depthwise in (False, True) if not depthwise or kh * kw <= 64]
    entry = {"nchw": 0, "nhwc": 1}[layout]
    size_calls = []
    for oc, ic, ih, iw, kh, kw, stride, pad, depthwise in shapes:
        c = oc if depthwise else ic
        oh, ow = (output_size(*a) for a in zip((ih, iw), (kh, kw), stride, pad, pad))
        size_calls.append(Call("vanilla_get_buffer_size", [], [entry + 2 * depthwise, *stride, *pad, 1, ih, iw, c,
                                                               oc, kh, kw, 1 if depthwise else c, 1, oh, ow, oc],
                               UNBOUNDED))
    sizes = [status for status, _ in run_both(vdrivers, size_calls)]
    assert all(size > 0 for size in sizes) and len(set(sizes)) > 1, sizes
    calls, expected = [], []
    for i, ((oc, ic, ih, iw, kh, kw, stride, pad, depthwise), size) in enumerate(zip(shapes, sizes)):
        rng = np.random.default_rng(200 + i)
        ifmap = rng.standard_normal((oc if depthwise else ic, ih, iw)).astype(np.float32)
        weights = rng.standard_normal((oc, kh, kw) if depthwise else (oc, ic, kh, kw)).astype(np.float32)
        oh, ow = (output_size(*a) for a in zip((ih, iw), (kh, kw), stride, pad, pad))
        for scratch in (size, size - 1):
            calls.append(window_call(layout, ifmap, weights, (oh, ow), stride, pad, depthwise=depthwise,
                                     scratch=scratch))
            expected.append((scratch == size, (numpy_depthwise if depthwise else numpy_conv)(ifmap, weights, oh, ow,
                                                                                           stride, pad)))
    for (status, arrays), (enough, want) in zip(run_both(vdrivers, calls), expected):
        if enough:
            assert status == V["OK"]
            assert_matches(from_layout(arrays[5], layout), want)
        else:
            assert status == V["EBUFFER"] and np.isnan(arrays[5]).all()


def test_vanilla_status_codes_are_distinct():
    assert V["OK"] == 0
    errors = {k: v for k, v in V.items() if k.startswith("E")}
    assert set(errors) == {"EINVAL", "ESIZE", "ESTRIDE", "EPAD", "ECLAMP", "EEVEN", "ETAPS", "ERANGE", "EBUFFER"}
    assert len(set(errors.values())) == len(errors) and 0 not in errors.values()


def test_vanilla_rejects_each_bad_argument_with_its_code(drivers):
    cases = vanilla_errors()
    for (code, call), (status, arrays) in zip(cases, run_both(drivers, [c for _, c in cases])):
        assert status == V[code], (code, call.op, call.ints, call.floats)
        for before, after in zip(call.arrays, arrays):
            assert before is None or before.tobytes() == after.tobytes(), "an array changed on error"


# ---------------------------------------------------------------------------------------------
# QVanilla (int8)

QNAMES = ["ih", "iw", "ic", "oh", "ow", "oc", "kh", "kw", "stride_h", "stride_w", "pad_top", "pad_left",
          "input_zp", "weight_zp", "output_zp", "act_min", "act_max", "rounding"]
# The struct entries (the API) and the plain ones' reference kernels (c/reference), called with
# dims, params, quant and ctx; what generated code calls (the header's static inline functions
# that fill the structs), called with its positional ints.
QSTRUCT = ["qvanilla_conv2d_s8", "qvanilla_conv2d_packed_s8", "qvanilla_depthwise_conv2d_s8",
           "qvanilla_depthwise_conv2d_packed_s8"]
QREFERENCES = ["qvanilla_conv2d_s8_ref", "qvanilla_depthwise_conv2d_s8_ref"]
QCALLS = {
    "qvanilla_conv2d_nhwc_packed_s8": [n for n in QNAMES if n != "weight_zp"],
    "qvanilla_depthwise_conv2d_nhwc_packed_s8": [n for n in QNAMES if n not in ("oc", "weight_zp")],
}
QDENSE = ["qvanilla_conv2d_s8", "qvanilla_conv2d_packed_s8", "qvanilla_conv2d_nhwc_packed_s8", "qvanilla_conv2d_s8_ref"]
QDEPTHWISE = ["qvanilla_depthwise_conv2d_s8", "qvanilla_depthwise_conv2d_packed_s8",
              "qvanilla_depthwise_conv2d_nhwc_packed_s8", "qvanilla_depthwise_conv2d_s8_ref"]
QNULL = {"ctx": 1, "params": 2, "quant": 4, "input_dims": 8, "filter_dims": 16, "output_dims": 32}
QMISALIGNED = 64  # ctx->buf one byte past the scratch array's start


def qnames(entry):
    """The names of QNAMES an entry reads (a depthwise entry's channels are "ic"; packed weights have no zero point)."""
    return [n for n in QNAMES if not (n == "oc" and "depthwise" in entry or n == "weight_zp" and "packed" in entry)]


def qkind(entry):
    """The entry's kind as scratch.buffer_size and the _get_buffer_size functions name it."""
    return entry.replace("qvanilla_", "").replace("_nhwc", "").replace("_ref", "")


def qscratch(entry, g):
    """The scratch array an entry gets: exactly its size (ASan sees one byte too far), None if 0."""
    size = 0 if entry in QREFERENCES else scratch.buffer_size(qkind(entry), g["kh"], g["kw"], g["ic"], g["oc"])
    return np.zeros(size, np.int8) if size else None


def struct_ints(entry, g, size, bits=0):
    """The driver's ints of a struct entry: dims (n, h, w, c: input, filter, output), params, ctx size, bits;
    g's n, filter_n, filter_c, output_c override the dims' batch and channels."""
    depthwise = "depthwise" in entry
    channels = g["ic"] if depthwise else g["oc"]
    dims = [g.get("n", 1), g["ih"], g["iw"], g["ic"], g.get("filter_n", 1 if depthwise else g["oc"]), g["kh"], g["kw"],
            g.get("filter_c", g["ic"]), 1, g["oh"], g["ow"], g.get("output_c", channels)]
    return dims + [g[k] for k in QNAMES[8:]] + [size, bits]


def exact_requantize(acc, multiplier, shift):
    """Python's exact requantize for any shift (beyond +-100 the result no longer changes)."""
    return quantization.requantize(int(acc), int(multiplier), max(-100, min(100, int(shift))))


def tflite_requantize(acc, multiplier, shift):
    """TFLite's MultiplyByQuantizedMultiplier (gemmlowp's SaturatingRoundingDoublingHighMul, then
    RoundingDivideByPOT) in Python integers, as the header defines it for any shift: the int32
    multiply by 2^left wraps (0 from left = 32 on), the division by 2^right rounds half away
    from zero (0 from right = 32 on; right is cut at 40 so that the mask stays small)."""
    acc, multiplier, shift = int(acc), int(multiplier), int(shift)
    left, right = min(max(shift, 0), 32), min(max(-shift, 0), 40)
    x = ((acc << left) + 2**31) % 2**32 - 2**31
    if x == multiplier == INT_MIN:
        high = INT_MAX
    else:
        ab = x * multiplier
        nudged = ab + ((1 << 30) if ab >= 0 else 1 - (1 << 30))
        high = nudged // 2**31 if nudged >= 0 else -(-nudged // 2**31)  # C's division truncates
    mask = (1 << right) - 1
    threshold = (mask >> 1) + (1 if high < 0 else 0)
    return (high >> right) + (1 if (high & mask) > threshold else 0)  # Python's & and >>: two's complement


QROUNDINGS = ["upward", "tflite"]


def rounding_code(name):
    return Q[f"ROUNDING_{name.upper()}"]


def requantizer(q):
    """The requantize of q's rounding (upward if q names none)."""
    return tflite_requantize if q.get("rounding", 0) == Q["ROUNDING_TFLITE"] else exact_requantize


def numpy_qconv(x, w, params, oh, ow, q):
    """int8 reference: padding holds the input zero point; the int32 accumulator wraps around.
    ``w`` is HWIO, or [kh][kw][channels] for a depthwise conv."""
    ih, iw, ic = x.shape
    depthwise = w.ndim == 3
    kh, kw, oc = w.shape[0], w.shape[1], w.shape[-1]
    sh, sw, pt, pl = q["stride_h"], q["stride_w"], q["pad_top"], q["pad_left"]
    padded = np.full((pt + max(ih, (oh - 1) * sh + kh), pl + max(iw, (ow - 1) * sw + kw), ic), q["input_zp"], np.int64)
    padded[pt:pt + ih, pl:pl + iw] = x
    acc = np.broadcast_to(params[0].astype(np.int64), (oh, ow, oc)).copy()
    for ky in range(kh):
        for kx in range(kw):
            window = padded[ky:ky + (oh - 1) * sh + 1:sh, kx:kx + (ow - 1) * sw + 1:sw] - q["input_zp"]
            tap = w[ky, kx].astype(np.int64) - q["weight_zp"]
            acc += window * tap if depthwise else np.einsum("hwc,co->hwo", window, tap)
    return numpy_output_stage(acc, params, q)


def numpy_output_stage(acc, params, q):
    """clamp(output_zp + requantize(acc wrapped to int32)) per channel (the last axis)."""
    acc = (acc + 2**31) % 2**32 - 2**31
    out = np.empty(acc.shape, np.int64)
    requantize = requantizer(q)
    for index in np.ndindex(*acc.shape):
        o = index[-1]
        out[index] = requantize(acc[index], params[1][o], params[2][o]) + q["output_zp"]
    return np.clip(out, q["act_min"], q["act_max"]).astype(np.int8)


def qcall(entry, x, w, params, oh, ow, q):
    """A call of ``entry`` on a graph's tensors: x [ih][iw][ic] and HWIO (or [kh][kw][channels])
    weights w with their zero points, params [bias, multiplier, shift]; packed entries get the
    weights and biases packed as the compiler packs them (uma_qvanilla.packing), and every entry
    the scratch its _get_buffer_size asks for (uma_qvanilla.scratch's mirror)."""
    (ih, iw, ic), (kh, kw), oc = x.shape, w.shape[:2], w.shape[-1]
    if "packed" in entry:
        pack = packing.pack_depthwise if "depthwise" in entry else packing.pack_conv
        w, bias = pack(w, q["weight_zp"], q["input_zp"], params[0])
        params = np.stack([bias, params[1], params[2]]).astype(np.int32)
    g = dict(dict(ih=ih, iw=iw, ic=ic, oh=oh, ow=ow, oc=oc, kh=kh, kw=kw, rounding=Q["ROUNDING_UPWARD"]), **q)
    output = np.full((oh, ow, oc), 77, np.int8)
    work = qscratch(entry, g)
    size = 0 if work is None else work.size
    if entry in QCALLS:
        call = Call(entry, [x, w, params, output, work], [size] + [g[k] for k in QCALLS[entry]])
        call.scratch = (4,)
    else:
        call = Call(entry, [x, w, params[0].copy(), output, params[1].copy(), params[2].copy(), work],
                    struct_ints(entry, g, size))
        call.scratch = (6,)
    return call


def qparams(rng, oc, shifts, multipliers=None, biases=None):
    multipliers = rng.integers(1 << 30, 1 << 31, oc) if multipliers is None else multipliers
    biases = rng.integers(-5000, 5000, oc) if biases is None else biases
    return np.stack([np.resize(biases, oc), np.resize(multipliers, oc), np.resize(shifts, oc)]).astype(np.int32)


def qcases(depthwise, rows, seed, rounding):
    """(call, expected output) of each entry of the kind (dense or depthwise) for each row
    (ih, iw, ic, oc, kh, kw, stride, pad, pad_end, (input_zp, weight_zp, output_zp), (act_min, act_max),
    qparams' keywords); a depthwise row's oc is its ic."""
    rng = np.random.default_rng(seed)
    cases = []
    for ih, iw, ic, oc, kh, kw, stride, pad, pad_end, zps, act, params in rows:
        x = rng.integers(-128, 128, (ih, iw, ic)).astype(np.int8)
        w = rng.integers(-128, 128, (kh, kw, ic) if depthwise else (kh, kw, ic, oc)).astype(np.int8)
        p = qparams(rng, oc, **params)
        oh, ow = (output_size(*a) for a in zip((ih, iw), (kh, kw), stride, pad, pad_end))
        q = dict(stride_h=stride[0], stride_w=stride[1], pad_top=pad[0], pad_left=pad[1], input_zp=zps[0],
                 weight_zp=zps[1], output_zp=zps[2], act_min=act[0], act_max=act[1], rounding=rounding_code(rounding))
        want = numpy_qconv(x, w, p, oh, ow, q)
        for entry in QDEPTHWISE if depthwise else QDENSE:
            cases.append((qcall(entry, x, w, p, oh, ow, q), want))
    return cases


def qconv_cases(rounding):
    return qcases(False, [
        # padding beyond the kernel on every side, strides, zero points and shifts at their range's ends
        (7, 9, 5, 12, 3, 3, (2, 3), (4, 5), (4, 6), (-128, 127, 127), (-128, 127),
         dict(shifts=[-31, 30, 0, -5, 30, -31], multipliers=[INT_MAX, 1, 1 << 30, INT_MIN, 3, 1 << 30])),
        (6, 6, 3, 8, 3, 3, (1, 1), (1, 1), (1, 1), (127, -128, -128), (0, 6),
         dict(shifts=[30, -31, 1, 2, -1, 0, 29, -30], multipliers=[1, INT_MAX, 5, 1 << 29, 0, INT_MAX, 2, 1 << 30])),
        # biases at int32's ends: the accumulator wraps around (as a two's-complement adder would)
        (4, 4, 2, 4, 2, 2, (1, 1), (0, 0), (1, 1), (0, 0, 0), (-128, 127),
         dict(shifts=[0, 0, 30, -31], multipliers=[1 << 30, INT_MAX, INT_MAX, INT_MAX],
              biases=[INT_MAX, INT_MIN, INT_MAX - 10, INT_MIN + 10])),
        (2, 2, 3, 1030, 1, 1, (1, 1), (0, 0), (0, 0), (3, -2, 5), (-100, 100), dict(shifts=[-3, 0, -31, 30])),
        (1, 1, 1, 1, 1, 1, (1, 1), (0, 0), (0, 0), (0, 0, 0), (3, 3), dict(shifts=[0])),
        (5, 1, 4, 6, 9, 1, (2, 1), (3, 0), (4, 0), (-1, 0, -128), (-128, 127), dict(shifts=[-8, -9])),
        # tiles of windows across output rows, odd pixel counts, channels not a multiple of 4
        (9, 13, 16, 13, 3, 3, (1, 1), (1, 1), (1, 1), (5, 0, -3), (-128, 127), dict(shifts=[-9, -10, -8])),
        (3, 70, 40, 7, 1, 3, (1, 2), (0, 30), (0, 31), (-7, 2, 0), (-20, 90), dict(shifts=[-7])),
        (11, 1, 104, 9, 3, 1, (1, 1), (1, 0), (1, 0), (4, -3, 1), (-128, 127), dict(shifts=[-10, -11])),
        # the longest windows of the fast path (4096 entries, two per tile), and longer ones (direct loops)
        (2, 4, 512, 5, 2, 4, (1, 1), (0, 1), (1, 2), (9, -1, 2), (-128, 127), dict(shifts=[-12])),
        (4, 3, 520, 6, 3, 3, (2, 1), (1, 1), (1, 1), (-9, 1, -2), (-128, 127), dict(shifts=[-13, 2])),
        # 1x1 kernels over runs of contiguous pixels (ic a multiple of 8), and where the padding
        # interrupts the runs; channels beyond one chunk of 64 and a partial block of 16
        (6, 9, 16, 21, 1, 1, (1, 1), (0, 0), (0, 0), (3, 0, -4), (-128, 127),
         dict(shifts=[-9, -8, 0, -12], multipliers=[1 << 30, -(1 << 30) - 7, INT_MAX, INT_MIN, 3 << 28])),
        (5, 7, 8, 70, 1, 1, (2, 1), (1, 2), (1, 1), (-5, 0, 7), (-20, 100), dict(shifts=[-10, -7, -1])),
    ], seed=9, rounding=rounding)


def qdepthwise_cases(rounding):
    return qcases(True, [
        (7, 9, 5, 5, 3, 3, (2, 3), (4, 5), (4, 6), (-128, 127, 127), (-128, 127),
         dict(shifts=[-31, 30, 0, -5, 30], multipliers=[INT_MAX, 1, 1 << 30, INT_MIN, 3])),
        (6, 6, 16, 16, 3, 3, (1, 1), (1, 1), (1, 1), (127, -128, -128), (0, 6),
         dict(shifts=[30, -31, 1, 2, -1, 0, 29, -30], multipliers=[1, INT_MAX, 5, 1 << 29, 0, INT_MAX, 2, 1 << 30])),
        (4, 4, 17, 17, 2, 2, (1, 1), (0, 0), (1, 1), (0, 0, 0), (-128, 127),
         dict(shifts=[0, 0, 30, -31], multipliers=[1 << 30, INT_MAX, INT_MAX, INT_MAX],
              biases=[INT_MAX, INT_MIN, INT_MAX - 10, INT_MIN + 10])),
        (1, 1, 1, 1, 1, 1, (1, 1), (0, 0), (0, 0), (0, 0, 0), (3, 3), dict(shifts=[0])),
        # keyword spotting's 9x1 on 120 channels (7 vectors of 16 and a tail of 8), strided
        (13, 1, 120, 120, 9, 1, (2, 1), (4, 0), (4, 0), (-6, 0, 3), (-128, 127), dict(shifts=[-8, -9])),
        # two blocks of channels (256 + 44), with a tail
        (3, 4, 300, 300, 3, 3, (1, 1), (1, 1), (1, 1), (2, -5, 0), (-50, 127), dict(shifts=[-9])),
        # more taps than one pointer group (64): two groups, and a tail of channels
        (5, 6, 20, 20, 9, 9, (1, 2), (4, 4), (4, 4), (1, 3, -1), (-128, 127), dict(shifts=[-12, -11])),
        (4, 80, 7, 7, 1, 65, (3, 1), (0, 40), (0, 30), (-3, 4, 9), (-128, 127), dict(shifts=[-10])),
        # the plain entry beyond its weight buffer (4096 int16): one channel at a time
        (3, 3, 3, 3, 65, 65, (1, 1), (62, 63), (2, 1), (-2, 7, 0), (-128, 127), dict(shifts=[-14])),
        # weights in [-128, 127] (two taps at a time): more taps than a group, an odd last group,
        # a tail of channels; single columns (pixels of several rows share an output stage)
        (3, 70, 24, 24, 1, 67, (1, 1), (0, 33), (0, 33), (2, 0, -3), (-128, 127),
         dict(shifts=[-11, -10], multipliers=[1 << 30, -(1 << 30) - 5, INT_MIN])),
        (9, 1, 8, 8, 3, 1, (1, 1), (1, 0), (1, 0), (0, 0, 5), (-100, 120), dict(shifts=[-9, 0])),
        (11, 1, 40, 40, 4, 1, (2, 1), (2, 0), (1, 0), (-128, 0, 127), (-128, 127), dict(shifts=[-8, -31, 30, -20])),
    ], seed=10, rounding=rounding)


@pytest.mark.parametrize("rounding", QROUNDINGS)
@pytest.mark.parametrize("kind", ["conv", "depthwise"])
def test_qvanilla_at_the_ends_of_every_range(drivers, kind, rounding):
    """Every entry (plain, struct, packed) equals the reference bit for bit, in either rounding."""
    cases = qconv_cases(rounding) if kind == "conv" else qdepthwise_cases(rounding)
    for (call, want), (status, arrays) in zip(cases, run_both(drivers, [c for c, _ in cases])):
        assert status == Q["OK"], (call.op, call.ints)
        assert np.array_equal(arrays[3], want), (call.op, call.ints)


def output_changes(multiplier, shift, output_zp, act_min, act_max, requantize=exact_requantize, levels=()):
    """The accumulators (int32) where the clamped output of a channel changes: for each of act_min,
    act_max, their middle and ``levels``, the first s whose output is past it (binary search: the
    output is monotonic in s), if there is one."""
    def out(s):
        return min(act_max, max(act_min, output_zp + requantize(s, multiplier, shift)))

    ends, rising = [], out(INT_MAX) > out(INT_MIN)
    for level in {act_min, act_max, (act_min + act_max) // 2, *levels}:
        past = (lambda s: out(s) > level) if rising else (lambda s: out(s) < level)
        if not past(INT_MAX) or past(INT_MIN):
            continue
        lo, hi = INT_MIN, INT_MAX  # past(hi), not past(lo)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if past(mid) else (mid, hi)
        ends.append(hi)
    return ends


@pytest.mark.parametrize("rounding", QROUNDINGS)
@pytest.mark.parametrize("family", ["per-channel", "mixed", "extreme"])
def test_qvanilla_output_stage_where_outputs_change(drivers, family, rounding):
    """The vectorised output stage where the clamped outputs change: a 1x1 conv of one input
    channel of weight 1 whose 256 pixels hold every int8 value, with biases that put each output
    channel's accumulators around one of its changes (at act_min, act_max or in between; in
    TFLite's rounding also from requantized -2 to -1, -1 to 0 and 0 to 1, where its ties round
    away from zero), or where the int32 accumulator wraps; the channels of a block with differing
    shifts and signs, blocks where some channel cannot take the vectorised stage (finish()); dense
    (37 and 70 channels: a partial block, two chunks) and depthwise entries."""
    rng = np.random.default_rng({"per-channel": 21, "mixed": 22, "extreme": 23}[family])
    code = rounding_code(rounding)
    requantize = requantizer(dict(rounding=code))
    calls, expected = [], []
    for oc, (input_zp, output_zp), (act_min, act_max) in [(37, (0, 0), (-128, 127)), (70, (-7, 12), (-3, 6)),
                                                          (37, (100, -128), (-128, 127)), (37, (-128, 3), (0, 6))]:
        if family == "per-channel":  # TFLite's: normalised multipliers, a layer's shifts
            multipliers = rng.integers(1 << 30, 1 << 31, oc) * rng.choice([1, 1, 1, -1], oc)
            shifts = rng.integers(-12, 1, oc)
        elif family == "mixed":  # now and then a channel that does not qualify
            odd = rng.random(oc) < 0.08
            multipliers = np.where(odd, rng.integers(1, 1 << 12, oc), rng.integers(1 << 30, 1 << 31, oc))
            shifts = np.where(odd, rng.integers(-31, 31, oc), rng.integers(-9, -5, oc))
        else:
            multipliers = rng.choice([0, 1, -1, INT_MIN, INT_MAX, 1 << 30, -(1 << 30), 3], oc)
            shifts = rng.choice([-31, -20, -1, 0, 1, 30], oc)
        biases = []
        levels = (output_zp - 2, output_zp - 1, output_zp) if rounding == "tflite" else ()
        for m, s in zip(multipliers, shifts):
            ends = output_changes(int(m), int(s), output_zp, act_min, act_max, requantize, levels)
            target = int(rng.choice(ends)) if ends and rng.random() < 0.9 else int(rng.integers(INT_MIN, INT_MAX))
            if rng.random() < 0.05:
                target = INT_MAX - 60  # the accumulators wrap around
            biases.append(((target + input_zp + 2**31) % 2**32) - 2**31)  # s = bias + (x - input_zp) * 1
        params = np.stack([biases, multipliers, shifts]).astype(np.int64).astype(np.int32)
        q = dict(stride_h=1, stride_w=1, pad_top=0, pad_left=0, input_zp=input_zp, weight_zp=0, output_zp=output_zp,
                 act_min=act_min, act_max=act_max, rounding=code)
        sweep = np.arange(-128, 128).astype(np.int8).reshape(16, 16, 1)
        dense_w = np.ones((1, 1, 1, oc), np.int8)
        want = numpy_qconv(sweep, dense_w, params, 16, 16, q)
        for entry in QDENSE:
            calls.append(qcall(entry, sweep, dense_w, params, 16, 16, q))
            expected.append(want)
        for entry in QDEPTHWISE:
            calls.append(qcall(entry, np.repeat(sweep, oc, axis=2), np.ones((1, 1, oc), np.int8), params, 16, 16, q))
            expected.append(want)
    for call, want, (status, arrays) in zip(calls, expected, run_both(drivers, calls)):
        assert status == Q["OK"], (call.op, call.ints)
        assert np.array_equal(arrays[3], want), (call.op, call.ints)


@pytest.mark.parametrize("rounding", QROUNDINGS)
@pytest.mark.parametrize("kind", ["conv", "depthwise"])
def test_qvanilla_pads_as_large_as_an_int(drivers, kind, rounding):
    """Windows entirely in the padding, far past the image on any side: the output is the output
    stage of the bias alone, and no index or pointer leaves its tensor.  A second table of biases
    and multipliers at int32's ends: the outputs in the padding requantize the biases themselves,
    among them TFLite's saturating high multiply (INT32_MIN by INT32_MIN, directly or through a
    left shift that wraps)."""
    rng = np.random.default_rng(12)
    c, ih, iw, k = 5, 4, 5, 3
    x = rng.integers(-128, 128, (ih, iw, c)).astype(np.int8)
    w = rng.integers(-128, 128, (k, k, c) if kind == "depthwise" else (k, k, c, c)).astype(np.int8)
    p = qparams(rng, c, shifts=[-6, -7])
    extreme = qparams(rng, c, shifts=[0, 1, 30, -31, 0], multipliers=[INT_MIN, INT_MIN, INT_MAX, INT_MIN, INT_MIN],
                      biases=[INT_MIN, 1 << 30, INT_MIN, -1, INT_MAX])
    zps = dict(input_zp=-17, weight_zp=3, output_zp=4, act_min=-128, act_max=127, rounding=rounding_code(rounding))
    windows = [((2, 3), (1, 1), (0, INT_MAX)), ((3, 2), (2, 1), (INT_MAX, 0)), ((2, 2), (3, 5), (INT_MAX, INT_MAX)),
               ((70, 1), (1, 1), (INT_MAX - 5, 0)),
               ((2, 2), (2**29, 2**29), (0, 0))]  # no padding, but the second row and column are 2^29 away
    calls, expected = [], []
    for params in (p, extreme):
        sums = exact_sums(x, w, params, zps)  # of the one output that reads the image
        for (oh, ow), stride, pad in windows:
            q = dict(stride_h=stride[0], stride_w=stride[1], pad_top=pad[0], pad_left=pad[1], **zps)
            acc = np.broadcast_to(params[0].astype(np.int64), (oh, ow, c)).copy()
            if pad == (0, 0):
                acc[0, 0] = sums
            want = numpy_output_stage(acc, params, q)
            for entry in QDEPTHWISE if kind == "depthwise" else QDENSE:
                calls.append(qcall(entry, x, w, params, oh, ow, q))
                expected.append(want)
    for call, want, (status, arrays) in zip(calls, expected, run_both(drivers, calls)):
        assert status == Q["OK"], (call.op, call.ints)
        assert np.array_equal(arrays[3], want), (call.op, call.ints)


def exact_sums(x, w, params, q):
    """bias + sum (x - input_zp) * (w - weight_zp) of the window at the input's top left corner."""
    kh, kw = w.shape[:2]
    window = x[:kh, :kw].astype(np.int64) - q["input_zp"]
    taps = w.astype(np.int64) - q["weight_zp"]
    sums = (window * taps).sum(axis=(0, 1)) if w.ndim == 3 else np.einsum("hwc,hwco->o", window, taps)
    return params[0].astype(np.int64) + sums


INT32_ENDS = np.array([INT_MIN, INT_MIN + 1, -1, 0, 1, INT_MAX - 1, INT_MAX], np.int64)


def random_requantize_arguments(rng, n):
    """(acc, multiplier), n each: int32's ends, any int32, and small accumulators (results
    that do not saturate)."""
    acc = np.where(rng.random(n) < 0.3, rng.choice(INT32_ENDS, n), rng.integers(INT_MIN, INT_MAX, n, endpoint=True))
    multiplier = np.where(rng.random(n) < 0.3, rng.choice(INT32_ENDS, n), rng.integers(INT_MIN, INT_MAX, n, endpoint=True))
    small = np.where(rng.random(n) < 0.5, rng.integers(-8, 9, n), acc >> rng.integers(0, 31, n))
    return np.where(rng.random(n) < 0.3, small, acc), multiplier


def test_qvanilla_requantize_is_exact_for_any_shift(drivers):
    rng = np.random.default_rng(1)
    n = 20000
    acc, multiplier = random_requantize_arguments(rng, n)
    shift = rng.integers(-70, 71, n)
    shift[:400] = rng.choice([-33, -32, -31, 30, 31, 32, 62, 63, 64, INT_MIN, INT_MAX, INT_MIN + 1], 400)
    arrays = [a.astype(np.int32) for a in (acc, multiplier, shift, np.zeros(n))]
    [(status, (_, _, _, got))] = run_both(drivers, [Call("qvanilla_requantize", arrays, [])])
    want = [exact_requantize(a, m, s) for a, m, s in zip(*arrays[:3])]
    assert np.array_equal(got, np.array(want, np.int32))


def test_tflite_reference_rounds_as_gemmlowp():
    """The Python reference itself, on values worked out by hand: the high multiply rounds ties
    upward (0.5 -> 1, -0.5 -> 0: gemmlowp's nudge and truncation), the division by 2^right half
    away from zero (0.5 -> 1, -0.5 -> -1), and the two roundings compound ((2^30 + 1) / 2^32,
    about 0.25, is 1: 0.5 + 2^-31 rounds to 1, then 1/2 to 1)."""
    assert [tflite_requantize(a, 1 << 30, 0) for a in (1, -1, 3, -3)] == [1, 0, 2, -1]
    assert [tflite_requantize(a, 1 << 30, -1) for a in (2, -2, 6, -6, 1, -1)] == [1, -1, 2, -2, 1, 0]
    assert tflite_requantize(1, (1 << 30) + 1, -1) == 1 and exact_requantize(1, (1 << 30) + 1, -1) == 0
    assert tflite_requantize(INT_MIN, INT_MIN, 0) == INT_MAX  # the saturating case
    assert tflite_requantize(INT_MIN, INT_MIN, -1) == 1 << 30
    assert tflite_requantize(1 << 29, INT_MIN, 2) == INT_MAX  # 2^31 wraps to INT32_MIN: saturates too
    assert tflite_requantize(3, 1 << 30, 31) == tflite_requantize(-1, 1 << 30, 31) == -(1 << 30)  # x wraps to INT32_MIN
    assert tflite_requantize(2, 1 << 30, 31) == 0  # x wraps to 0
    assert tflite_requantize(5, INT_MAX, 32) == 0 and tflite_requantize(INT_MIN, INT_MAX, -32) == 0


def test_qvanilla_requantize_tflite_matches_python(drivers):
    """qvanilla_requantize_tflite equals the Python reference for every kind of argument: int32's
    ends, ties of either rounding at both signs (the high multiply's: acc odd with M = 2^30;
    the division's: acc * 2^30 / 2^31 an odd multiple of 2^(right-1)), the saturating high
    multiply (INT32_MIN by INT32_MIN, or through a wrapping left shift), every shift in
    [-31, 30], left shifts that wrap, and shifts beyond the range."""
    rng = np.random.default_rng(2)
    n = 20000
    acc, multiplier = random_requantize_arguments(rng, n)
    shift = rng.integers(-31, 31, n)
    shift[:400] = rng.choice([-70, -33, -32, 31, 32, 33, 62, 63, 64, INT_MIN, INT_MAX, INT_MIN + 1], 400)
    rows = [(acc, multiplier, shift)]
    # ties at both signs, of the high multiply (an odd accumulator times 2^30: h = k + 1/2) and of
    # the division (acc = (2k + 1) * 2^right times 2^30: h / 2^right = k + 1/2), and next to them
    # (multipliers 2^30 +- 1), at every right shift
    for right in range(32):
        odd = 2 * rng.integers(0, 1 << max(0, 30 - right), 16) + 1  # odd * 2^right <= 2^31
        for m in (1 << 30, (1 << 30) + 1, (1 << 30) - 1, -(1 << 30)):
            for a in (odd, -odd, odd << right, -(odd << right)):
                a = a[(a >= INT_MIN) & (a <= INT_MAX)]
                rows.append((a, np.full(a.size, m), np.full(a.size, -right)))
    # the saturating case at every shift, directly and through left shifts that wrap to INT32_MIN
    shifts = np.arange(-31, 31)
    rows.append((np.full(shifts.size, INT_MIN), np.full(shifts.size, INT_MIN), shifts))
    left = np.arange(1, 31)
    rows.append((np.int64(1) << (31 - left), np.full(left.size, INT_MIN), left))
    rows.append((-(np.int64(1) << (31 - left)), np.full(left.size, INT_MIN), left))  # exactly INT32_MIN
    rows.append((3 * (np.int64(1) << (30 - left)), np.full(left.size, INT_MIN), left + 1))  # 3 * 2^31 wraps
    # left shifts that wrap, with multipliers of both signs
    wraps = rng.integers(1, 31, 2000)
    rows.append((rng.integers(INT_MIN, INT_MAX, 2000, endpoint=True), rng.choice(INT32_ENDS, 2000), wraps))
    rows.append((rng.integers(-(1 << 20), 1 << 20, 2000), rng.integers(1 << 30, 1 << 31, 2000), wraps))
    acc, multiplier, shift = (np.concatenate(parts) for parts in zip(*rows))
    arrays = [a.astype(np.int64).astype(np.int32) for a in (acc, multiplier, shift, np.zeros(acc.size))]
    assert np.array_equal(arrays[0], acc) and np.array_equal(arrays[2], shift)
    [(status, (_, _, _, got))] = run_both(drivers, [Call("qvanilla_requantize_tflite", arrays, [])])
    want = [tflite_requantize(a, m, s) for a, m, s in zip(*arrays[:3])]
    assert status == 0 and np.array_equal(got, np.array(want, np.int32))


def qvanilla_errors():
    """(expected code name, Call) for each kind of bad argument of every QVanilla struct entry that
    has the argument, and of what generated code calls."""
    base = dict(ih=4, iw=4, ic=2, oh=2, ow=2, oc=3, kh=3, kw=3, stride_h=1, stride_w=1, pad_top=0, pad_left=0,
                input_zp=0, weight_zp=0, output_zp=0, act_min=-128, act_max=127, rounding=0)
    cases = []

    def add(code, arrays=None, bits=0, entries=QSTRUCT, size=16, **changed):
        g = dict(base, **changed)
        for entry in entries:
            if any(k in QNAMES and k not in qnames(entry) for k in changed):
                continue
            weights = np.int16 if "packed" in entry else np.int8
            pointers = dict(input=one(np.int8), weights=one(weights), bias=one(np.int32), output=one(np.int8),
                            multiplier=one(np.int32), shift=one(np.int32), scratch=np.zeros(max(size, 1), np.int8))
            pointers.update(arrays or {})
            call = Call(entry, list(pointers.values()), struct_ints(entry, g, size, bits))
            call.scratch = (6,)
            cases.append((code, call))

    for role in ("input", "weights", "bias", "output", "multiplier", "shift"):
        add("EINVAL", {role: None})
    for name, bit in QNULL.items():
        add("EINVAL", bits=bit)
    for size in ("ih", "iw", "ic", "oh", "ow", "oc", "kh", "kw"):
        add("ESIZE", **{size: 0})
        add("ESIZE", **{size: INT_MIN})
    add("ESIZE", n=2)  # a batch
    add("ESIZE", n=0)
    add("ESIZE", filter_c=3)  # the filter's channels are not the input's
    add("ESIZE", filter_n=4, entries=QSTRUCT[:2])  # nor its output channels the output's
    add("ESIZE", filter_n=2, entries=QSTRUCT[2:])  # a channel multiplier
    add("ESIZE", output_c=3, entries=QSTRUCT[2:])  # a depthwise output of other channels
    add("ESTRIDE", stride_h=0)
    add("ESTRIDE", stride_w=-2)
    add("EPAD", pad_top=-1)
    add("EPAD", pad_left=INT_MIN)
    add("ECLAMP", act_min=5, act_max=4)
    add("ECLAMP", act_min=-129)
    add("ECLAMP", act_max=128)
    for zp in ("input_zp", "weight_zp", "output_zp"):
        add("EZEROPOINT", **{zp: 128})
        add("EZEROPOINT", **{zp: -129})
        add("EZEROPOINT", **{zp: INT_MIN})
    add("ERANGE", oh=3, stride_h=2**30)
    add("ERANGE", ow=2**30)
    add("ERANGE", ih=INT_MAX, iw=INT_MAX, ic=INT_MAX, filter_c=INT_MAX)
    add("ERANGE", ic=INT_MAX, oc=INT_MAX, kh=65536, kw=65536, oh=1, ow=1)  # the weights
    add("ERANGE", ic=INT_MAX, kh=65537, kw=65537, oh=1, ow=1)  # a depthwise conv's weights
    # 2^62 weights: as int8 they fit, packed as int16 they do not
    add("ERANGE", ic=2**20, oc=2**16, kh=2**13, kw=2**13, oh=1, ow=1, entries=["qvanilla_conv2d_packed_s8"])
    add("ERANGE", ic=2**30, kh=2**16, kw=2**16, oh=1, ow=1, entries=["qvanilla_depthwise_conv2d_packed_s8"])
    for entry in QSTRUCT:
        channels = base["ic"] if "depthwise" in entry else base["oc"]
        weights = np.zeros(3 * 3 * 2 * (1 if "depthwise" in entry else 3), np.int8)
        if "packed" in entry:
            weights = np.zeros(3 * 3 * 2 if "depthwise" in entry else 4 * 24, np.int16)
        need = scratch.buffer_size(qkind(entry), 3, 3, 2, channels)
        full = dict(input=np.zeros(4 * 4 * 2, np.int8), weights=weights, bias=np.zeros(channels, np.int32),
                    output=np.full(2 * 2 * channels, 77, np.int8), multiplier=np.full(channels, 1 << 30, np.int32))
        for bad in (31, -32, INT_MIN, INT_MAX):
            shifts = dict(full, shift=np.array([0] * (channels - 1) + [bad], np.int32))
            add("ESHIFT", shifts, entries=[entry])
            add("ESHIFT", shifts, entries=[entry], rounding=Q["ROUNDING_TFLITE"])
            add("ESHIFT", shifts, entries=[entry], rounding=2, size=0)  # the shifts come first
        valid = dict(full, shift=np.array([-31] + [30] * (channels - 1), np.int32))
        for bad in (2, -1, INT_MIN, INT_MAX):
            add("EROUNDING", valid, entries=[entry], rounding=bad, size=0)  # the rounding before the scratch
        # the scratch: too small, NULL, not aligned, a negative size (checked last)
        add("ESCRATCH", dict(valid, scratch=np.zeros(need - 1, np.int8)), entries=[entry], size=need - 1)
        add("ESCRATCH", dict(valid, scratch=None), entries=[entry], size=need)
        add("ESCRATCH", dict(valid, scratch=np.zeros(need + 1, np.int8)), entries=[entry], size=need, bits=QMISALIGNED)
        add("ESCRATCH", valid, entries=[entry], size=-1)
        add("OK", dict(valid, scratch=np.zeros(need, np.int8)), entries=[entry], size=need)
    # What generated code calls: a NULL table, too small a scratch
    for entry, channels in (("qvanilla_conv2d_nhwc_packed_s8", 3), ("qvanilla_depthwise_conv2d_nhwc_packed_s8", 2)):
        weights = np.zeros(3 * 3 * 2 if "depthwise" in entry else 4 * 24, np.int16)
        table = np.array([[0] * channels, [1 << 30] * channels, [0] * channels], np.int32)
        need = scratch.buffer_size(qkind(entry), 3, 3, 2, channels)
        ints = [dict(base, oc=channels)[k] for k in QCALLS[entry]]
        output = np.full(2 * 2 * channels, 77, np.int8)
        cases.append(("EINVAL", Call(entry, [np.zeros(32, np.int8), weights, None, output, one(np.int8)], [need] + ints)))
        cases.append(("ESCRATCH", Call(entry, [np.zeros(32, np.int8), weights, table, output,
                                               np.zeros(need - 1, np.int8)], [need - 1] + ints)))
        call = Call(entry, [np.zeros(32, np.int8), weights, table, output, np.zeros(need, np.int8)], [need] + ints)
        call.scratch = (4,)
        cases.append(("OK", call))
    # Several problems at once: the first in the order of the header's list.
    add("EINVAL", {"input": None}, ih=0, input_zp=500)
    add("EINVAL", bits=QNULL["params"], rounding=-1, size=0)
    add("ESIZE", n=3, stride_h=0, act_min=200, size=0)
    add("ECLAMP", act_min=1, act_max=0, output_zp=300, stride_h=2**30, oh=3)
    add("EZEROPOINT", output_zp=300, stride_h=2**30, oh=3, rounding=7)
    add("ERANGE", dict(shift=np.array([99] * 3, np.int32)), stride_h=2**30, oh=3, entries=QSTRUCT[:2])
    add("ERANGE", stride_h=2**30, oh=3, rounding=3, size=0)
    return cases


def test_qvanilla_status_codes_are_distinct():
    assert Q["OK"] == 0 and (Q["SHIFT_MIN"], Q["SHIFT_MAX"]) == (-31, 30)
    assert (Q["ROUNDING_UPWARD"], Q["ROUNDING_TFLITE"]) == (0, 1)
    errors = {k: v for k, v in Q.items() if k.startswith("E")}
    assert set(errors) == {"EINVAL", "ESIZE", "ESTRIDE", "EPAD", "ECLAMP", "EZEROPOINT", "ERANGE", "ESHIFT",
                           "EROUNDING", "ESCRATCH"}
    assert len(set(errors.values())) == len(errors) and 0 not in errors.values()


def test_qvanilla_rejects_each_bad_argument_with_its_code(drivers):
    cases = qvanilla_errors()
    for (code, call), (status, arrays) in zip(cases, run_both(drivers, [c for _, c in cases])):
        assert status == Q[code], (code, call.op, call.ints)
        if code != "OK":
            for before, after in zip(call.arrays, arrays):
                assert before is None or before.tobytes() == after.tobytes(), "an array changed on error"


def test_qvanilla_buffer_sizes_equal_the_compilers_mirror(drivers):
    """Each entry's _get_buffer_size equals uma_qvanilla.scratch's (what the TIR pass allocates) on
    shapes across every branch: short and long windows (the direct loops beyond 4096 taps x
    channels), channel counts around the blocks (16), chunks (64) and depthwise blocks (128), plain
    depthwise weights around their buffer (4096); 0 for dims an entry rejects."""
    rng = np.random.default_rng(31)
    shapes = [(1, 1, 1, 1), (3, 3, 2, 3), (1, 1, 8, 70), (3, 3, 512, 5), (2, 4, 512, 5), (3, 3, 520, 6),
              (9, 1, 120, 120), (65, 65, 3, 3), (1, 67, 24, 24), (9, 9, 20, 20), (3, 3, 300, 300), (1, 1, 2048, 2000),
              (64, 64, 1, 1), (8, 8, 64, 1030), (1, 4096, 1, 16), (1, 4097, 1, 16), (2, 2048, 1, 33)]
    shapes += [tuple(int(v) for v in rng.integers(1, [12, 12, 700, 1200])) for _ in range(150)]
    calls, expected = [], []
    for kh, kw, ic, oc in shapes:
        for code, kind in enumerate(scratch.KINDS):
            channels = ic if kind.startswith("depthwise") else oc
            filter_n = 1 if kind.startswith("depthwise") else oc
            calls.append(Call("qvanilla_get_buffer_size", [], [code, 1, 9, 9, ic, filter_n, kh, kw, ic]))
            expected.append(scratch.buffer_size(kind, kh, kw, ic, channels))
    for code in range(4):  # rejected dims: a size below 1, a batch, the filter's channels
        for dims in ([1, 9, 9, 0, 3, 3, 3, 0], [2, 9, 9, 4, 1, 3, 3, 4], [1, 9, 9, 4, 1, 3, 3, 5], [1, 9, 9, 4, 4, -1, 3, 4]):
            calls.append(Call("qvanilla_get_buffer_size", [], [code, *dims]))
            expected.append(0)
    got = [status for status, _ in run_both(drivers, calls)]
    assert got == expected
    assert max(expected) < 100_000  # a workspace buffer, not a tensor


def test_a_sanitizer_report_fails_the_run(drivers):
    """The harness itself: a read past an array (ASan) and a signed overflow (UBSan, in the
    driver's self-test entry) each make the sanitized run fail."""
    past_the_end = Call("conv2dnchw_general", [one(), one(), None, None, None, one()],
                        [1, 4, 4, 1, 2, 2, 3, 3, 1, 1, 0, 0, SCRATCH], UNBOUNDED)  # valid sizes, 1-element arrays
    with pytest.raises(AssertionError, match="AddressSanitizer: heap-buffer-overflow"):
        drivers["sanitized"].run([past_the_end])
    with pytest.raises(AssertionError, match="runtime error: signed integer overflow"):
        drivers["sanitized"].run([Call("overflow", [], [INT_MAX])])
    assert drivers["sanitized"].run([Call("overflow", [], [5])])[0][0] == 6
