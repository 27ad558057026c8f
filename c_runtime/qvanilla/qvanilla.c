/* Host mock of the QVanilla int8 Conv2D engine, written for one CPU core in portable C99 so
 * that compilers vectorise it at -O2 (gcc 12's "very cheap" vectoriser: loops whose trip
 * counts are multiples of the vector length, no run-time alias checks).
 *
 * Dense convs are a matrix product over windows:
 *  - the windows of a tile of output pixels (any rows, in output order) are gathered into a
 *    stack buffer as int16 rows [ky][kx][c] of KP = K rounded up to 8 entries: the raw input,
 *    input_zp where the window leaves the image, zeros in the tail;
 *  - the weights are int16 rows of KP entries per output channel, w - weight_zp, with the
 *    input zero point's contribution folded into the bias (bias - input_zp * sum(w - weight_zp)),
 *    so the inner loop multiplies raw inputs by weights: packed at compile time for the packed
 *    entry, four channels at a time into a stack buffer for the plain one;
 *  - dot2x4() computes 2 pixels x 4 channels: eight int16 x int16 dot products into 32-bit
 *    sums, a reduction gcc turns into pmaddwd (8 multiply-adds per instruction, SSE2).
 * Depthwise convs accumulate 16 channels at a time (vectors over the channel axis of NHWC):
 * 16 int8 inputs widened and multiplied by 16 int16 weights into 32-bit sums per tap.
 * Requantization is exact 64-bit integer arithmetic per output, clamped without branches.
 * gcc -O2 -fopt-info-vec reports the loops of dot2x4(), dw_taps(), widen() and fill() vectorised.
 *
 * Integer sums wrap as unsigned 32-bit values (as the hardware's adders), so results do not
 * depend on the summation order and are bit-exact.  The entries validate every argument
 * first (see the header's status codes); past that no signed arithmetic can overflow. */
#include "qvanilla.h"

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE
#endif

enum {
  OB = QVANILLA_OC_BLOCK, /* output channels per register block (dot2x4) */
  KA = QVANILLA_K_ALIGN,  /* the reduction is padded to a multiple of this */
  WIN = 8192,             /* int16 entries of the window buffer (16 KB) */
  KMAX = WIN / 2,         /* longest (padded) reduction of the fast path: two windows fit */
  TILE = 64,              /* output pixels per tile at most */
  CB = 16,                /* depthwise: channels per vector step */
  DW_BLOCK = 256,         /* depthwise: channels per block (accumulators on the stack) */
  DW_TAPS = 64,           /* depthwise: taps per group (input pointers on the stack) */
  DW_WBUF = 4096,         /* depthwise plain entry: int16 weights of a block, [tap][channel] */
  MAX_OC = 1024           /* plain conv entry beyond KMAX: output channels per pass */
};

static int32_t imin(int32_t a, int32_t b) { return a < b ? a : b; }

/* floor(x / 2^n), 0 < n < 64: an arithmetic right shift, spelled so that standard C defines it
 * (>> of a negative value is implementation-defined); gcc and clang emit one sar for it. */
static int64_t floor_shift(int64_t x, int n) { return x < 0 ? ~(~x >> n) : x >> n; }

/* round_half_up(acc * multiplier * 2^(shift - 31)) saturated to int32, for shift in [-31, 62].
 * |acc * multiplier| <= 2^62; a left shift that would take it to 2^62 or beyond saturates first
 * (the result is beyond int32 then anyway), so nothing overflows 64 bits. */
static inline int32_t requantize(int32_t acc, int32_t multiplier, int shift) {
  int64_t x = (int64_t)acc * multiplier;
  int right = 31;
  if (shift > 0) {
    const int64_t limit = (int64_t)1 << (62 - shift);
    if (x >= limit) return INT32_MAX;
    if (x <= -limit) return INT32_MIN;
    x *= (int64_t)1 << shift;
  } else {
    right -= shift; /* 31 .. 62 */
  }
  x = floor_shift(x + ((int64_t)1 << (right - 1)), right); /* rounds ties upward */
  return x > INT32_MAX ? INT32_MAX : x < INT32_MIN ? INT32_MIN : (int32_t)x;
}

