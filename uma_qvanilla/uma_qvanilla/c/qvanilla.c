/* Host mock of the QVanilla int8 Conv2D engine, written for one CPU core in portable C99 so
 * that compilers vectorise it at -O2 (gcc 12's "very cheap" vectoriser: loops whose trip
 * counts are multiples of the vector length, no run-time alias checks; SSE2 on x86-64).
 *
 * Dense convs are a matrix product over windows:
 *  - the windows of a tile of output pixels (any rows, in output order) are gathered into a
 *    stack buffer as int16 rows [ky][kx][c] of KP = K rounded up to 8 entries: the raw input,
 *    input_zp where the window leaves the image, zeros in the tail (1x1 kernels widen runs of
 *    contiguous pixels);
 *  - the weights are int16 rows of KP entries per output channel, w - weight_zp, with the
 *    input zero point's contribution folded into the bias (bias - input_zp * sum(w - weight_zp)),
 *    so the inner loop multiplies raw inputs by weights: packed at compile time for the packed
 *    entry, four channels at a time into a stack buffer for the plain one;
 *  - dot2x4() computes 2 pixels x 4 channels: eight int16 x int16 dot products into 32-bit
 *    sums, a reduction gcc turns into pmaddwd (8 multiply-adds per instruction, SSE2), into a
 *    tile of accumulators; short reductions (1x1 convs of few channels) get unrolled copies.
 * Depthwise convs accumulate 16 channels at a time (vectors over the channel axis of NHWC):
 * 16 int8 inputs widened and multiplied by 16 int16 weights into 32-bit sums per tap, or, for
 * weights in [-128, 127], two taps at a time summed exactly in 16-bit lanes.
 * The output stage (requantization, zero point, clamp) runs on rows of accumulators, 16 channels
 * at a time, vectorised and exact in either rounding (TVM's or TFLite's): see requant_rows();
 * channels it cannot take exactly that way take finish() (finish_tflite()), exact 64-bit integer
 * arithmetic per output.
 * gcc -O2 -fopt-info-vec reports the loops of dot2x4(), dw_taps(), dw_pairs(), requant_lanes(),
 * pack_row(), widen() and fill() vectorised.
 *
 * Integer sums wrap as unsigned 32-bit values (as the hardware's adders), so results do not
 * depend on the summation order and are bit-exact.  The entries validate every argument
 * first (see the header's status codes); past that no signed arithmetic can overflow. */
#include "qvanilla.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kit_requantize.h" /* the requantizations (qvanilla_requantize*), and their helpers */

/* The shifts this library accepts are those the kit's requantizations are exact in (C99 check). */
typedef char qvanilla_shifts_are_the_kits[QVANILLA_SHIFT_MIN == KIT_REQUANTIZE_SHIFT_MIN &&
                                          QVANILLA_SHIFT_MAX == KIT_REQUANTIZE_SHIFT_MAX ? 1 : -1];

/* Microcontrollers (Arm M profile: 13 general registers, no 64-bit or float vectors): the output
 * stage one channel at a time in 32-bit words (requant_columns()) instead of the vector lanes'
 * float set-up; with the DSP extension (Cortex-M4, M7, M33, M55), dense dot products two int16
 * multiply-adds per instruction (SMLAD, the Arm C Language Extensions' __smlad) in register blocks
 * of 2 pixels x 2 channels (dot2x2()).  Elsewhere: plain C. */
#if defined(__ARM_ARCH_PROFILE) && __ARM_ARCH_PROFILE == 'M'
#define QVANILLA_MCU 1
#if defined(__ARM_FEATURE_SIMD32)
#include <arm_acle.h>
#define QVANILLA_SMLAD 1
#endif
#endif

#if defined(__GNUC__)
#define NOINLINE __attribute__((noinline))
#define ALWAYS_INLINE inline __attribute__((always_inline))
#define UNROLL4 _Pragma("GCC unroll 4") /* C99's _Pragma; gcc 8+ and clang know this one */
#else
#define NOINLINE
#define ALWAYS_INLINE inline
#define UNROLL4
#endif

enum {
  OB = QVANILLA_OC_BLOCK, /* output channels per register block (dot2x4) */
  KA = QVANILLA_K_ALIGN,  /* the reduction is padded to a multiple of this */
  WIN = 8192,             /* int16 entries of the window buffer (16 KB) */
  KMAX = WIN / 2,         /* longest (padded) reduction of the fast path: two windows fit */
  TILE = 64,              /* output pixels per tile at most */
  QCH = 64,               /* dense: output channels per chunk (a multiple of OB and QL) */
  CB = 16,                /* depthwise: channels per vector step */
  DW_BLOCK = 128,         /* depthwise: channels per block (a multiple of QL) */
  DW_TAPS = 64,           /* depthwise: taps per group (input pointers on the stack) */
  DW_WBUF = 4096,         /* depthwise plain entry: int16 weights of a block, [tap][channel] */
  DW_ACC = 2048,          /* depthwise: accumulators of the pixels awaiting their output stage */
  MAX_OC = 1024           /* plain conv entry beyond KMAX: output channels per pass */
};

static int32_t imin(int32_t a, int32_t b) { return a < b ? a : b; }


/* The requantizations are the kit's (kit_requantize.h). */
int32_t qvanilla_requantize(int32_t acc, int32_t multiplier, int32_t shift) {
  return kit_requantize(acc, multiplier, shift);
}

int32_t qvanilla_requantize_tflite(int32_t acc, int32_t multiplier, int32_t shift) {
  return kit_requantize_tflite(acc, multiplier, shift);
}

/* One output channel's output stage, ready to apply: see finish() and finish_tflite(). */
typedef struct {
  uint32_t bias;   /* the bias (input zero point folded in) */
  int32_t right;   /* upward: 31 - shift, in [1, 62]; TFLite: 31 + max(-shift, 0), in [31, 62] */
  int32_t left;    /* TFLite: max(shift, 0), in [0, 30]; upward: 0 */
  int64_t multiplier, round;
  int64_t fix;     /* TFLite: what a negative high product takes off round (see finish_tflite) */
} qchan;

static qchan channel(const int32_t* channel_params, size_t channels, size_t o, uint32_t bias, int32_t rounding) {
  const int32_t shift = channel_params[2 * channels + o];
  qchan q;
  q.bias = bias;
  q.multiplier = channel_params[channels + o];
  if (rounding == QVANILLA_ROUNDING_TFLITE) {
    q.left = shift > 0 ? shift : 0;
    q.right = 31 + (shift < 0 ? -shift : 0);
    q.fix = q.right > 31 ? (int64_t)1 << 31 : 0;
    q.round = ((int64_t)1 << 30) + (q.right > 31 ? (int64_t)1 << (q.right - 1) : 0);
  } else {
    q.left = 0;
    q.right = 31 - shift;
    q.fix = 0;
    q.round = (int64_t)1 << (q.right - 1);
  }
  return q;
}

