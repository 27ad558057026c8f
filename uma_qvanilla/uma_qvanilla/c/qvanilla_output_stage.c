/* QVanilla's output stage: requantization, zero point and clamp of rows of accumulators. */
#include "qvanilla_internal.h"

qchan qvanilla_channel(const qvanilla_channels* c, size_t o, uint32_t bias, int32_t rounding) {
  const int32_t shift = c->shift[o];
  qchan q;
  q.bias = bias;
  q.multiplier = c->multiplier[o];
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
#ifndef QVANILLA_MCU /* the lanes' set-up: hosts only */
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


/* About the middle of the plateau where r(s) = k: k * 2^right / M, or in TFLite's rounding
 * (skewed: R > 31) off by -2^30 / M (k > 0, K = 2^(R-1) + 2^30) or +2^30 / M (k < 0,
 * K = 2^(R-1) - 2^30; the plateau of 0 straddles the change of K and is centred on 0), |k| <= 255,
 * right <= 50.  An estimate (block_setup checks its ends exactly), in double precision: a 64-bit
 * integer division per end took a fifth of a small network's time (only the vector output stage
 * of hosts calls this; microcontrollers take requant_columns). */
static int64_t plateau(int64_t k, int right, int skewed, int32_t multiplier) {
  const double skew = skewed ? 1073741824.0 : 0.0; /* 2^30 */
  const double n = (double)k * (double)((int64_t)1 << right) - (k > 0 ? skew : k < 0 ? -skew : 0.0);
  const double middle = n / multiplier + 0.5; /* |n / M| < 2^59: fits an int64 */
  const int64_t e = (int64_t)middle;          /* truncated: floor, for a negative middle one less */
  return (double)e > middle ? e - 1 : e;
}

/* b = the output stage of the channels o0 .. o0 + n - 1 (n <= QL) of a table of `channels`, with
 * biases bias[0 .. n) (input zero point folded in), lanes in the order lane(); the lanes of
 * channels from n on are constant.  [L, H]: both ends on the plateaus where output_zp + r(s) is
 * act_min and act_max, estimated by their middles (the plateaus are at least two accumulators wide
 * when |M| < 2^R / 2, upward), then checked exactly; any such [L, H] will do. */
enum { FEW_PIXELS = 8 };

/* The lanes' part of qvanilla_block_setup(): 1 and b->right set if every channel qualifies, else 0. */
static int lanes_setup(qblock* b, const qvanilla_channels* c, size_t o0, size_t n, int transposed,
                       const qvanilla_conv* p) {
  const int64_t limit = (int64_t)1 << 24;
  const int64_t zp = p->output_zp, amin = p->act_min, amax = p->act_max;
  const int tflite = p->rounding == QVANILLA_ROUNDING_TFLITE;
  int64_t L[QL], H[QL], base[QL];
  int right[QL], rb = 1;
  for (size_t j = 0; j < QL; ++j) {
    const size_t l = lane(j, transposed);
    const int32_t multiplier = j < n ? c->multiplier[o0 + j] : 0;
    right[l] = 0;
    b->m[l] = 0;
    base[l] = clamp64(zp, amin, amax); /* out(0) */
    if (multiplier == 0 || amin == amax) continue; /* out(s) = out(0) for every s */
    const int32_t shift = c->shift[o0 + j];      /* qvanilla_channel()'s right and left */
    const int r = tflite ? 31 + (shift < 0 ? -shift : 0) : 31 - shift;
    if (r > 50 || (tflite && shift > 0)) return 0;
    const int64_t ea = plateau(amin - zp, r, tflite && r > 31, multiplier);
    const int64_t eb = plateau(amax - zp, r, tflite && r > 31, multiplier);
    if (!(ea > -limit && ea < limit && eb > -limit && eb < limit)) return 0;
    L[l] = ea < eb ? ea : eb;
    H[l] = ea < eb ? eb : ea;
    const int64_t rl = rounded(L[l], multiplier, r, tflite), rh = rounded(H[l], multiplier, r, tflite);
    /* exactly: out(s) = out(L) below L, out(H) above H (r is monotonic), no clamping in between */
    if (zp + rl != (multiplier > 0 ? amin : amax) || zp + rh != (multiplier > 0 ? amax : amin)) return 0;
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
    const int32_t multiplier = c->multiplier[o0 + j];
    const int r = right[l], d = rb - r;
    if (d > 30 || H[l] - L[l] > (int64_t)1 << 24 || H[l] - L[l] >= (int64_t)1 << (31 - d)) return 0; /* v < 2^31 */
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
      const int64_t need = -((int64_t)1 << 30) - sm0, m = b->m[l];
      int64_t k = (int64_t)((double)need / (double)m); /* ceil(need / m): estimated, then made exact */
      while (k * m < need) ++k;
      while (k > 0 && (k - 1) * m >= need) --k;
      if (k <= H[l] - L[l]) { /* <= 2^24: vt exact in float */
        b->vt[l] = (float)k * scale;
        b->delta[l] = (uint64_t)1 << (31 + d);
      }
    }
  }
  b->right = rb;
  return 1;
}