int32_t qvanilla_requantize(int32_t acc, int32_t multiplier, int32_t shift) {
  if (shift < QVANILLA_SHIFT_MIN) {
    /* A right shift by 63 or more: (x + 2^(right-1)) / 2^right with |x| <= 2^62 rounds to 0,
     * but for x = 2^62 (acc = multiplier = INT32_MIN) at right = 63, which is exactly 1/2. */
    return shift == QVANILLA_SHIFT_MIN - 1 && (int64_t)acc * multiplier == (int64_t)1 << 62;
  }
  if (shift > 62) { /* any non-zero product leaves int32 */
    const int64_t x = (int64_t)acc * multiplier;
    return x > 0 ? INT32_MAX : x < 0 ? INT32_MIN : 0;
  }
  return requantize(acc, multiplier, shift);
}

/* The int32 a two's-complement adder holds as u (no implementation-defined conversion). */
static int32_t wrapped(uint32_t u) {
  return u <= INT32_MAX ? (int32_t)u : (int32_t)(u - 2147483648u) - INT32_MAX - 1;
}

/* One output channel's output stage, ready to apply: see finish(). */
typedef struct {
  uint32_t bias;   /* the bias (input zero point folded in) */
  int32_t right;   /* 31 - shift, in [1, 62] */
  int64_t multiplier, round;
} qchan;

static qchan channel(const int32_t* channel_params, size_t channels, size_t o, uint32_t bias) {
  qchan q;
  q.bias = bias;
  q.multiplier = channel_params[channels + o];
  q.right = 31 - channel_params[2 * channels + o];
  q.round = (int64_t)1 << (q.right - 1);
  return q;
}

/* The output stage of one accumulator: clamp(output_zp + requant(sum + bias)), with lo/hi the
 * clamp less output_zp.  For shift in [-31, 30], requantize() equals
 * floor((acc * multiplier + 2^(30 - shift)) / 2^(31 - shift)) (dividing its left-shifted form by
 * 2^shift changes neither the quotient nor the rounding); clamping that to [lo, hi], inside
 * int32, equals saturating it to int32 first.  |acc * multiplier| <= 2^62, round <= 2^61. */
static inline int8_t finish(uint32_t sum, const qchan* q, int64_t lo, int64_t hi, int32_t zp) {
  int64_t r = floor_shift((int64_t)wrapped(sum + q->bias) * q->multiplier + q->round, q->right);
  r = r < lo ? lo : r; /* two selects (cmov), no branch: a ReLU clamps about half the outputs */
  r = r > hi ? hi : r;
  return (int8_t)(r + zp);
}

/* *count *= n unless that would exceed max (then 0); n >= 1. */
static int fits(size_t* count, int32_t n, size_t max) {
  if (*count > max / (size_t)n) return 0;
  *count *= (size_t)n;
  return 1;
}

/* Whether (out-1)*stride + kernel stays within INT32_MAX/2, so y*stride - pad + ky fits. */
static int extent_ok(int32_t out, int32_t stride, int32_t kernel) {
  return (int64_t)(out - 1) * stride + kernel <= INT32_MAX / 2;
}

static int is_int8(int32_t v) { return v >= -128 && v <= 127; }

enum { PLAIN, PACKED, DEPTHWISE, DEPTHWISE_PACKED }; /* kinds of entry for check() */

/* The entries' validation: a status code of the header, in the header's order.  For depthwise
 * entries ic = oc = channels; packed entries have weight_zp = 0 and int16 weights. */