/* The output stage of one accumulator: clamp(output_zp + requant(sum + bias)), with lo/hi the
 * clamp less output_zp.  For shift in [-31, 30], kit_requantize() equals
 * floor((acc * multiplier + 2^(30 - shift)) / 2^(31 - shift)) (dividing its left-shifted form by
 * 2^shift changes neither the quotient nor the rounding); clamping that to [lo, hi], inside
 * int32, equals saturating it to int32 first.  |acc * multiplier| <= 2^62, round <= 2^61. */
static inline int8_t finish(uint32_t sum, const qchan* q, int64_t lo, int64_t hi, int32_t zp) {
  int64_t r = kit_floor_shift((int64_t)kit_wrapped(sum + q->bias) * q->multiplier + q->round, q->right);
  r = r < lo ? lo : r; /* two selects (cmov), no branch: a ReLU clamps about half the outputs */
  r = r > hi ? hi : r;
  return (int8_t)(r + zp);
}

/* finish() in TFLite's rounding: clamp(output_zp + qvanilla_requantize_tflite(sum + bias)), lo/hi
 * the clamp less output_zp.  With x = (sum + bias) * 2^left wrapped to int32, ab = x * M and
 * n = right - 31 = max(-shift, 0):
 *  - the high multiply is floor((ab + 2^30) / 2^31) (for ab < 0, truncating ab + 1 - 2^30 < 0
 *    rounds it up: ceil(y / 2^31) = floor((y + 2^31 - 1) / 2^31)), negative iff ab < -2^30;
 *  - dividing an integer h by 2^n (n >= 1) rounding half away from zero is
 *    floor((h + 2^(n-1) - [h < 0]) / 2^n), and floor((floor(a / 2^31) + c) / 2^n) =
 *    floor((a + c * 2^31) / 2^(31+n)); so the result is
 *        floor((ab + 2^30 + 2^(30+n) - [ab < -2^30] * 2^31) / 2^(31+n))   (n >= 1),
 *        floor((ab + 2^30) / 2^31)                                          (n = 0),
 *    round = 2^30 + 2^(30+n) and fix = 2^31 (2^30 and 0 if n = 0).
 * The high multiply's saturation (x = M = INT32_MIN: ab = 2^62, h = INT32_MAX) comes out the same
 * for n >= 1, and 2^31 instead of INT32_MAX for n = 0: both beyond the clamp.  |ab| <= 2^62,
 * round <= 2^30 + 2^61: no overflow. */
static inline int8_t finish_tflite(uint32_t sum, const qchan* q, int64_t lo, int64_t hi, int32_t zp) {
  const int64_t ab = (int64_t)kit_wrapped((sum + q->bias) << q->left) * q->multiplier;
  int64_t r = kit_floor_shift(ab + q->round - (ab < -((int64_t)1 << 30) ? q->fix : 0), q->right);
  r = r < lo ? lo : r;
  r = r > hi ? hi : r;
  return (int8_t)(r + zp);
}

/* The output stage of one accumulator in the rounding of p (see finish(), finish_tflite()). */
static inline int8_t finish_any(uint32_t sum, const qchan* q, int64_t lo, int64_t hi, const qvanilla_conv_params* p) {
  return p->rounding == QVANILLA_ROUNDING_TFLITE ? finish_tflite(sum, q, lo, hi, p->output_zp)
                                                 : finish(sum, q, lo, hi, p->output_zp);
}

/* ---------------------------------------------------------------------------------------------
 * The output stage of rows of accumulators, QL channels at a time, vectorised.
 *
 * finish() costs a 64-bit product and a variable shift per output, which SSE2 has no vector form
 * of.  For one channel, with s = the accumulator plus its bias (int32, wrapped), R = 31 - shift:
 *     out(s) = clamp(output_zp + r(s), act_min, act_max),  r(s) = floor((s * M + 2^(R-1)) / 2^R).
 * r is monotonic in s (non-decreasing if M > 0, non-increasing if M < 0).  block_setup() picks
 * L < H with output_zp + r(L) and output_zp + r(H) equal to act_min and act_max (or to act_max and
 * act_min if M < 0): estimated (plateau()), then checked exactly with r() in 64-bit
 * integers.  Then out(s) = out(L) for s < L and out(H) for s > H, and no clamping happens in
 * between: out(s) = output_zp + r(clamp(s, L, H)).  When |L|, |H| <= 2^24 (floats hold every
 * integer up to 2^24):
 *     v = clamp(sign(M) * (s - s0) * 2^d, 0, (H - L) * 2^d), computed in float, s0 = the end of
 *         [L, H] where r is lowest (L if M > 0, H if M < 0): exact inside [L, H] (integers and
 *         power-of-two scalings), and monotonic (rounding is), so the clamp maps every s outside
 *         it to the right end exactly;
 *     out = floor((v * |M| + C) / 2^(R + d)) - 128,
 *         C = (s0 * M + 2^(R-1) - r(s0) * 2^R) * 2^d + (output_zp + r(s0) + 128) * 2^(R + d),
 * one unsigned 32 x 32 -> 64-bit product (SSE2's pmuludq), exact, since floor((s0 * M + v * |M|
 * / 2^d + 2^(R-1)) / 2^R) = r(s0 + sign(M) * v / 2^d).  The channels of a block share one shift
 * Rb = R + d (a vector shift has one count); the quotient is in [0, 255].  A block whose channels
 * do not all qualify (multipliers far below 2^30 or extreme shifts, which put L or H beyond 2^24
 * or the sum beyond 64 bits; a plateau too narrow for the estimate, possible if |M| > 2^R / 2)
 * takes finish().  A channel whose output does not depend on the accumulator (multiplier 0,
 * act_min = act_max) has v = 0.
 *
 * TFLite's rounding (finish_tflite()), for shift <= 0 (R = 31 - shift as above; a block with a
 * channel of shift > 0, whose int32 left shift may wrap, takes finish_tflite()):
 *     r(s) = floor((s * M + K(s)) / 2^R),  K(s) = 2^(R-1) + 2^30, less 2^31 where s * M < -2^30
 * (K = 2^30 if R = 31), again monotonic.  s * M grows with v, so the lanes take the second K from
 * one v on: v >= vt adds delta = 2^(31 + d) to C (C computed with K(s0); delta = 0 where every
 * s * M in [L, H] is on the side of s0). */
enum { QL = 16 }; /* channels per block (one vector of int8 outputs; = CB) */

typedef struct {
  uint32_t bias[QL];                /* the biases, input zero point folded in */
  float scale[QL], offset[QL];      /* v = clamp(s * scale + offset, bottom = 0, top) */
  float bottom[QL], top[QL];
  uint32_t m[QL];                   /* |M| */
  uint64_t c[QL];                   /* C */
  float vt[QL];                     /* TFLite: C + delta from v = vt on */
  uint64_t delta[QL];
  int32_t right;                    /* Rb, or 0: this block takes finish() (finish_tflite()) with qc */
  qchan qc[QL];                     /* in channel order */
} qblock;