#endif

void qvanilla_block_setup(qblock* b, const uint32_t* bias, const qvanilla_channels* c, size_t o0, size_t n,
                          int transposed, const qvanilla_conv* p) {
#ifdef QVANILLA_MCU
  (void)b, (void)bias, (void)c, (void)o0, (void)n, (void)transposed, (void)p; /* requant_columns() (Helium:
  requant_vectors()) make each channel's parameters as they run */
#else
#ifdef QVANILLA_AVX2
  if (p->avx2) return; /* qvanilla_requant_avx2() makes each block's parameters as it runs */
#endif
  for (size_t j = 0; j < QL; ++j) b->bias[lane(j, transposed)] = j < n ? bias[j] : 0;
  /* The lanes' set-up costs about as much per channel as finish() does on a few outputs: a layer
   * of few pixels takes finish() (its outputs are the same); qc only where finish() runs */
  if ((int64_t)p->oh * p->ow > FEW_PIXELS && lanes_setup(b, c, o0, n, transposed, p)) return;
  b->right = 0; /* finish() (finish_tflite()) with qc */
  for (size_t j = 0; j < QL; ++j) {
    b->qc[j] = qvanilla_channel(c, o0 + (j < n ? j : 0), j < n ? bias[j] : 0, p->rounding);
  }
#endif
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

/* The activation clamps nothing int8 holds (no activation, or a ReLU whose output zero point is
 * -128: the usual case): one saturation (SSAT) instead of two compares. */
static int whole_range(int32_t lo, int32_t hi) { return lo == -128 && hi == 127; }

/* One channel's column of rows outputs (see requant_columns()), usual shifts. */
static ALWAYS_INLINE void columns(const uint32_t* a, size_t stride, int8_t* o, size_t rows, size_t ostride,
                                  int32_t bias, int32_t multiplier, int32_t add, int last, int32_t lo, int32_t hi,
                                  int tflite, int whole) {
  for (const int8_t* end = o + rows * ostride; o != end; o += ostride, a += stride) {
    const int64_t ab = (int64_t)kit_wrapped(*a + (uint32_t)bias) * multiplier;
    int64_t t = ab;
    if (tflite) {
      t = ab + ((int64_t)1 << 30);
      t -= t < 0 ? (int64_t)1 << 31 : 0;
    }
    int32_t r = floor_shift32(kit_wrapped((uint32_t)((uint64_t)t >> 32)) + add, last);
#ifdef QVANILLA_SMLAD /* the DSP variant (arm_acle.h) */
    if (whole) {
      *o = (int8_t)__ssat(r, 8);
      continue;
    }
#else
    (void)whole;
#endif
    r = r < lo ? lo : r;
    r = r > hi ? hi : r;
    *o = (int8_t)r;
  }
}

/* out[i * ostride + j] = finish_any(acc[i * stride + lane(j)]) for the nb channels o0 + j of the
 * table c (biases bias[j]) and i < rows, a channel at a time so that its parameters stay in
 * registers (made from the table here: about as many instructions as loading them ready-made).  For the usual shifts,
 * in 32-bit words (x = sum + bias, ab = x * multiplier, and the output zero point added before the
 * last shift, where it cannot overflow):
 *  - upward, right = 31 - shift in [33, 54] (n = right - 32 in [1, 22]):
 *    floor((ab + 2^(right-1)) / 2^right) = floor((floor(ab / 2^32) + 2^(n-1)) / 2^n) (the added
 *    term is a multiple of 2^32), floor(ab / 2^32) the product's high word (|high| <= 2^30);
 *  - TFLite, right = 31 - shift in [33, 54] (n = right - 31 in [2, 23]): finish_tflite()'s
 *    floor((ab + 2^30 + 2^(30+n) - [ab < -2^30] * 2^31) / 2^(31+n)): with u = ab + 2^30 (one
 *    SMLAL), less 2^31 if u < 0 (its high word's sign), then 2^(n-2) added to the high word, whose
 *    floor(/ 2^(n-1)) it is;
 * other shifts take finish() (finish_tflite()). */
static ALWAYS_INLINE void requant_columns(const uint32_t* acc, size_t stride, size_t rows, const uint32_t* biases,
                                          const qvanilla_channels* c, size_t o0, size_t nb, int8_t* out,
                                          size_t ostride, int transposed, const qvanilla_conv* p, int tflite) {
  const int32_t lo = p->act_min, hi = p->act_max, zp = p->output_zp;
  for (size_t j = 0; j < nb; ++j) {
    const int32_t shift = c->shift[o0 + j], multiplier = c->multiplier[o0 + j];
    const int right = tflite ? 31 + (shift < 0 ? -shift : 0) : 31 - shift; /* qvanilla_channel()'s */
    const uint32_t* a = acc + lane(j, transposed);
    int8_t* o = out + j;
    if (right < 33 || right > 54) {
      const qchan q = qvanilla_channel(c, o0 + j, biases[j], p->rounding);
      for (size_t i = 0; i < rows; ++i) {
        o[i * ostride] = tflite ? finish_tflite(a[i * stride], &q, lo - zp, hi - zp, zp)
                                : finish(a[i * stride], &q, lo - zp, hi - zp, zp);
      }
      continue;
    }
    const int n = right - (tflite ? 31 : 32); /* the last shift, +1 for TFLite's */
    const int32_t bias = kit_wrapped(biases[j]), up = (int32_t)1 << (tflite ? n - 2 : n - 1);
    const int32_t add = up + zp * ((int32_t)1 << (tflite ? n - 1 : n)); /* |add| <= 2^29 + 2^21 */
    const int last = tflite ? n - 1 : n;
    if (whole_range(lo, hi)) {
      columns(a, stride, o, rows, ostride, bias, multiplier, add, last, -128, 127, tflite, 1);
    } else {
      columns(a, stride, o, rows, ostride, bias, multiplier, add, last, lo, hi, tflite, 0);
    }
  }
}
#endif

#ifdef QVANILLA_MVE
/* requant_columns in Helium, four lanes of a row at a time (x = sum + bias, n = right - 31):
 *  - TFLite: h = VQRDMULH(x << left, multiplier) is gemmlowp's SaturatingRoundingDoublingHighMul
 *    (floor((ab + 2^30) / 2^31), INT32_MAX for INT32_MIN * INT32_MIN), then h / 2^n rounded half
 *    away from zero: VRSHL by -n (adds 2^(n-1), then shifts; no overflow) of h - 1 where h < 0 and
 *    n > 0 (VQADD: h > INT32_MIN, so never saturates);
 *  - upward, n >= 1: floor((ab + 2^(30+n)) / 2^(31+n)) = VRSHL by -n of VQDMULH(x, multiplier) =
 *    floor(ab / 2^31) (saturated only for INT32_MIN * INT32_MIN, which changes no rounded result);
 *    a group of lanes with a channel of shift >= 0 (n <= 0) takes finish();
 * then clamped to the activation less output_zp and output_zp added, as finish().  The lanes of
 * channels from nb on are not stored. */
enum { UPWARD, TFLITE, TFLITE_ANY }; /* TFLITE: no left shift, every lane's n >= 1 */

/* The rows of one group of four lanes, its parameters in vectors (see requant_vectors()). */
static ALWAYS_INLINE void vector_rows(const uint32_t* a, size_t stride, size_t rows, int8_t* o, size_t ostride,
                                      uint32x4_t offsets, mve_pred16_t active, int32x4_t vb, int32x4_t vm,
                                      int32x4_t vl, int32x4_t vr, int32x4_t vf, int32x4_t lo, int32x4_t hi,
                                      int32_t zp, int kind) {
  for (const int8_t* end = o + rows * ostride; o != end; a += stride, o += ostride) {
    const int32x4_t x = vaddq_s32(vreinterpretq_s32_u32(vld1q_u32(a)), vb);
    int32x4_t r;
    if (kind == UPWARD) {
      r = vrshlq_s32(vqdmulhq_s32(x, vm), vr);
    } else if (kind == TFLITE) {
      const int32x4_t h = vqrdmulhq_s32(x, vm);
      r = vrshlq_s32(vqaddq_s32(h, vshrq_n_s32(h, 31)), vr);
    } else {
      const int32x4_t h = vqrdmulhq_s32(vshlq_s32(x, vl), vm);
      r = vrshlq_s32(vqaddq_s32(h, vshrq_n_s32(vandq_s32(h, vf), 31)), vr);
    }
    r = vaddq_n_s32(vminq_s32(vmaxq_s32(r, lo), hi), zp);
    vstrbq_scatter_offset_p_s32(o, offsets, r, active);
  }
}

static void requant_vectors(const uint32_t* acc, size_t stride, size_t rows, const uint32_t* biases,
                            const qvanilla_channels* c, size_t o0, size_t nb, int8_t* out, size_t ostride,
                            int transposed, const qvanilla_conv* p) {
  const int tflite = p->rounding == QVANILLA_ROUNDING_TFLITE;
  const int32x4_t lo = vdupq_n_s32(p->act_min - p->output_zp), hi = vdupq_n_s32(p->act_max - p->output_zp);
  const uint32x4_t k = vidupq_n_u32(0, 1); /* 0, 1, 2, 3 */
  for (size_t g = 0; g < QL / 4; ++g) {
    /* lane 4g + k holds channel j (lane()): its parameters gathered, four lanes at a time (a tile
     * of few pixels repeats this for every group) */
    const uint32x4_t offsets = transposed ? vaddq_n_u32(vshlq_n_u32(k, 2), (uint32_t)g) : vaddq_n_u32(k, 4 * (uint32_t)g);
    const mve_pred16_t active = vcmphiq_u32(vdupq_n_u32((uint32_t)nb), offsets); /* j < nb */
    const int32x4_t vb = vldrwq_gather_shifted_offset_z_s32((const int32_t*)biases, offsets, active);
    const int32x4_t vm = vldrwq_gather_shifted_offset_z_s32(c->multiplier + o0, offsets, active);
    const int32x4_t shift = vldrwq_gather_shifted_offset_z_s32(c->shift + o0, offsets, active);
    /* qvanilla_channel()'s left and 31 - right: TFLite max(shift, 0) and min(shift, 0), upward 0 and shift */
    const int32x4_t vl = tflite ? vmaxq_s32(shift, vdupq_n_s32(0)) : vdupq_n_s32(0);
    const int32x4_t vr = tflite ? vminq_s32(shift, vdupq_n_s32(0)) : shift;
    const int32x4_t vf = vshrq_n_s32(shift, 31); /* TFLite: -1 where n = -shift > 0 */
    const int negative = vmaxvq_p_s32(INT32_MIN, shift, active) <= -1; /* every lane's shift below 0 */
    if (!tflite && !negative) { /* finish() on these lanes' channels */
      const int64_t l = p->act_min - p->output_zp, h = p->act_max - p->output_zp;
      for (size_t i4 = 0; i4 < 4; ++i4) {
        const size_t j = transposed ? 4 * i4 + g : 4 * g + i4;
        if (j >= nb) continue;
        const qchan q = qvanilla_channel(c, o0 + j, biases[j], p->rounding);
        for (size_t i = 0; i < rows; ++i) {
          out[i * ostride + j] = finish_any(acc[i * stride + lane(j, transposed)], &q, l, h, p);
        }
      }
      continue;
    }
    const int plain = negative; /* TFLite: no left shift, every lane rounds away from zero */
    const uint32_t* a = acc + 4 * g;
    if (!tflite) {
      vector_rows(a, stride, rows, out, ostride, offsets, active, vb, vm, vl, vr, vf, lo, hi, p->output_zp, UPWARD);
    } else if (plain) {
      vector_rows(a, stride, rows, out, ostride, offsets, active, vb, vm, vl, vr, vf, lo, hi, p->output_zp, TFLITE);
    } else {
      vector_rows(a, stride, rows, out, ostride, offsets, active, vb, vm, vl, vr, vf, lo, hi, p->output_zp,
                  TFLITE_ANY);
    }
  }
}
#endif

/* The output stage of `rows` <= TILE rows of accumulators of the n channels o0 .. o0 + n - 1 of the
 * table q, row i at acc + i * stride (in blocks of QL: channel j at j / QL * QL + lane(j % QL)),
 * into out + i * ostride; bias[j]: channel o0 + j's bias (input zero point folded in).  blocks:
 * their output stages (qvanilla_block_setup(), blocks[j / QL] for channel j) with o, scratch of
 * rows * QL words; or NULL (a scratch too small for them): each channel's parameters made as it
 * runs, as microcontrollers always do. */
void qvanilla_requant_rows(const uint32_t* acc, size_t stride, size_t rows, const qblock* blocks, const uint32_t* bias,
                           const qvanilla_channels* q, size_t o0, size_t n, int8_t* out, size_t ostride,
                           int transposed, const qvanilla_conv* p, uint32_t* o) {
  const int64_t lo = p->act_min - p->output_zp, hi = p->act_max - p->output_zp;
  for (size_t j0 = 0; j0 < n; j0 += QL) {
    const size_t nb = n - j0 < QL ? n - j0 : QL;
#if defined(QVANILLA_MVE)
    requant_vectors(acc + j0, stride, rows, bias + j0, q, o0 + j0, nb, out + j0, ostride, transposed, p);
    continue;
#elif defined(QVANILLA_MCU)
    if (p->rounding == QVANILLA_ROUNDING_TFLITE) {
      requant_columns(acc + j0, stride, rows, bias + j0, q, o0 + j0, nb, out + j0, ostride, transposed, p, 1);
    } else {
      requant_columns(acc + j0, stride, rows, bias + j0, q, o0 + j0, nb, out + j0, ostride, transposed, p, 0);
    }
    continue;
#endif
#ifdef QVANILLA_AVX2
    if (p->avx2) {
      qvanilla_requant_avx2(acc + j0, stride, rows, bias + j0, q, o0 + j0, nb, out + j0, ostride, transposed, p);
      continue;
    }
#endif
    const qblock* b = blocks != NULL ? blocks + j0 / QL : NULL;
    if (b == NULL || b->right == 0) { /* finish() a channel at a time */
      for (size_t j = 0; j < nb; ++j) {
        const qchan c = b != NULL ? b->qc[j] : qvanilla_channel(q, o0 + j0 + j, bias[j0 + j], p->rounding);
        const uint32_t* a = acc + j0 + lane(j, transposed);
        int8_t* column = out + j0 + j;
        if (p->rounding == QVANILLA_ROUNDING_TFLITE) {
          for (size_t i = 0; i < rows; ++i) column[i * ostride] = finish_tflite(a[i * stride], &c, lo, hi, p->output_zp);
        } else {
          for (size_t i = 0; i < rows; ++i) column[i * ostride] = finish(a[i * stride], &c, lo, hi, p->output_zp);
        }
      }
      continue;
    }
    if (p->rounding == QVANILLA_ROUNDING_TFLITE) requant_lanes_tflite(acc + j0, stride, rows, b, o);
    else requant_lanes(acc + j0, stride, rows, b, o);
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