static int32_t check(const int8_t* input, const void* weights, const int32_t* channel_params, const int8_t* output,
                     const qvanilla_conv_params* p, int kind) {
  if (input == NULL || weights == NULL || channel_params == NULL || output == NULL || p == NULL) {
    return QVANILLA_EINVAL;
  }
  if (p->ih <= 0 || p->iw <= 0 || p->ic <= 0 || p->oh <= 0 || p->ow <= 0 || p->oc <= 0 || p->kh <= 0 || p->kw <= 0) {
    return QVANILLA_ESIZE;
  }
  if (p->stride_h <= 0 || p->stride_w <= 0) return QVANILLA_ESTRIDE;
  if (p->pad_top < 0 || p->pad_left < 0) return QVANILLA_EPAD;
  if (p->act_min > p->act_max || !is_int8(p->act_min) || !is_int8(p->act_max)) return QVANILLA_ECLAMP;
  if (!is_int8(p->input_zp) || !is_int8(p->weight_zp) || !is_int8(p->output_zp)) return QVANILLA_EZEROPOINT;
  const size_t bytes = PTRDIFF_MAX;
  size_t in = 1, out = 1, w = 1, table = 3;
  int ok = fits(&in, p->ih, bytes) && fits(&in, p->iw, bytes) && fits(&in, p->ic, bytes) && fits(&out, p->oh, bytes) &&
           fits(&out, p->ow, bytes) && fits(&out, p->oc, bytes) && fits(&w, p->kh, bytes) && fits(&w, p->kw, bytes) &&
           fits(&table, p->oc, bytes / sizeof(int32_t)) && extent_ok(p->oh, p->stride_h, p->kh) &&
           extent_ok(p->ow, p->stride_w, p->kw);
  if (ok && kind == PLAIN) ok = fits(&w, p->ic, bytes) && fits(&w, p->oc, bytes);
  if (ok && kind == DEPTHWISE) ok = fits(&w, p->oc, bytes);
  if (ok && kind == DEPTHWISE_PACKED) ok = fits(&w, p->oc, bytes / sizeof(int16_t));
  if (ok && kind == PACKED) { /* OCP rows of KP int16 */
    ok = fits(&w, p->ic, bytes) && w <= bytes - KA;
    if (ok) {
      w = (w + KA - 1) / KA * KA;
      const size_t ocp = ((size_t)p->oc + OB - 1) / OB * OB;
      ok = w <= bytes / sizeof(int16_t) / ocp;
    }
  }
  if (!ok) return QVANILLA_ERANGE;
  const int32_t* shift = channel_params + 2 * (size_t)p->oc;
  for (int32_t o = 0; o < p->oc; ++o) {
    if (shift[o] < QVANILLA_SHIFT_MIN || shift[o] > QVANILLA_SHIFT_MAX) return QVANILLA_ESHIFT;
  }
  return QVANILLA_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Dense conv */

/* sums[p*4 + j] = sum_k x_p[k] * w[j*ws + k] for k < 8*k8: a reduction per sum, which gcc
 * vectorises with pmaddwd.  Out of line: inlined into the loop nest, the eight accumulators
 * and six input streams no longer all get registers. */
NOINLINE static void dot2x4(const int16_t* restrict x0, const int16_t* restrict x1, const int16_t* restrict w,
                            size_t ws, size_t k8, uint32_t* restrict sums) {
  const int16_t* restrict w0 = w;
  const int16_t* restrict w1 = w + ws;
  const int16_t* restrict w2 = w + 2 * ws;
  const int16_t* restrict w3 = w + 3 * ws;
  uint32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0, b0 = 0, b1 = 0, b2 = 0, b3 = 0;
  const size_t n = k8 * KA;
  for (size_t k = 0; k < n; ++k) { /* |x * w| <= 2^22: no int overflow */
    const int32_t u = x0[k], v = x1[k];
    a0 += (uint32_t)(u * w0[k]);
    a1 += (uint32_t)(u * w1[k]);
    a2 += (uint32_t)(u * w2[k]);
    a3 += (uint32_t)(u * w3[k]);
    b0 += (uint32_t)(v * w0[k]);
    b1 += (uint32_t)(v * w1[k]);
    b2 += (uint32_t)(v * w2[k]);
    b3 += (uint32_t)(v * w3[k]);
  }
  sums[0] = a0; sums[1] = a1; sums[2] = a2; sums[3] = a3;
  sums[4] = b0; sums[5] = b1; sums[6] = b2; sums[7] = b3;
}

/* dst[0..n) = src[0..n) widened (blocks of 16 vectorise). */
static void widen(int16_t* restrict dst, const int8_t* restrict src, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    for (int j = 0; j < 16; ++j) dst[i + j] = src[i + j];
  }
  for (; i < n; ++i) dst[i] = src[i];
}

static void fill(int16_t* dst, int16_t value, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    for (int j = 0; j < 16; ++j) dst[i + j] = value;
  }
  for (; i < n; ++i) dst[i] = value;
}

/* The first kx of [0, kw) whose column x0 + kx is at least `from` (x0 may be far outside). */
static int32_t first_column(int64_t x0, int64_t from, int32_t kw) {
  const int64_t k = from - x0;
  return k <= 0 ? 0 : k >= kw ? kw : (int32_t)k;
}

/* Window of output pixel (y, x) as kp int16: [ky][kx][c] of the input, input_zp outside the
 * image, zeros from K on.  No pointer is formed outside the input. */