/* K: what r(s) adds to sm = s * multiplier before the shift, upward or TFLite's (right >= 31). */
static int64_t rounding_term(int64_t sm, int right, int tflite) {
  if (!tflite) return (int64_t)1 << (right - 1);
  if (right == 31) return (int64_t)1 << 30;
  return ((int64_t)1 << (right - 1)) + ((int64_t)1 << 30) - (sm < -((int64_t)1 << 30) ? (int64_t)1 << 31 : 0);
}

/* r(s) = floor((s * multiplier + K) / 2^right), |s| <= 2^31, right in [1, 62] ([31, 62] if tflite). */
static int64_t rounded(int64_t s, int32_t multiplier, int right, int tflite) {
  const int64_t sm = s * multiplier;
  return kit_floor_shift(sm + rounding_term(sm, right, tflite), right);
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* The lane of a block holding channel j of the block: j, or in the transposed order of dense
 * convs' accumulator rows, 4 * (j % 4) + j / 4 (see pack_row). */
static size_t lane(size_t j, int transposed) { return transposed ? 4 * (j % 4) + j / 4 : j; }

/* floor(a / b), b > 0. */
static int64_t floor_div(int64_t a, int64_t b) { return a / b - (a % b != 0 && a < 0); }

/* The middle of the plateau where r(s) = k, rounded to an integer (ties upward): k * 2^right / M,
 * or in TFLite's rounding (skewed: R > 31) off by -2^30 / M (k > 0, K = 2^(R-1) + 2^30) or +2^30 / M
 * (k < 0, K = 2^(R-1) - 2^30; the plateau of 0 straddles the change of K and is centred on 0).
 * In 64-bit integers, |k| <= 255 and right <= 50: microcontrollers' FPUs have no double precision. */
static int64_t plateau(int64_t k, int right, int skewed, int32_t multiplier) {
  const int64_t skew = skewed ? (int64_t)1 << 30 : 0;
  int64_t n = k * ((int64_t)1 << right) - (k > 0 ? skew : k < 0 ? -skew : 0), m = multiplier; /* |n| < 2^59 */
  if (m < 0) {
    n = -n;
    m = -m;
  }
  return floor_div(2 * n + m, 2 * m); /* floor(n / m + 1/2) */
}

/* b = the output stage of the channels o0 .. o0 + n - 1 (n <= QL) of a table of `channels`, with
 * biases bias[0 .. n) (input zero point folded in), lanes in the order lane(); the lanes of
 * channels from n on are constant.  [L, H]: both ends on the plateaus where output_zp + r(s) is
 * act_min and act_max, estimated by their middles (the plateaus are at least two accumulators wide
 * when |M| < 2^R / 2, upward), then checked exactly; any such [L, H] will do. */
static void block_setup(qblock* b, const uint32_t* bias, const int32_t* channel_params, size_t channels, size_t o0,
                        size_t n, int transposed, const qvanilla_conv_params* p) {
  const int64_t limit = (int64_t)1 << 24;
  const int64_t zp = p->output_zp, amin = p->act_min, amax = p->act_max;
  const int tflite = p->rounding == QVANILLA_ROUNDING_TFLITE;
  int64_t L[QL], H[QL], base[QL];
  int right[QL], rb = 1;
  b->right = 0; /* finish(), unless every channel qualifies */
  for (size_t j = 0; j < QL; ++j) {
    b->bias[lane(j, transposed)] = j < n ? bias[j] : 0;
    b->qc[j] = channel(channel_params, channels, o0 + (j < n ? j : 0), j < n ? bias[j] : 0, p->rounding);
  }
#ifdef QVANILLA_MCU
  return; /* requant_columns() takes every block: it needs only qc */
#endif
  for (size_t j = 0; j < QL; ++j) {
    const size_t l = lane(j, transposed);
    const int32_t multiplier = j < n ? channel_params[channels + o0 + j] : 0;
    const int r = b->qc[j].right;
    right[l] = 0;
    b->m[l] = 0;
    base[l] = clamp64(zp, amin, amax); /* out(0) */
    if (multiplier == 0 || amin == amax) continue; /* out(s) = out(0) for every s */
    if (r > 50 || b->qc[j].left > 0) return;
    const int64_t ea = plateau(amin - zp, r, tflite && r > 31, multiplier);
    const int64_t eb = plateau(amax - zp, r, tflite && r > 31, multiplier);
    if (!(ea > -limit && ea < limit && eb > -limit && eb < limit)) return;
    L[l] = ea < eb ? ea : eb;
    H[l] = ea < eb ? eb : ea;
    const int64_t rl = rounded(L[l], multiplier, r, tflite), rh = rounded(H[l], multiplier, r, tflite);
    /* exactly: out(s) = out(L) below L, out(H) above H (r is monotonic), no clamping in between */
    if (zp + rl != (multiplier > 0 ? amin : amax) || zp + rh != (multiplier > 0 ? amax : amin)) return;
    b->m[l] = multiplier > 0 ? (uint32_t)multiplier : 0u - (uint32_t)multiplier;
    base[l] = zp + (multiplier > 0 ? rl : rh);
    right[l] = r;
    rb = r > rb ? r : rb;
  }
  for (size_t j = 0; j < QL; ++j) {
    const size_t l = lane(j, transposed);
    b->scale[l] = b->offset[l] = b->bottom[l] = b->top[l] = 0.0f; /* v = 0 */
    b->c[l] = (uint64_t)(base[l] + 128) << rb;
    b->vt[l] = 0.0f;
    b->delta[l] = 0;
    if (b->m[l] == 0) continue;
    const int32_t multiplier = channel_params[channels + o0 + j];
    const int r = right[l], d = rb - r;
    if (d > 30 || H[l] - L[l] > (int64_t)1 << 24 || H[l] - L[l] >= (int64_t)1 << (31 - d)) return; /* v < 2^31 */
    const int64_t s0 = multiplier > 0 ? L[l] : H[l], sm0 = s0 * multiplier;
    const float scale = (float)((int64_t)1 << d);
    b->scale[l] = multiplier > 0 ? scale : -scale;
    b->offset[l] = (float)(multiplier > 0 ? -s0 : s0) * scale;
    b->top[l] = (float)(H[l] - L[l]) * scale;
    /* (s0 * M + K(s0) - r(s0) * 2^r) in [0, 2^r), then the output, 128 too large; v * |M| + C (+ delta)
     * < 2^(rb + 9) <= 2^59 */
    b->c[l] = ((uint64_t)(sm0 + rounding_term(sm0, r, tflite) - (base[l] - zp) * ((int64_t)1 << r)) << d) +
              ((uint64_t)(base[l] + 128) << rb);
    if (tflite && r > 31 && sm0 < -((int64_t)1 << 30)) {
      /* k = the first step from s0 (v = k * 2^d) with s * M >= -2^30, where K gains 2^31 */
      const int64_t need = -((int64_t)1 << 30) - sm0, k = (need + b->m[l] - 1) / b->m[l];
      if (k <= H[l] - L[l]) { /* <= 2^24: vt exact in float */
        b->vt[l] = (float)k * scale;
        b->delta[l] = (uint64_t)1 << (31 + d);
      }
    }
  }
  b->right = rb;
}

/* o[i * QL + l] = 128 + the output of lane l of row i (acc + i * stride), in [0, 255], i < rows:
 * four lanes at a time over the rows, their parameters in registers, vectorised by gcc -O2
 * (cvtdq2ps, mulps, addps, maxps, minps, cvttps2dq, pmuludq, paddq, psrlq; TFLite's rounding
 * adds cmpps and a masked paddq). */
static ALWAYS_INLINE void lanes(const uint32_t* restrict acc, size_t stride, size_t rows, const qblock* restrict b,
                                uint32_t* restrict o, int tflite) {
  const int right = b->right;
  for (int g = 0; g < QL; g += 4) {
    for (size_t i = 0; i < rows; ++i) {
      for (int l = g; l < g + 4; ++l) {
        float v = (float)kit_wrapped(acc[i * stride + (size_t)l] + b->bias[l]) * b->scale[l] + b->offset[l];
        v = v > b->bottom[l] ? v : b->bottom[l]; /* maxps (a constant 0 would become a compare and an and) */
        v = v < b->top[l] ? v : b->top[l];       /* minps */
        uint64_t c = b->c[l];
        if (tflite) c += b->delta[l] & (0 - (uint64_t)(v >= b->vt[l])); /* a mask, not a branch */
        o[i * QL + (size_t)l] = (uint32_t)(((uint64_t)(uint32_t)(int32_t)v * b->m[l] + c) >> right);
      }
    }
  }
}

static void requant_lanes(const uint32_t* restrict acc, size_t stride, size_t rows, const qblock* restrict b,
                          uint32_t* restrict o) {
  lanes(acc, stride, rows, b, o, 0);
}

static void requant_lanes_tflite(const uint32_t* restrict acc, size_t stride, size_t rows, const qblock* restrict b,
                                 uint32_t* restrict o) {
  lanes(acc, stride, rows, b, o, 1);
}

static int little_endian(void) {
  const uint32_t one = 1;
  unsigned char first;
  memcpy(&first, &one, 1);
  return first == 1;
}

/* out[0 .. QL) = the outputs o[0 .. QL) of a block's row, each 128 too large.  Transposed (lane
 * 4*i + k holds channel 4*k + i), they are packed into bytes with shifts and ors, lane-wise: word
 * k of the output holds lanes k, 4 + k, 8 + k, 12 + k, in memory order on a little-endian machine. */
static ALWAYS_INLINE void pack_row(const uint32_t* restrict o, int8_t* restrict out, int transposed) {
  if (transposed && little_endian()) {
    uint32_t word[QL / 4];
    for (int k = 0; k < QL / 4; ++k) word[k] = (o[k] | o[4 + k] << 8 | o[8 + k] << 16 | o[12 + k] << 24) ^ 0x80808080u;
    memcpy(out, word, QL);
  } else {
    for (int j = 0; j < QL; ++j) out[j] = (int8_t)((int32_t)o[lane((size_t)j, transposed)] - 128);
  }
}

#ifdef QVANILLA_MCU
/* floor(x / 2^n) for 0 <= n < 32 (see kit_floor_shift()) */
static int32_t floor_shift32(int32_t x, int n) { return x < 0 ? ~(~x >> n) : x >> n; }

/* out[i * ostride + j] = finish_any(acc[i * stride + lane(j)]) for the nb channels of block b and
 * i < rows, a channel at a time so that its parameters stay in registers.  For right >= 32 (shift
 * < 0, as usual) floor(x / 2^right) = floor(floor(x / 2^32) / 2^(right - 32)): the product's high
 * word shifted, exact, in int32 (|x| < 2^63). */
static ALWAYS_INLINE void requant_columns(const uint32_t* acc, size_t stride, size_t rows, const qblock* b, size_t nb,
                                          int8_t* out, size_t ostride, int transposed, const qvanilla_conv_params* p,
                                          int tflite) {
  const int32_t lo = p->act_min - p->output_zp, hi = p->act_max - p->output_zp, zp = p->output_zp;
  for (size_t j = 0; j < nb; ++j) {
    const qchan q = b->qc[j];
    const uint32_t* a = acc + lane(j, transposed);
    int8_t* o = out + j;
    if (q.right < 32) {
      for (size_t i = 0; i < rows; ++i) {
        o[i * ostride] = tflite ? finish_tflite(a[i * stride], &q, lo, hi, zp) : finish(a[i * stride], &q, lo, hi, zp);
      }
      continue;
    }
    const int32_t multiplier = (int32_t)q.multiplier; /* an int32 of the table */
    const int n = q.right - 32;
    for (size_t i = 0; i < rows; ++i) {
      const int64_t ab = (int64_t)kit_wrapped((a[i * stride] + q.bias) << q.left) * multiplier;
      const int64_t x = ab + q.round - (tflite && ab < -((int64_t)1 << 30) ? q.fix : 0);
      int32_t r = floor_shift32((int32_t)kit_floor_shift(x, 32), n);
      r = r < lo ? lo : r;
      r = r > hi ? hi : r;
      o[i * ostride] = (int8_t)(r + zp);
    }
  }
}
#endif

/* The output stage of `rows` <= TILE rows of accumulators of n channels, row i at acc + i * stride
 * (in blocks of QL: channel j in blocks[j / QL], at j / QL * QL + lane(j % QL)), into
 * out + i * ostride. */
static void requant_rows(const uint32_t* acc, size_t stride, size_t rows, const qblock* blocks, size_t n, int8_t* out,
                         size_t ostride, int transposed, const qvanilla_conv_params* p) {
  const int64_t lo = p->act_min - p->output_zp, hi = p->act_max - p->output_zp;
  uint32_t o[TILE * QL];
  for (size_t j0 = 0; j0 < n; j0 += QL, ++blocks) {
    const size_t nb = n - j0 < QL ? n - j0 : QL;
#ifdef QVANILLA_MCU
    if (p->rounding == QVANILLA_ROUNDING_TFLITE) {
      requant_columns(acc + j0, stride, rows, blocks, nb, out + j0, ostride, transposed, p, 1);
    } else {
      requant_columns(acc + j0, stride, rows, blocks, nb, out + j0, ostride, transposed, p, 0);
    }
    continue;
#endif
    if (blocks->right == 0 && p->rounding == QVANILLA_ROUNDING_TFLITE) {
      for (size_t i = 0; i < rows; ++i) {
        for (size_t j = 0; j < nb; ++j) {
          out[i * ostride + j0 + j] = finish_tflite(acc[i * stride + j0 + lane(j, transposed)], &blocks->qc[j], lo,
                                                    hi, p->output_zp);
        }
      }
      continue;
    }
    if (blocks->right == 0) {
      for (size_t i = 0; i < rows; ++i) {
        for (size_t j = 0; j < nb; ++j) {
          out[i * ostride + j0 + j] = finish(acc[i * stride + j0 + lane(j, transposed)], &blocks->qc[j], lo, hi,
                                             p->output_zp);
        }
      }
      continue;
    }
    if (p->rounding == QVANILLA_ROUNDING_TFLITE) requant_lanes_tflite(acc + j0, stride, rows, blocks, o);
    else requant_lanes(acc + j0, stride, rows, blocks, o);
    for (size_t i = 0; i < rows; ++i) {
      if (nb == QL) {
        pack_row(o + i * QL, out + i * ostride + j0, transposed);
      } else {
        int8_t part[QL];
        pack_row(o + i * QL, part, transposed);
        for (size_t j = 0; j < nb; ++j) out[i * ostride + j0 + j] = part[j];
      }
    }
  }
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
  /* Last, as the header lists it (the shifts' range is the same in both roundings). */
  if (p->rounding != QVANILLA_ROUNDING_UPWARD && p->rounding != QVANILLA_ROUNDING_TFLITE) return QVANILLA_EROUNDING;
  return QVANILLA_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Dense conv */

#ifdef QVANILLA_SMLAD
static ALWAYS_INLINE int32_t load_pair(const int16_t* p) { /* two int16, as SMLAD reads them */
  int32_t v;
  memcpy(&v, p, sizeof(v));
  return v;
}

/* out0[0], out0[4], out1[0], out1[4] = x0 . w0, x0 . w1, x1 . w0, x1 . w1 over n (a multiple of 4)
 * entries.  SMLAD's sums wrap modulo 2^32 (setting the Q flag, which nothing reads), as the
 * unsigned sums of the plain C path do. */
static ALWAYS_INLINE void dot2x2(const int16_t* x0, const int16_t* x1, const int16_t* w0, const int16_t* w1,
                                 size_t n, uint32_t* out0, uint32_t* out1) {
  int32_t a0 = 0, a1 = 0, b0 = 0, b1 = 0;
  for (const int16_t* end = x0 + n; x0 < end; x0 += 4, x1 += 4, w0 += 4, w1 += 4) {
    int32_t u = load_pair(x0), v = load_pair(x1), p = load_pair(w0), q = load_pair(w1);
    a0 = __smlad(u, p, a0);
    a1 = __smlad(u, q, a1);
    b0 = __smlad(v, p, b0);
    b1 = __smlad(v, q, b1);
    u = load_pair(x0 + 2), v = load_pair(x1 + 2), p = load_pair(w0 + 2), q = load_pair(w1 + 2);
    a0 = __smlad(u, p, a0);
    a1 = __smlad(u, q, a1);
    b0 = __smlad(v, p, b0);
    b1 = __smlad(v, q, b1);
  }
  out0[0] = (uint32_t)a0; out0[4] = (uint32_t)a1;
  out1[0] = (uint32_t)b0; out1[4] = (uint32_t)b1;
}
#endif

/* out0[4*j] = sum_k x0[k] * w[j*ws + k] and out1[4*j] likewise for x1, j < 4, k < 8*k8 (the
 * transposed order of accumulator rows, see pack_row): a reduction per sum, which gcc
 * vectorises with pmaddwd (8 multiply-adds per instruction), then adds up each sum's lanes. */
static ALWAYS_INLINE void dot2x4(const int16_t* restrict x0, const int16_t* restrict x1, const int16_t* restrict w,
                                 size_t ws, size_t k8, uint32_t* restrict out0, uint32_t* restrict out1) {
#ifdef QVANILLA_SMLAD
  dot2x2(x0, x1, w, w + ws, k8 * KA, out0, out1);
  dot2x2(x0, x1, w + 2 * ws, w + 3 * ws, k8 * KA, out0 + 8, out1 + 8);
#else
  const int16_t* restrict w0 = w;
  const int16_t* restrict w1 = w + ws;
  const int16_t* restrict w2 = w + 2 * ws;
  const int16_t* restrict w3 = w + 3 * ws;
  uint32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0, b0 = 0, b1 = 0, b2 = 0, b3 = 0;
  const size_t n = k8 * KA;
  UNROLL4 /* a short reduction (constant k8) unrolled: no loop, no zeroed accumulators */
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
  out0[0] = a0; out0[4] = a1; out0[8] = a2; out0[12] = a3;
  out1[0] = b0; out1[4] = b1; out1[8] = b2; out1[12] = b3;
#endif
}

/* dot2x4 over the n windows (rows of kp = 8*k8 int16) of a tile, two at a time: the sums of
 * window i at a[i * stride + 4*j], j < 4 (the odd last window's partner writes `spare`). */
static ALWAYS_INLINE void dot_pairs(const int16_t* win, size_t n, size_t kp, size_t k8, const int16_t* w, uint32_t* a,
                                    size_t stride, uint32_t* spare) {
  for (size_t i = 0; i < n; i += 2) {
    const int pair = i + 1 < n;
    dot2x4(win + i * kp, win + (pair ? i + 1 : i) * kp, w, kp, k8, a + i * stride, pair ? a + (i + 1) * stride : spare);
  }
}

/* dot_pairs with the reduction's length a constant for the short ones (up to 64: 1x1 convs of up
 * to 64 channels), so that gcc unrolls it: their sums' horizontal additions are much of the work. */
NOINLINE static void dot_tile(const int16_t* win, size_t n, size_t kp, const int16_t* w, uint32_t* a, size_t stride,
                              uint32_t* spare) {
#ifdef QVANILLA_SMLAD
  dot_pairs(win, n, kp, kp / KA, w, a, stride, spare); /* SMLAD's loop gains little from unrolling */
#else
  switch (kp / KA) {
    case 1: dot_pairs(win, n, kp, 1, w, a, stride, spare); break;
    case 2: dot_pairs(win, n, kp, 2, w, a, stride, spare); break;
    case 3: dot_pairs(win, n, kp, 3, w, a, stride, spare); break;
    case 4: dot_pairs(win, n, kp, 4, w, a, stride, spare); break;
    case 5: dot_pairs(win, n, kp, 5, w, a, stride, spare); break;
    case 6: dot_pairs(win, n, kp, 6, w, a, stride, spare); break;
    case 7: dot_pairs(win, n, kp, 7, w, a, stride, spare); break;
    case 8: dot_pairs(win, n, kp, 8, w, a, stride, spare); break;
    default: dot_pairs(win, n, kp, kp / KA, w, a, stride, spare); break;
  }
#endif
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

/* The windows of the n output pixels from (*y, *x) on (in output order) as rows of kp int16, and
 * (*y, *x) moved past them.  A 1x1 kernel of stride 1 along rows whose ic is a multiple of KA
 * reads runs of consecutive pixels: their windows are the input's contiguous pixels, widened. */
static void gather_tile(int16_t* win, size_t kp, size_t n, const int8_t* input, const qvanilla_conv_params* p,
                        int32_t* y, int32_t* x) {
  const int runs = p->kh == 1 && p->kw == 1 && p->stride_w == 1 && kp == (size_t)p->ic;
  for (size_t i = 0; i < n;) {
    size_t run = 1;
    if (runs) { /* pixels [*x, *x + run) of row *y, all inside the image */
      const int64_t iy = (int64_t)*y * p->stride_h - p->pad_top, ix = (int64_t)*x - p->pad_left;
      run = (size_t)(p->ow - *x) < n - i ? (size_t)(p->ow - *x) : n - i;
      if (iy >= 0 && iy < p->ih && ix >= 0 && ix + (int64_t)run <= p->iw) {
        widen(win + i * kp, input + ((size_t)iy * p->iw + (size_t)ix) * kp, run * kp);
      } else {
        run = 1;
        gather(win + i * kp, kp, input, p, *y, *x);
      }
    } else {
      gather(win + i * kp, kp, input, p, *y, *x);
    }
    i += run;
    *x += (int32_t)run;
    if (*x == p->ow) {
      *x = 0;
      ++*y;
    }
  }
}

/* The dense conv for K = kh*kw*ic <= KMAX.  packed: OCP rows of kp int16 and the folded bias in
 * channel_params; else raw HWIO int8 weights (with weight_zp), packed into quad (OB*KMAX int16)
 * four channels at a time for each tile (their biases folded on the first).  Per chunk of up to QCH output
 * channels (their output stages prepared once) and tile of output pixels: the windows, the
 * accumulators of every pixel and channel (dot2x4, two pixels by four channels at a time, the four
 * channels' weights staying in L1 while the tile's windows stream), then the output rows.  A row
 * of accumulators holds the chunk's channels in blocks of QL, transposed (lane()). */
static void conv_tiles(const int8_t* input, const int16_t* packed, const int8_t* raw, int16_t* quad,
                       const int32_t* channel_params, int8_t* output, const qvanilla_conv_params* p) {
  int16_t win[WIN];
  uint32_t acc[TILE * QCH], bias[QCH], sums[QCH], spare[QL];
  qblock blocks[QCH / QL];
  const size_t oc = (size_t)p->oc, K = (size_t)p->kh * p->kw * p->ic, kp = (K + KA - 1) / KA * KA;
  const size_t pixels = (size_t)p->oh * p->ow;
  const size_t tile = WIN / kp < TILE ? WIN / kp : TILE; /* >= 2 */
  for (size_t c0 = 0; c0 < oc; c0 += QCH) {
    const size_t nc = oc - c0 < QCH ? oc - c0 : QCH, stride = (nc + QL - 1) / QL * QL;
    for (size_t j = (nc + OB - 1) / OB * OB; j < stride; ++j) { /* lanes no dot2x4 writes */
      for (size_t i = 0; i < tile; ++i) acc[i * stride + j / QL * QL + lane(j % QL, 1)] = 0;
    }
    int32_t y = 0, x = 0; /* the next pixel to gather */
    for (size_t first = 0; first < pixels; first += tile) {
      const size_t n = pixels - first < tile ? pixels - first : tile;
      gather_tile(win, kp, n, input, p, &y, &x);
      for (size_t o0 = c0; o0 < c0 + nc; o0 += OB) {
        if (packed == NULL) { /* rows o0 .. o0+3, zero beyond oc and K */
          const size_t no = oc - o0 < OB ? oc - o0 : OB;
          uint32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0; /* the rows' sums, in registers */
          for (size_t k = 0; k < K; ++k) {
            const int8_t* r = raw + k * oc + o0;
            const int16_t v0 = (int16_t)(r[0] - p->weight_zp), v1 = no > 1 ? (int16_t)(r[1] - p->weight_zp) : 0;
            const int16_t v2 = no > 2 ? (int16_t)(r[2] - p->weight_zp) : 0, v3 = no > 3 ? (int16_t)(r[3] - p->weight_zp) : 0;
            quad[k] = v0;
            quad[kp + k] = v1;
            quad[2 * kp + k] = v2;
            quad[3 * kp + k] = v3;
            s0 += (uint32_t)v0;
            s1 += (uint32_t)v1;
            s2 += (uint32_t)v2;
            s3 += (uint32_t)v3;
          }
          const uint32_t sum[OB] = {s0, s1, s2, s3};
          for (size_t j = 0; j < no; ++j) sums[o0 - c0 + j] = sum[j]; /* used on the first tile */
          for (size_t j = 0; j < OB; ++j) fill(quad + j * kp + K, 0, kp - K); /* rows beyond oc: zeros above */
        }
        const int16_t* w = packed != NULL ? packed + o0 * kp : quad;
        /* channels o0 + j at a[4*j] */
        dot_tile(win, n, kp, w, acc + (o0 - c0) / QL * QL + lane((o0 - c0) % QL, 1), stride, spare);
      }
      if (first == 0) { /* the output stages: biases, with bias - input_zp * sum (w - weight_zp) if plain */
        for (size_t j = 0; j < nc; ++j) {
          bias[j] = (uint32_t)channel_params[c0 + j] - (packed == NULL ? sums[j] * (uint32_t)p->input_zp : 0);
        }
        for (size_t j = 0; j < nc; j += QL) {
          block_setup(&blocks[j / QL], bias + j, channel_params, oc, c0 + j, nc - j < QL ? nc - j : QL, 1, p);
        }
      }
      requant_rows(acc, stride, n, blocks, nc, output + first * oc + c0, oc, 1, p);
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
        const qchan q = channel(channel_params, oc, o, (uint32_t)channel_params[o], p->rounding);
        out[o] = finish_any(sum, &q, lo, hi, p);
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
          const qchan q = channel(channel_params, (size_t)p->oc, (size_t)(o0 + o), (uint32_t)channel_params[o0 + o],
                                  p->rounding);
          out[o] = finish_any(acc[o], &q, lo, hi, p);
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
                                int32_t act_min, int32_t act_max, int32_t rounding) {
  const qvanilla_conv_params p = {ih,       iw,       ic,      oh,       ow,        oc,        kh,
                                  kw,       stride_h, stride_w, pad_top, pad_left, input_zp, weight_zp,
                                  output_zp, act_min,  act_max,  rounding};
  return qvanilla_conv2d_s8(input, weights, channel_params, output, &p);
}

int32_t qvanilla_conv2d_nhwc_packed_s8(int8_t* input, int16_t* packed_weights, int32_t* channel_params, int8_t* output,
                                       int32_t ih, int32_t iw, int32_t ic, int32_t oh, int32_t ow, int32_t oc,
                                       int32_t kh, int32_t kw, int32_t stride_h, int32_t stride_w, int32_t pad_top,
                                       int32_t pad_left, int32_t input_zp, int32_t output_zp, int32_t act_min,
                                       int32_t act_max, int32_t rounding) {
  const qvanilla_conv_params p = {ih,      iw,       ic,      oh,      ow,        oc,        kh,
                                  kw,      stride_h, stride_w, pad_top, pad_left, input_zp, 0,
                                  output_zp, act_min, act_max, rounding};
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

/* a = 0 if first, else acc: where a run of taps starts summing (j < CB). */
static ALWAYS_INLINE void start_sums(uint32_t* restrict a, const uint32_t* restrict acc, int first) {
  if (first) {
    for (int j = 0; j < CB; ++j) a[j] = 0;
  } else {
    for (int j = 0; j < CB; ++j) a[j] = acc[j];
  }
}

/* acc[j] (+)= sum over the taps t < nt of in[t][at + j] * w[t][at + j], j < CB (acc starts at 0 if
 * first): vectorised over j (16 int8 inputs widened, multiplied by 16 int16 weights, into 16
 * 32-bit sums: pmullw, pmulhw and unpacking). */
static void dw_taps(uint32_t* restrict acc, const int8_t* const* in, const int16_t* const* w, size_t at, int nt,
                    int first) {
  uint32_t a[CB];
  start_sums(a, acc, first);
  for (int t = 0; t < nt; ++t) {
    const int8_t* restrict s = in[t] + at;
    const int16_t* restrict wt = w[t] + at;
    for (int j = 0; j < CB; ++j) a[j] += (uint32_t)(s[j] * (int32_t)wt[j]); /* |s * w| <= 2^22 */
  }
  for (int j = 0; j < CB; ++j) acc[j] = a[j];
}

/* dw_taps for weights in [-128, 127] and an even nt, two taps at a time in 16-bit lanes: the two
 * products are in [-16256, 16384], so their sum plus 32767 is in [255, 65535], exact in uint16,
 * then widened (without sign) and added: pmullw, paddw and unpacking, half the 32-bit work.  The
 * sums come out 32767 too large per pair of taps (the biases take it back). */
static void dw_pairs(uint32_t* restrict acc, const int8_t* const* in, const int16_t* const* w, size_t at, int nt,
                     int first) {
  uint32_t a[CB];
  start_sums(a, acc, first);
  for (int t = 0; t < nt; t += 2) {
    const int8_t* restrict s0 = in[t] + at;
    const int8_t* restrict s1 = in[t + 1] + at;
    const int16_t* restrict w0 = w[t] + at;
    const int16_t* restrict w1 = w[t + 1] + at;
    for (int j = 0; j < CB; ++j) a[j] += (uint16_t)(s0[j] * w0[j] + s1[j] * w1[j] + 32767);
  }
  for (int j = 0; j < CB; ++j) acc[j] = a[j];
}

/* dst[0 .. n) = src[0 .. n), 0 < n < 16, with two fixed-size (possibly overlapping) copies. */
static void copy_short(int8_t* dst, const int8_t* src, size_t n) {
  if (n >= 8) {
    memcpy(dst, src, 8);
    memcpy(dst + n - 8, src + n - 8, 8);
  } else if (n >= 4) {
    memcpy(dst, src, 4);
    memcpy(dst + n - 4, src + n - 4, 4);
  } else if (n >= 2) {
    memcpy(dst, src, 2);
    memcpy(dst + n - 2, src + n - 2, 2);
  } else {
    dst[0] = src[0];
  }
}

/* Depthwise conv of the channels [c0, c0 + nc), nc <= DW_BLOCK, with weights w[t*ws + c - c0]
 * (int16, weight_zp subtracted; in [-128, 127] if paired: dw_pairs, whose excess the biases of
 * `blocks` take back) and the output stages `blocks` (folded biases).  Per output pixel and group
 * of up to DW_TAPS taps: pointers to the taps' input (at fixed offsets from the first tap's when
 * the window is inside the image, zp_row for taps outside it) and weights (an odd group gets a tap
 * of zero weights if paired), then CB channels at a time (the last nc % CB channels through
 * zero-padded copies of their inputs and weights) into a row of accumulators; the output stage
 * runs on up to DW_ACC / stride (at most TILE) consecutive pixels at a time. */
static void dw_block(const int8_t* input, const int16_t* w, size_t ws, const qblock* blocks, int8_t* output,
                     size_t c0, size_t nc, int paired, const qvanilla_conv_params* p) {
  const size_t channels = (size_t)p->ic, taps = (size_t)p->kh * p->kw, full = nc - nc % CB, rest = nc - full;
  const size_t stride = (nc + CB - 1) / CB * CB, pixels = DW_ACC / stride < TILE ? DW_ACC / stride : TILE; /* >= 1 */
  int8_t zp_row[DW_BLOCK]; /* what a tap outside the image reads */
  int16_t zero_w[DW_BLOCK];
  const int8_t* in[DW_TAPS + 1];
  const int16_t* wr[DW_TAPS + 1];
  const int8_t* tail_in[DW_TAPS + 1];
  const int16_t* tail_wr[DW_TAPS + 1];
  size_t offset[DW_TAPS]; /* of each tap of the first group from the window's corner, inside the image */
  int8_t tail_x[(DW_TAPS + 1) * CB];
  int16_t tail_w[(DW_TAPS + 1) * CB];
  size_t tail_w_group = (size_t)-1, wr_group = (size_t)-1; /* the tap groups tail_w and wr hold */
  uint32_t acc[DW_ACC];
  for (size_t c = 0; c < nc; ++c) {
    zp_row[c] = (int8_t)p->input_zp;
    zero_w[c] = 0;
  }
  for (int t = 0; t <= DW_TAPS; ++t) {
    tail_in[t] = tail_x + (size_t)t * CB;
    tail_wr[t] = tail_w + (size_t)t * CB;
  }
  for (size_t i = 0; i < (DW_TAPS + 1) * CB; ++i) {
    tail_x[i] = 0;
    tail_w[i] = 0;
  }
  for (size_t t = 0; t < taps && t < DW_TAPS; ++t) {
    offset[t] = ((t / (size_t)p->kw) * (size_t)p->iw + t % (size_t)p->kw) * channels;
  }
  const size_t total = (size_t)p->oh * p->ow;
  int32_t y = 0, x = 0; /* the next output pixel */
  for (size_t first = 0; first < total; first += pixels) {
    const size_t np = total - first < pixels ? total - first : pixels;
    for (size_t i = 0; i < np; ++i) {
      const int32_t iy0 = y * p->stride_h - p->pad_top, ix0 = x * p->stride_w - p->pad_left; /* fit: extent_ok() */
      const int inside = iy0 >= 0 && iy0 <= p->ih - p->kh && ix0 >= 0 && ix0 <= p->iw - p->kw;
      uint32_t* row = acc + i * stride;
      for (size_t t0 = 0; t0 < taps; t0 += DW_TAPS) {
        int nt = taps - t0 < DW_TAPS ? (int)(taps - t0) : DW_TAPS;
        if (inside && t0 == 0) {
          const int8_t* corner = input + ((size_t)iy0 * p->iw + (size_t)ix0) * channels + c0;
          for (int t = 0; t < nt; ++t) in[t] = corner + offset[t];
        } else {
          int32_t ky = (int32_t)(t0 / (size_t)p->kw), kx = (int32_t)(t0 % (size_t)p->kw);
          for (int t = 0; t < nt; ++t) {
            const int32_t iy = iy0 + ky, ix = ix0 + kx;
            const int tap_inside = iy >= 0 && iy < p->ih && ix >= 0 && ix < p->iw;
            in[t] = tap_inside ? input + ((size_t)iy * p->iw + ix) * channels + c0 : zp_row;
            if (++kx == p->kw) {
              kx = 0;
              ++ky;
            }
          }
        }
        if (t0 != wr_group) {
          for (int t = 0; t < nt; ++t) wr[t] = w + (t0 + (size_t)t) * ws;
          wr[nt] = zero_w; /* a tap of zero weights, for an odd group if paired */
          wr_group = t0;
        }
        if (paired && nt % 2) {
          in[nt] = zp_row;
          ++nt;
        }
        for (size_t c = 0; c < full; c += CB) {
          if (paired) dw_pairs(row + c, in, wr, c, nt, t0 == 0);
          else dw_taps(row + c, in, wr, c, nt, t0 == 0);
        }
        if (rest == 0) continue;
        if (tail_w_group != t0) {
          for (int t = 0; t < nt; ++t) {
            for (size_t j = 0; j < rest; ++j) tail_w[(size_t)t * CB + j] = wr[t][full + j];
          }
          tail_w_group = t0;
        }
        for (int t = 0; t < nt; ++t) copy_short(tail_x + (size_t)t * CB, in[t] + full, rest);
        if (paired) dw_pairs(row + full, tail_in, tail_wr, 0, nt, t0 == 0);
        else dw_taps(row + full, tail_in, tail_wr, 0, nt, t0 == 0);
      }
      if (++x == p->ow) {
        x = 0;
        ++y;
      }
    }
    requant_rows(acc, stride, np, blocks, nc, output + first * channels + c0, channels, 0, p);
  }
}

/* packed: [tap][channel] int16 with folded biases; else raw [tap][channel] int8 and weight_zp. */
static void depthwise(const int8_t* input, const int16_t* packed, const int8_t* raw, const int32_t* channel_params,
                      int8_t* output, const qvanilla_conv_params* p) {
  const size_t channels = (size_t)p->ic, taps = (size_t)p->kh * p->kw;
  qblock blocks[DW_BLOCK / QL];
  uint32_t bias[DW_BLOCK];
  int16_t wbuf[DW_WBUF];
  size_t block = DW_BLOCK;
  if (packed == NULL) { /* a block's weights must fit wbuf */
    block = DW_WBUF / taps < DW_BLOCK ? DW_WBUF / taps : DW_BLOCK;
    if (block >= QL) block -= block % QL;
    if (block == 0) block = 1;
  }
  for (size_t c0 = 0; c0 < channels; c0 += block) {
    const size_t nc = channels - c0 < block ? channels - c0 : block;
    for (size_t c = 0; c < nc; ++c) bias[c] = (uint32_t)channel_params[c0 + c];
    if (packed == NULL && taps * nc <= DW_WBUF) {
      for (size_t c = 0; c < nc; ++c) {
        uint32_t sum = 0;
        for (size_t t = 0; t < taps; ++t) {
          const int16_t v = (int16_t)(raw[t * channels + c0 + c] - p->weight_zp);
          wbuf[t * nc + c] = v;
          sum += (uint32_t)v;
        }
        bias[c] -= sum * (uint32_t)p->input_zp;
      }
    }
    if (packed != NULL || taps * nc <= DW_WBUF) {
      const int16_t* w = packed != NULL ? packed + c0 : wbuf;
      const size_t ws = packed != NULL ? channels : nc;
      int16_t lo[CB] = {0}, hi[CB] = {0}; /* the weights' range: in [-128, 127], dw_pairs */
      for (size_t t = 0; t < taps; ++t) {
        const int16_t* r = w + t * ws;
        size_t c = 0;
        for (; c + CB <= nc; c += CB) { /* blocks of 16 vectorise (pminsw, pmaxsw) */
          for (int j = 0; j < CB; ++j) {
            lo[j] = r[c + j] < lo[j] ? r[c + j] : lo[j];
            hi[j] = r[c + j] > hi[j] ? r[c + j] : hi[j];
          }
        }
        for (; c < nc; ++c) {
          lo[0] = r[c] < lo[0] ? r[c] : lo[0];
          hi[0] = r[c] > hi[0] ? r[c] : hi[0];
        }
      }
      int paired = 1;
      for (int j = 0; j < CB; ++j) paired = paired && lo[j] >= -128 && hi[j] <= 127;
      if (paired) { /* dw_pairs' excess: 32767 per pair of taps of each group of DW_TAPS */
        const size_t groups = taps / DW_TAPS, last = taps % DW_TAPS;
        const uint32_t excess = 32767u * (uint32_t)(groups * (DW_TAPS / 2) + (last + 1) / 2);
        for (size_t c = 0; c < nc; ++c) bias[c] -= excess;
      }
      for (size_t c = 0; c < nc; c += QL) {
        block_setup(&blocks[c / QL], bias + c, channel_params, channels, c0 + c, nc - c < QL ? nc - c : QL, 0, p);
      }
      dw_block(input, w, ws, blocks, output, c0, nc, paired, p);
      continue;
    }
    /* More than DW_WBUF taps: one channel at a time, its weights in turns of DW_WBUF taps. */
    const int64_t lo = p->act_min - p->output_zp, hi = p->act_max - p->output_zp;
    for (size_t c = c0; c < c0 + nc; ++c) {
      const qchan qc = channel(channel_params, channels, c, (uint32_t)channel_params[c], p->rounding);
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
          output[((size_t)y * p->ow + x) * channels + c] = finish_any(sum, &qc, lo, hi, p);
        }
      }
    }
  }
}

int32_t qvanilla_depthwise_conv2d_nhwc_s8(int8_t* input, int8_t* weights, int32_t* channel_params, int8_t* output,
                                          int32_t ih, int32_t iw, int32_t channels, int32_t oh, int32_t ow,
                                          int32_t kh, int32_t kw, int32_t stride_h, int32_t stride_w,
                                          int32_t pad_top, int32_t pad_left, int32_t input_zp, int32_t weight_zp,
                                          int32_t output_zp, int32_t act_min, int32_t act_max, int32_t rounding) {
  const qvanilla_conv_params p = {ih,      iw,       channels, oh,      ow,        channels,  kh,
                                  kw,      stride_h, stride_w, pad_top, pad_left, input_zp, weight_zp,
                                  output_zp, act_min, act_max, rounding};
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
                                                 int32_t act_max, int32_t rounding) {
  const qvanilla_conv_params p = {ih,      iw,       channels, oh,      ow,        channels,  kh,
                                  kw,      stride_h, stride_w, pad_top, pad_left, input_zp, 0,
                                  output_zp, act_min, act_max, rounding};
  const int32_t status = check(input, packed_weights, channel_params, output, &p, DEPTHWISE_PACKED);
  if (status != QVANILLA_OK) return status;
  depthwise(input, packed_weights, NULL, channel_params, output, &p);
  return QVANILLA_OK;
}