static void gather(int16_t* dst, size_t kp, const int8_t* input, const qvanilla_conv_params* p, int32_t y, int32_t x) {
  const size_t ic = (size_t)p->ic, row = (size_t)p->kw * ic;
  const int64_t x0 = (int64_t)x * p->stride_w - p->pad_left;
  const int32_t a = first_column(x0, 0, p->kw), b = first_column(x0, p->iw, p->kw); /* [a, b) inside */
  for (int32_t ky = 0; ky < p->kh; ++ky) {
    const int32_t iy = y * p->stride_h - p->pad_top + ky; /* fits: extent_ok() */
    int16_t* r = dst + (size_t)ky * row;
    if (iy < 0 || iy >= p->ih || a >= b) {
      fill(r, (int16_t)p->input_zp, row);
      continue;
    }
    fill(r, (int16_t)p->input_zp, (size_t)a * ic);
    widen(r + (size_t)a * ic, input + ((size_t)iy * p->iw + (size_t)(x0 + a)) * ic, (size_t)(b - a) * ic);
    fill(r + (size_t)b * ic, (int16_t)p->input_zp, (size_t)(p->kw - b) * ic);
  }
  fill(dst + (size_t)p->kh * row, 0, kp - (size_t)p->kh * row);
}

/* The dense conv for K = kh*kw*ic <= KMAX.  packed: OCP rows of kp int16 and the folded bias in
 * channel_params; else raw HWIO int8 weights (with weight_zp), packed into quad (OB*KMAX int16)
 * four channels at a time, their bias folded, for each tile. */
static void conv_tiles(const int8_t* input, const int16_t* packed, const int8_t* raw, int16_t* quad,
                       const int32_t* channel_params, int8_t* output, const qvanilla_conv_params* p) {
  int16_t win[WIN];
  const size_t oc = (size_t)p->oc, K = (size_t)p->kh * p->kw * p->ic, kp = (K + KA - 1) / KA * KA;
  const size_t pixels = (size_t)p->oh * p->ow;
  const size_t tile = WIN / kp < TILE ? WIN / kp : TILE; /* >= 2 */
  const int64_t lo = p->act_min - p->output_zp, hi = p->act_max - p->output_zp;
  int32_t y = 0, x = 0; /* the next pixel to gather */
  for (size_t first = 0; first < pixels; first += tile) {
    const size_t n = pixels - first < tile ? pixels - first : tile;
    for (size_t i = 0; i < n; ++i) {
      gather(win + i * kp, kp, input, p, y, x);
      if (++x == p->ow) {
        x = 0;
        ++y;
      }
    }
    for (size_t o0 = 0; o0 < oc; o0 += OB) {
      const size_t no = oc - o0 < OB ? oc - o0 : OB;
      qchan q[OB];
      const int16_t* w = packed != NULL ? packed + o0 * kp : quad;
      if (packed == NULL) {
        uint32_t sums[OB] = {0};
        for (size_t k = 0; k < K; ++k) {
          const int8_t* r = raw + k * oc + o0;
          for (size_t j = 0; j < no; ++j) {
            const int16_t v = (int16_t)(r[j] - p->weight_zp);
            quad[j * kp + k] = v;
            sums[j] += (uint32_t)v;
          }
        }
        for (size_t j = 0; j < OB; ++j) {
          if (j < no) {
            fill(quad + j * kp + K, 0, kp - K);
            q[j] = channel(channel_params, oc, o0 + j, (uint32_t)channel_params[o0 + j] - sums[j] * (uint32_t)p->input_zp);
          } else {
            fill(quad + j * kp, 0, kp);
          }
        }
      } else {
        for (size_t j = 0; j < no; ++j) q[j] = channel(channel_params, oc, o0 + j, (uint32_t)channel_params[o0 + j]);
      }
      for (size_t i = 0; i < n; i += 2) {
        const int16_t* x0 = win + i * kp;
        const int pair = i + 1 < n;
        uint32_t sums[2 * OB];
        dot2x4(x0, pair ? x0 + kp : x0, w, kp, kp / KA, sums);
        int8_t* out = output + (first + i) * oc + o0;
        if (pair && no == OB) {
          const int32_t zp = p->output_zp;
          out[0] = finish(sums[0], &q[0], lo, hi, zp);
          out[oc] = finish(sums[4], &q[0], lo, hi, zp);
          out[1] = finish(sums[1], &q[1], lo, hi, zp);
          out[oc + 1] = finish(sums[5], &q[1], lo, hi, zp);
          out[2] = finish(sums[2], &q[2], lo, hi, zp);
          out[oc + 2] = finish(sums[6], &q[2], lo, hi, zp);
          out[3] = finish(sums[3], &q[3], lo, hi, zp);
          out[oc + 3] = finish(sums[7], &q[3], lo, hi, zp);
          continue;
        }
        for (size_t j = 0; j < no; ++j) {
          out[j] = finish(sums[j], &q[j], lo, hi, p->output_zp);
          if (pair) out[oc + j] = finish(sums[OB + j], &q[j], lo, hi, p->output_zp);
        }
      }
    }
  }
}

/* Windows longer than KMAX (beyond any usual layer), packed weights: straightforward loops. */
static void conv_packed_direct(const int8_t* input, const int16_t* packed, const int32_t* channel_params,
                               int8_t* output, const qvanilla_conv_params* p) {
  const size_t oc = (size_t)p->oc, ic = (size_t)p->ic, K = (size_t)p->kh * p->kw * ic, kp = (K + KA - 1) / KA * KA;
  const int64_t lo = p->act_min - p->output_zp, hi = p->act_max - p->output_zp;
  for (int32_t y = 0; y < p->oh; ++y) {
    for (int32_t x = 0; x < p->ow; ++x) {
      int8_t* out = output + ((size_t)y * p->ow + x) * oc;
      for (size_t o = 0; o < oc; ++o) {
        const int16_t* w = packed + o * kp;
        uint32_t sum = 0;
        for (int32_t ky = 0; ky < p->kh; ++ky) {
          const int32_t iy = y * p->stride_h - p->pad_top + ky;
          for (int32_t kx = 0; kx < p->kw; ++kx) {
            const int32_t ix = x * p->stride_w - p->pad_left + kx;
            const int16_t* wk = w + ((size_t)ky * p->kw + kx) * ic;
            const int inside = iy >= 0 && iy < p->ih && ix >= 0 && ix < p->iw;
            const int8_t* in = inside ? input + ((size_t)iy * p->iw + ix) * ic : NULL;
            for (size_t c = 0; c < ic; ++c) sum += (uint32_t)((in ? in[c] : p->input_zp) * wk[c]);
          }
        }
        const qchan q = channel(channel_params, oc, o, (uint32_t)channel_params[o]);
        out[o] = finish(sum, &q, lo, hi, p->output_zp);
      }
    }
  }
}

/* Windows longer than KMAX, plain entry: for each output pixel the int32 sums of up to MAX_OC
 * channels in a stack row (weights are HWIO: the inner loop runs over contiguous channels). */
static void conv_plain_direct(const int8_t* input, const int8_t* weights, const int32_t* channel_params,
                              int8_t* output, const qvanilla_conv_params* p) {
  const int64_t lo = p->act_min - p->output_zp, hi = p->act_max - p->output_zp;
  uint32_t acc[MAX_OC];
  for (int32_t o0 = 0; o0 < p->oc; o0 += MAX_OC) {
    const int32_t n = imin(p->oc - o0, MAX_OC);
    for (int32_t y = 0; y < p->oh; ++y) {
      for (int32_t x = 0; x < p->ow; ++x) {
        for (int32_t o = 0; o < n; ++o) acc[o] = 0;
        for (int32_t ky = 0; ky < p->kh; ++ky) {
          const int32_t iy = y * p->stride_h - p->pad_top + ky;
          if (iy < 0 || iy >= p->ih) continue; /* padding: (zp - zp) contributes nothing */
          for (int32_t kx = 0; kx < p->kw; ++kx) {
            const int32_t ix = x * p->stride_w - p->pad_left + kx;
            if (ix < 0 || ix >= p->iw) continue;
            const int8_t* in = input + ((size_t)iy * p->iw + ix) * p->ic;
            const int8_t* w = weights + ((size_t)ky * p->kw + kx) * p->ic * p->oc + o0;
            for (int32_t c = 0; c < p->ic; ++c) {
              const int32_t v = (int32_t)in[c] - p->input_zp; /* |v|, |w - weight_zp| <= 255 */
              const int8_t* restrict wc = w + (size_t)c * p->oc;
              uint32_t* restrict a = acc;
              for (int32_t o = 0; o < n; ++o) a[o] += (uint32_t)(v * ((int32_t)wc[o] - p->weight_zp));
            }
          }
        }
        int8_t* out = output + ((size_t)y * p->ow + x) * p->oc + o0;
        for (int32_t o = 0; o < n; ++o) {
          const qchan q = channel(channel_params, (size_t)p->oc, (size_t)(o0 + o), (uint32_t)channel_params[o0 + o]);
          out[o] = finish(acc[o], &q, lo, hi, p->output_zp);
        }
      }
    }
  }
}

int32_t qvanilla_conv2d_s8(const int8_t* input, const int8_t* weights, const int32_t* channel_params,
                           int8_t* output, const qvanilla_conv_params* p) {
  const int32_t status = check(input, weights, channel_params, output, p, PLAIN);
  if (status != QVANILLA_OK) return status;
  if ((size_t)p->kh * p->kw * p->ic <= KMAX) {
    int16_t quad[OB * KMAX];
    conv_tiles(input, NULL, weights, quad, channel_params, output, p);
  } else {
    conv_plain_direct(input, weights, channel_params, output, p);
  }
  return QVANILLA_OK;
}

int32_t qvanilla_conv2d_nhwc_s8(int8_t* input, int8_t* weights, int32_t* channel_params, int8_t* output,
                                int32_t ih, int32_t iw, int32_t ic, int32_t oh, int32_t ow, int32_t oc,
                                int32_t kh, int32_t kw, int32_t stride_h, int32_t stride_w, int32_t pad_top,
                                int32_t pad_left, int32_t input_zp, int32_t weight_zp, int32_t output_zp,
                                int32_t act_min, int32_t act_max) {
  const qvanilla_conv_params p = {ih,       iw,       ic,      oh,       ow,        oc,        kh,
                                  kw,       stride_h, stride_w, pad_top, pad_left, input_zp, weight_zp,
                                  output_zp, act_min,  act_max};
  return qvanilla_conv2d_s8(input, weights, channel_params, output, &p);
}

int32_t qvanilla_conv2d_nhwc_packed_s8(int8_t* input, int16_t* packed_weights, int32_t* channel_params, int8_t* output,
                                       int32_t ih, int32_t iw, int32_t ic, int32_t oh, int32_t ow, int32_t oc,
                                       int32_t kh, int32_t kw, int32_t stride_h, int32_t stride_w, int32_t pad_top,
                                       int32_t pad_left, int32_t input_zp, int32_t output_zp, int32_t act_min,
                                       int32_t act_max) {
  const qvanilla_conv_params p = {ih,      iw,       ic,      oh,      ow,        oc,        kh,
                                  kw,      stride_h, stride_w, pad_top, pad_left, input_zp, 0,
                                  output_zp, act_min, act_max};
  const int32_t status = check(input, packed_weights, channel_params, output, &p, PACKED);
  if (status != QVANILLA_OK) return status;
  if ((size_t)kh * kw * ic <= KMAX) {
    conv_tiles(input, packed_weights, NULL, NULL, channel_params, output, &p);
  } else {
    conv_packed_direct(input, packed_weights, channel_params, output, &p);
  }
  return QVANILLA_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Depthwise conv */

/* acc[c] += sum over the taps t < nt of in[t][at + c] * w[t*ws + c], c < 16: vectorised over c
 * (16 int8 inputs widened, multiplied by 16 int16 weights, into 16 32-bit sums). */
static void dw_taps(uint32_t* restrict acc, const int8_t* const* in, size_t at, const int16_t* restrict w, size_t ws,
                    int nt) {
  uint32_t a[CB];
  for (int j = 0; j < CB; ++j) a[j] = acc[j];
  for (int t = 0; t < nt; ++t) {
    const int8_t* restrict s = in[t] + at;
    const int16_t* restrict wt = w + (size_t)t * ws;
    for (int j = 0; j < CB; ++j) a[j] += (uint32_t)(s[j] * (int32_t)wt[j]); /* |s * w| <= 2^22 */
  }
  for (int j = 0; j < CB; ++j) acc[j] = a[j];
}

/* Depthwise conv of the channels [c0, c0 + nc), nc <= DW_BLOCK, with weights w[t*ws + c - c0]
 * (int16, weight_zp subtracted) and folded biases q.  Per output pixel and group of up to
 * DW_TAPS taps: pointers to the taps' input (zp_row outside the image), then CB channels at a
 * time; the last nc % CB channels go through zero-padded copies of their inputs and weights. */
static void dw_block(const int8_t* input, const int16_t* w, size_t ws, const qchan* q, int8_t* output, size_t c0,
                     size_t nc, const qvanilla_conv_params* p) {
  const size_t channels = (size_t)p->ic, taps = (size_t)p->kh * p->kw, full = nc - nc % CB, rest = nc - full;
  const int64_t lo = p->act_min - p->output_zp, hi = p->act_max - p->output_zp;
  int8_t zp_row[DW_BLOCK]; /* what a tap outside the image reads */
  const int8_t* in[DW_TAPS];
  const int8_t* tail_in[DW_TAPS];
  int8_t tail_x[DW_TAPS * CB];
  int16_t tail_w[DW_TAPS * CB];
  size_t tail_w_group = (size_t)-1; /* the tap group tail_w holds */
  uint32_t acc[DW_BLOCK + CB];
  for (size_t c = 0; c < nc; ++c) zp_row[c] = (int8_t)p->input_zp;
  for (int t = 0; t < DW_TAPS; ++t) tail_in[t] = tail_x + (size_t)t * CB;
  for (size_t i = 0; i < DW_TAPS * CB; ++i) tail_x[i] = 0;
  for (int32_t y = 0; y < p->oh; ++y) {
    for (int32_t x = 0; x < p->ow; ++x) {
      for (size_t c = 0; c < full + (rest ? CB : 0); ++c) acc[c] = 0;
      for (size_t t0 = 0; t0 < taps; t0 += DW_TAPS) {
        const int nt = taps - t0 < DW_TAPS ? (int)(taps - t0) : DW_TAPS;
        int32_t ky = t0 ? (int32_t)(t0 / (size_t)p->kw) : 0, kx = t0 ? (int32_t)(t0 % (size_t)p->kw) : 0;
        for (int t = 0; t < nt; ++t) {
          const int32_t iy = y * p->stride_h - p->pad_top + ky, ix = x * p->stride_w - p->pad_left + kx;
          const int inside = iy >= 0 && iy < p->ih && ix >= 0 && ix < p->iw;
          in[t] = inside ? input + ((size_t)iy * p->iw + ix) * channels + c0 : zp_row;
          if (++kx == p->kw) {
            kx = 0;
            ++ky;
          }
        }
        const int16_t* wt = w + t0 * ws;
        for (size_t c = 0; c < full; c += CB) dw_taps(acc + c, in, c, wt + c, ws, nt);
        if (rest == 0) continue;
        if (tail_w_group != t0) {
          for (int t = 0; t < nt; ++t) {
            for (size_t j = 0; j < CB; ++j) tail_w[(size_t)t * CB + j] = j < rest ? wt[(size_t)t * ws + full + j] : 0;
          }
          tail_w_group = t0;
        }
        for (int t = 0; t < nt; ++t) {
          for (size_t j = 0; j < rest; ++j) tail_x[(size_t)t * CB + j] = in[t][full + j];
        }
        dw_taps(acc + full, tail_in, 0, tail_w, CB, nt);
      }
      int8_t* out = output + ((size_t)y * p->ow + x) * channels + c0;
      for (size_t c = 0; c < nc; ++c) out[c] = finish(acc[c], &q[c], lo, hi, p->output_zp);
    }
  }
}

/* packed: [tap][channel] int16 with folded biases; else raw [tap][channel] int8 and weight_zp. */
static void depthwise(const int8_t* input, const int16_t* packed, const int8_t* raw, const int32_t* channel_params,
                      int8_t* output, const qvanilla_conv_params* p) {
  const size_t channels = (size_t)p->ic, taps = (size_t)p->kh * p->kw;
  qchan q[DW_BLOCK];
  int16_t wbuf[DW_WBUF];
  size_t block = DW_BLOCK;
  if (packed == NULL) { /* a block's weights must fit wbuf */
    block = DW_WBUF / taps < DW_BLOCK ? DW_WBUF / taps : DW_BLOCK;
    if (block >= CB) block -= block % CB;
    if (block == 0) block = 1;
  }
  for (size_t c0 = 0; c0 < channels; c0 += block) {
    const size_t nc = channels - c0 < block ? channels - c0 : block;
    if (packed != NULL) {
      for (size_t c = 0; c < nc; ++c) q[c] = channel(channel_params, channels, c0 + c, (uint32_t)channel_params[c0 + c]);
      dw_block(input, packed + c0, channels, q, output, c0, nc, p);
      continue;
    }
    if (taps * nc <= DW_WBUF) {
      for (size_t c = 0; c < nc; ++c) {
        uint32_t sum = 0;
        for (size_t t = 0; t < taps; ++t) {
          const int16_t v = (int16_t)(raw[t * channels + c0 + c] - p->weight_zp);
          wbuf[t * nc + c] = v;
          sum += (uint32_t)v;
        }
        q[c] = channel(channel_params, channels, c0 + c, (uint32_t)channel_params[c0 + c] - sum * (uint32_t)p->input_zp);
      }
      dw_block(input, wbuf, nc, q, output, c0, nc, p);
      continue;
    }
    /* More than DW_WBUF taps: one channel at a time, its weights in turns of DW_WBUF taps. */
    const int64_t lo = p->act_min - p->output_zp, hi = p->act_max - p->output_zp;
    for (size_t c = c0; c < c0 + nc; ++c) {
      const qchan qc = channel(channel_params, channels, c, (uint32_t)channel_params[c]);
      for (int32_t y = 0; y < p->oh; ++y) {
        for (int32_t x = 0; x < p->ow; ++x) {
          uint32_t sum = 0;
          for (int32_t ky = 0; ky < p->kh; ++ky) {
            const int32_t iy = y * p->stride_h - p->pad_top + ky;
            for (int32_t kx = 0; kx < p->kw; ++kx) {
              const int32_t ix = x * p->stride_w - p->pad_left + kx;
              if (iy < 0 || iy >= p->ih || ix < 0 || ix >= p->iw) continue;
              const int32_t v = (int32_t)input[((size_t)iy * p->iw + ix) * channels + c] - p->input_zp;
              sum += (uint32_t)(v * ((int32_t)raw[((size_t)ky * p->kw + kx) * channels + c] - p->weight_zp));
            }
          }
          output[((size_t)y * p->ow + x) * channels + c] = finish(sum, &qc, lo, hi, p->output_zp);
        }
      }
    }
  }
}

int32_t qvanilla_depthwise_conv2d_nhwc_s8(int8_t* input, int8_t* weights, int32_t* channel_params, int8_t* output,
                                          int32_t ih, int32_t iw, int32_t channels, int32_t oh, int32_t ow,
                                          int32_t kh, int32_t kw, int32_t stride_h, int32_t stride_w,
                                          int32_t pad_top, int32_t pad_left, int32_t input_zp, int32_t weight_zp,
                                          int32_t output_zp, int32_t act_min, int32_t act_max) {
  const qvanilla_conv_params p = {ih,      iw,       channels, oh,      ow,        channels,  kh,
                                  kw,      stride_h, stride_w, pad_top, pad_left, input_zp, weight_zp,
                                  output_zp, act_min, act_max};
  const int32_t status = check(input, weights, channel_params, output, &p, DEPTHWISE);
  if (status != QVANILLA_OK) return status;
  depthwise(input, NULL, weights, channel_params, output, &p);
  return QVANILLA_OK;
}

int32_t qvanilla_depthwise_conv2d_nhwc_packed_s8(int8_t* input, int16_t* packed_weights, int32_t* channel_params,
                                                 int8_t* output, int32_t ih, int32_t iw, int32_t channels,
                                                 int32_t oh, int32_t ow, int32_t kh, int32_t kw, int32_t stride_h,
                                                 int32_t stride_w, int32_t pad_top, int32_t pad_left,
                                                 int32_t input_zp, int32_t output_zp, int32_t act_min,
                                                 int32_t act_max) {
  const qvanilla_conv_params p = {ih,      iw,       channels, oh,      ow,        channels,  kh,
                                  kw,      stride_h, stride_w, pad_top, pad_left, input_zp, 0,
                                  output_zp, act_min, act_max};
  const int32_t status = check(input, packed_weights, channel_params, output, &p, DEPTHWISE_PACKED);
  if (status != QVANILLA_OK) return status;
  depthwise(input, packed_weights, NULL, channel_params, output, &p);
  return QVANILLA_OK;
}
