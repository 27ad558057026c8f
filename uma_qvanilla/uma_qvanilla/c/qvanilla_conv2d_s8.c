/* QVanilla's dense conv (plain and packed weights): windows times weights, in tiles. */
#include "qvanilla_internal.h"

static int32_t imin(int32_t a, int32_t b) { return a < b ? a : b; }

/* ---------------------------------------------------------------------------------------------
 * Dense conv */

#if defined(QVANILLA_SMLAD) && defined(QVANILLA_ASM) && !defined(QVANILLA_MVE) /* Helium: dot2x4_mve */
#define QVANILLA_DOT2X2 1
/* out0[0], out0[4], out1[0], out1[4] = x0 . w0, x0 . w1, x1 . w0, x1 . w1 over n (a multiple of 4)
 * entries.  SMLAD's sums wrap modulo 2^32 (setting the Q flag, which nothing reads), as the
 * unsigned sums of the plain C path do.  In asm, 13 registers (so that it builds where the frame
 * pointer or r9 is taken: -O0, -fno-omit-frame-pointer, -ffixed-r9), every pointer post-incremented
 * and every load an LDRD of two aligned words: the windows (scratch: 8-byte aligned rows of a
 * multiple of 16 bytes) and the weights (rows of a multiple of 16 bytes from a word-aligned start:
 * the caller checks, p->words), w0's words loaded a second time for x1 rather than held: 15
 * instructions per 16 multiply-adds. */
static ALWAYS_INLINE void dot2x2(const int16_t* x0, const int16_t* x1, const int16_t* w0, const int16_t* w1,
                                 size_t n, uint32_t* out0, uint32_t* out1) {
  int32_t a0 = 0, a1 = 0, b0 = 0, b1 = 0, u0, u1, p0, p1;
  size_t steps = n / 4; /* >= 2 */
  __asm__("1:\n\t"
          "ldrd %[u0], %[u1], [%[x0]], #8\n\t"  /* x0's entries 0..3 */
          "ldrd %[p0], %[p1], [%[w0]], #8\n\t"  /* w0's */
          "smlad %[a0], %[u0], %[p0], %[a0]\n\t"
          "smlad %[a0], %[u1], %[p1], %[a0]\n\t"
          "ldrd %[p0], %[p1], [%[w1]], #8\n\t"  /* w1's */
          "smlad %[a1], %[u0], %[p0], %[a1]\n\t"
          "smlad %[a1], %[u1], %[p1], %[a1]\n\t"
          "ldrd %[u0], %[u1], [%[x1]], #8\n\t"  /* x1's */
          "smlad %[b1], %[u0], %[p0], %[b1]\n\t"
          "smlad %[b1], %[u1], %[p1], %[b1]\n\t"
          "ldrd %[p0], %[p1], [%[w0], #-8]\n\t" /* w0's again */
          "smlad %[b0], %[u0], %[p0], %[b0]\n\t"
          "smlad %[b0], %[u1], %[p1], %[b0]\n\t"
          "subs %[steps], %[steps], #1\n\t"
          "bne 1b"
          : [a0] "+r"(a0), [a1] "+r"(a1), [b0] "+r"(b0), [b1] "+r"(b1), [x0] "+r"(x0), [x1] "+r"(x1),
            [w0] "+r"(w0), [w1] "+r"(w1), [steps] "+r"(steps), [u0] "=&r"(u0), [u1] "=&r"(u1), [p0] "=&r"(p0),
            [p1] "=&r"(p1)
          :
          : "cc", "memory");
  out0[0] = (uint32_t)a0; out0[4] = (uint32_t)a1;
  out1[0] = (uint32_t)b0; out1[4] = (uint32_t)b1;
}
#endif

#ifdef QVANILLA_MVE
/* dot2x4 in Helium: eight int16 products summed into a 32-bit sum per VMLADAVA (wrapping as the
 * plain C's unsigned sums), 2 windows x 4 channels, n a multiple of 8 (KA): six loads and eight
 * VMLADAVA per 64 multiply-adds, every pointer post-incremented. */
static ALWAYS_INLINE void dot2x4_mve(const int16_t* x0, const int16_t* x1, const int16_t* w, size_t ws, size_t n,
                                     uint32_t* out0, uint32_t* out1) {
  const int16_t *w0 = w, *w1 = w + ws, *w2 = w + 2 * ws, *w3 = w + 3 * ws;
  int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0, b0 = 0, b1 = 0, b2 = 0, b3 = 0;
  for (size_t k = 0; k < n; k += 8) {
    const int16x8_t u = vld1q_s16(x0), v = vld1q_s16(x1);
    int16x8_t q = vld1q_s16(w0);
    a0 = vmladavaq_s16(a0, u, q), b0 = vmladavaq_s16(b0, v, q);
    q = vld1q_s16(w1);
    a1 = vmladavaq_s16(a1, u, q), b1 = vmladavaq_s16(b1, v, q);
    q = vld1q_s16(w2);
    a2 = vmladavaq_s16(a2, u, q), b2 = vmladavaq_s16(b2, v, q);
    q = vld1q_s16(w3);
    a3 = vmladavaq_s16(a3, u, q), b3 = vmladavaq_s16(b3, v, q);
    x0 += 8, x1 += 8, w0 += 8, w1 += 8, w2 += 8, w3 += 8;
  }
  out0[0] = (uint32_t)a0; out0[4] = (uint32_t)a1; out0[8] = (uint32_t)a2; out0[12] = (uint32_t)a3;
  out1[0] = (uint32_t)b0; out1[4] = (uint32_t)b1; out1[8] = (uint32_t)b2; out1[12] = (uint32_t)b3;
}
#endif

/* out0[4*j] = sum_k x0[k] * w[j*ws + k] and out1[4*j] likewise for x1, j < 4, k < 8*k8 (the
 * transposed order of accumulator rows, see pack_row): a reduction per sum, which gcc
 * vectorises with pmaddwd (8 multiply-adds per instruction), then adds up each sum's lanes;
 * dot2x2's asm twice if smlad (the DSP extension, weights word-aligned). */
static ALWAYS_INLINE void dot2x4(const int16_t* restrict x0, const int16_t* restrict x1, const int16_t* restrict w,
                                 size_t ws, size_t k8, uint32_t* restrict out0, uint32_t* restrict out1, int smlad) {
#if defined(QVANILLA_MVE)
  (void)smlad;
  dot2x4_mve(x0, x1, w, ws, k8 * KA, out0, out1);
#else
#if defined(QVANILLA_DOT2X2)
  if (smlad) {
    dot2x2(x0, x1, w, w + ws, k8 * KA, out0, out1);
    dot2x2(x0, x1, w + 2 * ws, w + 3 * ws, k8 * KA, out0 + 8, out1 + 8);
    return;
  }
#else
  (void)smlad;
#endif
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
                                    size_t stride, uint32_t* spare, int smlad) {
  for (size_t i = 0; i < n; i += 2) {
    const int pair = i + 1 < n;
    dot2x4(win + i * kp, win + (pair ? i + 1 : i) * kp, w, kp, k8, a + i * stride, pair ? a + (i + 1) * stride : spare,
           smlad);
  }
}

/* How a conv's dot products run, chosen once per call (conv_tiles). */
enum { DOT_C, DOT_SMLAD, DOT_AVX2 };

/* dot_pairs with the reduction's length a constant for the short ones (up to 64: 1x1 convs of up
 * to 64 channels), so that gcc unrolls it: their sums' horizontal additions are much of the work. */
NOINLINE static void dot_tile(const int16_t* win, size_t n, size_t kp, const int16_t* w, uint32_t* a, size_t stride,
                              uint32_t* spare, int variant) {
#ifdef QVANILLA_AVX2
  if (variant == DOT_AVX2) {
    qvanilla_dot_tile_avx2(win, n, kp, w, a, stride, spare);
    return;
  }
#endif
#ifdef QVANILLA_DOT2X2
  if (variant == DOT_SMLAD) {
    dot_pairs(win, n, kp, kp / KA, w, a, stride, spare, 1); /* SMLAD's loop gains little from unrolling */
    return;
  }
#endif
  (void)variant;
#ifdef QVANILLA_MCU /* the unrolled copies are for vector units (and code size counts here) */
  dot_pairs(win, n, kp, kp / KA, w, a, stride, spare, 0);
#else
  switch (kp / KA) {
    case 1: dot_pairs(win, n, kp, 1, w, a, stride, spare, 0); break;
    case 2: dot_pairs(win, n, kp, 2, w, a, stride, spare, 0); break;
    case 3: dot_pairs(win, n, kp, 3, w, a, stride, spare, 0); break;
    case 4: dot_pairs(win, n, kp, 4, w, a, stride, spare, 0); break;
    case 5: dot_pairs(win, n, kp, 5, w, a, stride, spare, 0); break;
    case 6: dot_pairs(win, n, kp, 6, w, a, stride, spare, 0); break;
    case 7: dot_pairs(win, n, kp, 7, w, a, stride, spare, 0); break;
    case 8: dot_pairs(win, n, kp, 8, w, a, stride, spare, 0); break;
    default: dot_pairs(win, n, kp, kp / KA, w, a, stride, spare, 0); break;
  }
#endif
}

/* dst[0..n) = src[0..n) widened (blocks of 16 vectorise; Helium: VLDRB.S16, eight a load). */
static void widen(int16_t* restrict dst, const int8_t* restrict src, size_t n) {
  size_t i = 0;
#ifdef QVANILLA_MVE
  for (; i + 8 <= n; i += 8) vst1q_s16(dst + i, vldrbq_s16(src + i));
#endif
  for (; i + 16 <= n; i += 16) {
    for (int j = 0; j < 16; ++j) dst[i + j] = src[i + j];
  }
  for (; i < n; ++i) dst[i] = src[i];
}

static void fill(int16_t* dst, int16_t value, size_t n) {
  size_t i = 0;
#ifdef QVANILLA_MVE
  for (const int16x8_t v = vdupq_n_s16(value); i + 8 <= n; i += 8) vst1q_s16(dst + i, v);
#endif
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
static void gather(int16_t* dst, size_t kp, const int8_t* input, const qvanilla_conv* p, int32_t y, int32_t x) {
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

/* Whether windows of k entries can be runs of the input's contiguous pixels: a 1x1 kernel of stride
 * 1 along rows, k = ic. */
static int in_runs(const qvanilla_conv* p, size_t k) {
  return p->kh == 1 && p->kw == 1 && p->stride_w == 1 && k == (size_t)p->ic;
}

/* A tile's next windows, from pixel (y, x) on, at most `left` of them: if `runs` (in_runs()) a run
 * of consecutive pixels of row y inside the image, whose windows are the input's contiguous pixels
 * (*src their first input), else one pixel to gather (*src NULL).  Its length. */
static ALWAYS_INLINE size_t next_windows(size_t left, int runs, size_t k, const int8_t* input, const qvanilla_conv* p,
                                         int32_t y, int32_t x, const int8_t** src) {
  *src = NULL;
  if (!runs) return 1;
  const int64_t iy = (int64_t)y * p->stride_h - p->pad_top, ix = (int64_t)x - p->pad_left;
  const size_t run = (size_t)(p->ow - x) < left ? (size_t)(p->ow - x) : left;
  if (!(iy >= 0 && iy < p->ih && ix >= 0 && ix + (int64_t)run <= p->iw)) return 1;
  *src = input + ((size_t)iy * p->iw + (size_t)ix) * k;
  return run;
}

/* (*y, *x) moved `run` pixels on, in output order (a run stays in its row). */
static void advance(const qvanilla_conv* p, size_t run, int32_t* y, int32_t* x) {
  *x += (int32_t)run;
  if (*x == p->ow) {
    *x = 0;
    ++*y;
  }
}

/* The windows of the n output pixels from (*y, *x) on (in output order) as rows of kp int16, and
 * (*y, *x) moved past them; runs of contiguous pixels widened whole. */
static void gather_tile(int16_t* win, size_t kp, size_t n, const int8_t* input, const qvanilla_conv* p,
                        int32_t* y, int32_t* x) {
  const int runs = in_runs(p, kp);
  for (size_t i = 0, run; i < n; i += run) {
    const int8_t* src;
    run = next_windows(n - i, runs, kp, input, p, *y, *x, &src);
    if (src != NULL) widen(win + i * kp, src, run * kp);
    else gather(win + i * kp, kp, input, p, *y, *x);
    advance(p, run, y, x);
  }
}

#ifdef QVANILLA_MVE
/* Helium's int8 path of conv_tiles(), for packed weights all in [-128, 127] (a symmetric
 * quantization's are): windows of int8 (the raw input, input_zp where the window leaves the
 * image, zeros from K on to K16, K rounded up to 16), four channels' weights interleaved in blocks
 * of 16 (one pointer, immediate offsets) -- as the packed8 entry takes them, else narrowed to int8
 * for each tile -- and sixteen int8
 * multiply-adds per VMLADAVA: 2 windows x 4 channels, six loads and eight VMLADAVA per 128
 * multiply-adds, against 64 with int16. */

/* Whether the n int16 at w (n a multiple of 8) are all in [-128, 127]. */
static int fit_int8(const int16_t* w, size_t n) {
  int16x8_t lo = vdupq_n_s16(0), hi = lo;
  for (size_t i = 0; i < n; i += 8) {
    const int16x8_t v = vld1q_s16(w + i);
    lo = vminq_s16(lo, v);
    hi = vmaxq_s16(hi, v);
  }
  return vminvq_s16(INT16_MAX, lo) >= -128 && vmaxvq_s16(INT16_MIN, hi) <= 127;
}

static void copy_bytes(int8_t* dst, const int8_t* src, size_t n) { /* predicated: nothing read past n */
  for (size_t i = 0; i < n; i += 16) {
    const mve_pred16_t active = vctp8q((uint32_t)(n - i));
    vstrbq_p_s8(dst + i, vldrbq_z_s8(src + i, active), active);
  }
}

static void set_bytes(int8_t* dst, int8_t value, size_t n) {
  const int8x16_t v = vdupq_n_s8(value);
  for (size_t i = 0; i < n; i += 16) vstrbq_p_s8(dst + i, v, vctp8q((uint32_t)(n - i)));
}

/* gather() in int8, rows of k16 bytes. */
static void gather8(int8_t* dst, size_t k16, const int8_t* input, const qvanilla_conv* p, int32_t y, int32_t x) {
  const size_t ic = (size_t)p->ic, row = (size_t)p->kw * ic;
  const int64_t x0 = (int64_t)x * p->stride_w - p->pad_left;
  const int32_t a = first_column(x0, 0, p->kw), b = first_column(x0, p->iw, p->kw); /* [a, b) inside */
  for (int32_t ky = 0; ky < p->kh; ++ky) {
    const int32_t iy = y * p->stride_h - p->pad_top + ky;
    int8_t* r = dst + (size_t)ky * row;
    if (iy < 0 || iy >= p->ih || a >= b) {
      set_bytes(r, (int8_t)p->input_zp, row);
      continue;
    }
    set_bytes(r, (int8_t)p->input_zp, (size_t)a * ic);
    copy_bytes(r + (size_t)a * ic, input + ((size_t)iy * p->iw + (size_t)(x0 + a)) * ic, (size_t)(b - a) * ic);
    set_bytes(r + (size_t)b * ic, (int8_t)p->input_zp, (size_t)(p->kw - b) * ic);
  }
  set_bytes(dst + (size_t)p->kh * row, 0, k16 - (size_t)p->kh * row);
}

/* gather_tile() in int8, rows of k16 bytes (runs of a 1x1 kernel copied whole when ic is a multiple of 16). */
static void gather_tile8(int8_t* win, size_t k16, size_t n, const int8_t* input, const qvanilla_conv* p, int32_t* y,
                         int32_t* x) {
  const int runs = in_runs(p, k16);
  for (size_t i = 0, run; i < n; i += run) {
    const int8_t* src;
    run = next_windows(n - i, runs, k16, input, p, *y, *x, &src);
    if (src != NULL) copy_bytes(win + i * k16, src, run * k16);
    else gather8(win + i * k16, k16, input, p, *y, *x);
    advance(p, run, y, x);
  }
}

/* wq[(k / 16) * 64 + j * 16 + k % 16] = w[j * kp + k] (k < kp; 0 up to k16), j < 4: four rows of
 * packed weights (kp a multiple of 8, so k16 - kp is 0 or 8) narrowed to int8 by VSTRB's
 * truncating store, sixteen a step (no predicates: gcc 12 moves them through general registers). */
static void narrow4(int8_t* wq, const int16_t* w, size_t kp, size_t k16) {
  for (size_t j = 0; j < OB; ++j) {
    const int16_t* r = w + j * kp;
    int8_t* d = wq + j * 16;
    size_t k = 0;
    for (; k + 16 <= kp; k += 16, r += 16, d += 64) {
      vstrbq_s16(d, vld1q_s16(r));
      vstrbq_s16(d + 8, vld1q_s16(r + 8));
    }
    if (k < k16) { /* the last 8 of the row, then zeros */
      vstrbq_s16(d, vld1q_s16(r));
      vstrbq_s16(d + 8, vdupq_n_s16(0));
    }
  }
}

/* In asm: gcc's loop indexes the windows instead of post-incrementing them and spills (about 24
 * instructions a step instead of 16).  VMLADAVA's sums must be even registers (constraint "Te").
 * Without QVANILLA_ASM (-O0), the same steps in intrinsics. */
static ALWAYS_INLINE void dot2x4_s8(const int8_t* x0, const int8_t* x1, const int8_t* w, size_t k16, uint32_t* out0,
                                    uint32_t* out1) {
  int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0, b0 = 0, b1 = 0, b2 = 0, b3 = 0;
#ifndef QVANILLA_ASM
  for (size_t k = 0; k < k16; k += K16, x0 += K16, x1 += K16, w += OB * K16) {
    const int8x16_t u = vld1q_s8(x0), v = vld1q_s8(x1);
    const int8x16_t q0 = vld1q_s8(w), q1 = vld1q_s8(w + 16), q2 = vld1q_s8(w + 32), q3 = vld1q_s8(w + 48);
    a0 = vmladavaq_s8(a0, u, q0), b0 = vmladavaq_s8(b0, v, q0);
    a1 = vmladavaq_s8(a1, u, q1), b1 = vmladavaq_s8(b1, v, q1);
    a2 = vmladavaq_s8(a2, u, q2), b2 = vmladavaq_s8(b2, v, q2);
    a3 = vmladavaq_s8(a3, u, q3), b3 = vmladavaq_s8(b3, v, q3);
  }
#else
  size_t steps = k16 / K16; /* >= 1 */
  __asm__("1:\n\t"
          "vldrb.8 q0, [%[x0]], #16\n\t"
          "vldrb.8 q1, [%[x1]], #16\n\t"
          "vldrb.8 q2, [%[w], #16]\n\t"
          "vldrb.8 q3, [%[w], #32]\n\t"
          "vldrb.8 q4, [%[w], #48]\n\t"
          "vldrb.8 q5, [%[w]], #64\n\t"
          "vmladava.s8 %[a0], q0, q5\n\t"
          "vmladava.s8 %[b0], q1, q5\n\t"
          "vmladava.s8 %[a1], q0, q2\n\t"
          "vmladava.s8 %[b1], q1, q2\n\t"
          "vmladava.s8 %[a2], q0, q3\n\t"
          "vmladava.s8 %[b2], q1, q3\n\t"
          "vmladava.s8 %[a3], q0, q4\n\t"
          "vmladava.s8 %[b3], q1, q4\n\t"
          "subs %[steps], %[steps], #1\n\t"
          "bne 1b"
          : [a0] "+Te"(a0), [a1] "+Te"(a1), [a2] "+Te"(a2), [a3] "+Te"(a3), [b0] "+Te"(b0), [b1] "+Te"(b1),
            [b2] "+Te"(b2), [b3] "+Te"(b3), [x0] "+r"(x0), [x1] "+r"(x1), [w] "+r"(w), [steps] "+r"(steps)
          :
          : "q0", "q1", "q2", "q3", "q4", "q5", "cc", "memory");
#endif
  out0[0] = (uint32_t)a0; out0[4] = (uint32_t)a1; out0[8] = (uint32_t)a2; out0[12] = (uint32_t)a3;
  out1[0] = (uint32_t)b0; out1[4] = (uint32_t)b1; out1[8] = (uint32_t)b2; out1[12] = (uint32_t)b3;
}

/* dot_pairs() in int8. */
NOINLINE static void dot_tile8(const int8_t* win, size_t n, size_t k16, const int8_t* wq, uint32_t* a, size_t stride,
                               uint32_t* spare) {
  for (size_t i = 0; i < n; i += 2) {
    const int pair = i + 1 < n;
    dot2x4_s8(win + i * k16, win + (pair ? i + 1 : i) * k16, wq, k16, a + i * stride,
              pair ? a + (i + 1) * stride : spare);
  }
}
#endif

/* dot_pairs() with the packed8 entry's weights (four channels in blocks of 16 int8, qvanilla.h)
 * and int16 windows of kp entries: cores without Helium's int8 path (whose packed entry is faster). */
NOINLINE static void dot_tile_w8(const int16_t* win, size_t n, size_t kp, const int8_t* w8, uint32_t* a,
                                 size_t stride, uint32_t* spare) {
  for (size_t i = 0; i < n; i += 2) {
    const int pair = i + 1 < n;
    const int16_t* x0 = win + i * kp;
    const int16_t* x1 = win + (pair ? i + 1 : i) * kp;
    uint32_t s0[OB] = {0}, s1[OB] = {0};
    for (size_t k0 = 0; k0 < kp; k0 += K16) {
      const int8_t* block = w8 + k0 * OB; /* block k0 / 16: OB rows of 16 */
      const size_t m = kp - k0 < K16 ? kp - k0 : K16;
      for (size_t j = 0; j < OB; ++j) {
        for (size_t k = 0; k < m; ++k) {
          s0[j] += (uint32_t)(x0[k0 + k] * block[j * K16 + k]);
          s1[j] += (uint32_t)(x1[k0 + k] * block[j * K16 + k]);
        }
      }
    }
    uint32_t* out1 = pair ? a + (i + 1) * stride : spare;
    for (size_t j = 0; j < OB; ++j) a[i * stride + 4 * j] = s0[j], out1[4 * j] = s1[j];
  }
}

/* The scratch of conv_tiles(), in order (p->kh * p->kw * p->ic <= KMAX); base NULL: only the size. */
typedef struct {
  int16_t* win;   /* tile windows of kp int16 */
  uint32_t* acc;  /* tile rows of up to `chunk` accumulators */
  uint32_t* bias; /* chunk */
  uint32_t* sums; /* chunk, plain */
  qblock* blocks; /* chunk / QL, roomy */
  uint32_t* rows; /* tile * QL: qvanilla_requant_rows()', roomy */
  int16_t* quad;  /* OB rows of kp int16, plain */
  size_t tile, chunk; /* output pixels and channels at a time */
} tiles_scratch;

static size_t padded_k(const qvanilla_conv* p) { return ((size_t)p->kh * p->kw * p->ic + KA - 1) / KA * KA; }

/* The layout of `tile` pixels and `chunk` channels (a multiple of QL) at a time, with the lanes'
 * blocks (roomy) or without; its size. */
static size_t tiles_layout(const qvanilla_conv* p, int packed, size_t tile, size_t chunk, int roomy,
                           unsigned char* base, tiles_scratch* t) {
  const size_t kp = padded_k(p);
  qvanilla_arena a = {base, 0};
  t->tile = tile, t->chunk = chunk;
  t->win = qvanilla_take(&a, tile * kp * sizeof(int16_t));
  t->acc = qvanilla_take(&a, tile * chunk * sizeof(uint32_t));
  t->bias = qvanilla_take(&a, chunk * sizeof(uint32_t));
  t->sums = packed ? NULL : qvanilla_take(&a, chunk * sizeof(uint32_t));
  t->blocks = roomy ? qvanilla_take(&a, chunk / QL * QVANILLA_BLOCK_BYTES) : NULL;
  t->rows = roomy ? qvanilla_take(&a, tile * QL * sizeof(uint32_t)) : NULL;
  t->quad = packed ? NULL : qvanilla_take(&a, OB * kp * sizeof(int16_t));
  return a.used;
}

/* The roomy layout: up to TILE windows of the window buffer's WIN entries, QCH channels. */
static size_t roomy_tiles(const qvanilla_conv* p, int packed, unsigned char* base, tiles_scratch* t) {
  const size_t kp = padded_k(p), widest = ((size_t)p->oc + QL - 1) / QL * QL;
  return tiles_layout(p, packed, WIN / kp < TILE ? WIN / kp : TILE, widest < QCH ? widest : QCH, 1, base, t);
}

/* The layout that fits `size` bytes: the roomy one, else the lean one of the most channels at a time
 * that leaves MIN_TILE pixels (QL channels if none does) and as many pixels as fit; its size, 0 if
 * not even 2 pixels fit. */
static size_t tiles_fit(const qvanilla_conv* p, int packed, size_t size, unsigned char* base, tiles_scratch* t) {
  if (roomy_tiles(p, packed, NULL, t) <= size) return roomy_tiles(p, packed, base, t);
  const size_t kp = padded_k(p), most = t->tile; /* the roomy layout's */
  for (size_t chunk = t->chunk;; chunk -= QL) {
    const size_t fixed = tiles_layout(p, packed, 0, chunk, 0, NULL, t), per_pixel = kp * 2 + chunk * 4;
    size_t tile = size > fixed ? (size - fixed) / per_pixel : 0; /* the takes are multiples of 8 bytes */
    tile = tile < most ? tile : most;
    if (tile >= MIN_TILE || chunk == QL) return tile >= 2 ? tiles_layout(p, packed, tile, chunk, 0, base, t) : 0;
  }
}

/* The windows' length beyond which the direct loops take over (its product fits 64 bits). */
static int short_windows(const qvanilla_conv* p) {
  return p->kh <= KMAX && p->kw <= KMAX && p->ic <= KMAX && (uint64_t)p->kh * p->kw * p->ic <= KMAX;
}

size_t qvanilla_dense_scratch(const qvanilla_conv* p, int packed, size_t budget) {
  tiles_scratch t;
  if (short_windows(p)) {
    const size_t roomy = roomy_tiles(p, packed, NULL, &t), lean = budget > 0 ? tiles_fit(p, packed, budget, NULL, &t) : 0;
    return budget == 0 || budget >= roomy ? roomy : lean > 0 ? lean : tiles_layout(p, packed, 2, QL, 0, NULL, &t);
  }
  qvanilla_arena a = {NULL, 0};
  qvanilla_take(&a, packed ? 0 : (size_t)imin(p->oc, MAX_OC) * sizeof(uint32_t)); /* conv_plain_direct()'s row */
  return a.used;
}

/* The dense conv for K = kh*kw*ic <= KMAX.  packed: OCP rows of kp int16 and the folded bias in
 * q; packed8: the same as int8, interleaved (qvanilla.h), packed's scratch; else raw OHWI int8
 * weights (with weight_zp), packed into quad (OB*kp int16, scratch)
 * four channels at a time for each tile (their biases folded on the first).  Per chunk of up to QCH output
 * channels (their output stages prepared once) and tile of output pixels: the windows, the
 * accumulators of every pixel and channel (dot2x4, two pixels by four channels at a time, the four
 * channels' weights staying in L1 while the tile's windows stream), then the output rows.  A row
 * of accumulators holds the chunk's channels in blocks of QL, transposed (lane()). */
static qvanilla_status conv_tiles(const int8_t* input, const int16_t* packed, const int8_t* packed8, const int8_t* raw,
                                  const qvanilla_channels* q, int8_t* output, const qvanilla_conv* p, void* scratch,
                                  size_t size) {
  tiles_scratch t;
  /* size: at least the least layout's (qvanilla_check); should no tile fit even so, nothing runs */
  if (tiles_fit(p, raw == NULL, size, scratch, &t) == 0) return QVANILLA_ESCRATCH;
  int16_t *win = t.win, *quad = t.quad;
  uint32_t *acc = t.acc, *bias = t.bias, *sums = t.sums, spare[QL];
  qblock* blocks = t.blocks;
  const size_t oc = (size_t)p->oc, K = (size_t)p->kh * p->kw * p->ic, kp = (K + KA - 1) / KA * KA;
  const size_t k16 = (K + K16 - 1) / K16 * K16;
  const size_t pixels = (size_t)p->oh * p->ow;
  const size_t tile = t.tile, chunk = t.chunk; /* >= 2, a multiple of QL */
  /* SMLAD's asm loads the weights as aligned words: the compiler's (16-byte aligned) and quad (scratch) are */
  const int words = raw != NULL || (uintptr_t)packed % 4 == 0;
  const int dot = p->avx2 ? DOT_AVX2 : words ? DOT_SMLAD : DOT_C;
#ifdef QVANILLA_MVE /* the int8 path: its windows take at most half of win, the four channels' weights follow them */
  int8_t* wq = (int8_t*)win + tile * k16;
  const int int8 = packed8 != NULL || (packed != NULL && pixels >= TILE / 8 &&
                   (tile + OB) * k16 <= tile * kp * sizeof(int16_t) &&
                   fit_int8(packed, (oc + OB - 1) / OB * OB * kp)); /* a few pixels do not repay the scan */
#endif
  for (size_t c0 = 0; c0 < oc; c0 += chunk) {
    const size_t nc = oc - c0 < chunk ? oc - c0 : chunk, stride = (nc + QL - 1) / QL * QL;
    for (size_t j = (nc + OB - 1) / OB * OB; j < stride; ++j) { /* lanes no dot2x4 writes */
      for (size_t i = 0; i < tile; ++i) acc[i * stride + j / QL * QL + lane(j % QL, 1)] = 0;
    }
    int32_t y = 0, x = 0; /* the next pixel to gather */
    for (size_t first = 0; first < pixels; first += tile) {
      const size_t n = pixels - first < tile ? pixels - first : tile;
#ifdef QVANILLA_MVE
      if (int8) {
        gather_tile8((int8_t*)win, k16, n, input, p, &y, &x);
        for (size_t o0 = c0; o0 < c0 + nc; o0 += OB) {
          if (packed8 == NULL) narrow4(wq, packed + o0 * kp, kp, k16);
          dot_tile8((int8_t*)win, n, k16, packed8 != NULL ? packed8 + o0 * k16 : wq,
                    acc + (o0 - c0) / QL * QL + lane((o0 - c0) % QL, 1), stride, spare);
        }
      } else
#endif
      {
        gather_tile(win, kp, n, input, p, &y, &x);
        for (size_t o0 = c0; o0 < c0 + nc; o0 += OB) {
          if (raw != NULL) { /* rows o0 .. o0+3 (OHWI: channel o's K weights at raw + o*K), zero beyond oc and K */
            const size_t no = oc - o0 < OB ? oc - o0 : OB;
            const int8_t* r0 = raw + o0 * K;
            uint32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0; /* the rows' sums, in registers */
            for (size_t k = 0; k < K; ++k) {
              const int16_t v0 = (int16_t)(r0[k] - p->weight_zp), v1 = no > 1 ? (int16_t)(r0[K + k] - p->weight_zp) : 0;
              const int16_t v2 = no > 2 ? (int16_t)(r0[2 * K + k] - p->weight_zp) : 0;
              const int16_t v3 = no > 3 ? (int16_t)(r0[3 * K + k] - p->weight_zp) : 0;
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
          /* channels o0 + j at a[4*j] */
          uint32_t* a = acc + (o0 - c0) / QL * QL + lane((o0 - c0) % QL, 1);
          if (packed8 != NULL) dot_tile_w8(win, n, kp, packed8 + o0 * k16, a, stride, spare);
          else dot_tile(win, n, kp, packed != NULL ? packed + o0 * kp : quad, a, stride, spare, dot);
        }
      }
      if (first == 0) { /* the output stages: biases, with bias - input_zp * sum (w - weight_zp) if plain */
        qvanilla_biases(bias, q, c0, nc);
        for (size_t j = 0; raw != NULL && j < nc; ++j) bias[j] -= sums[j] * (uint32_t)p->input_zp;
        for (size_t j = 0; blocks != NULL && j < nc; j += QL) {
          qvanilla_block_setup(&blocks[j / QL], bias + j, q, c0 + j, nc - j < QL ? nc - j : QL, 1, p);
        }
      }
      qvanilla_requant_rows(acc, stride, n, blocks, bias, q, c0, nc, output + first * oc + c0, oc, 1, p, t.rows);
    }
  }
  return QVANILLA_OK;
}

/* Entry k of channel o's packed weights: packed's, or packed8's (qvanilla.h). */
static int32_t packed_weight(const int16_t* packed, const int8_t* packed8, size_t kp, size_t k16, size_t o, size_t k) {
  if (packed != NULL) return packed[o * kp + k];
  return packed8[(o / OB * (k16 / K16) + k / K16) * (OB * K16) + o % OB * K16 + k % K16];
}

/* Windows longer than KMAX (beyond any usual layer), packed or packed8 weights: straightforward loops. */
static void conv_packed_direct(const int8_t* input, const int16_t* packed, const int8_t* packed8,
                               const qvanilla_channels* q, int8_t* output, const qvanilla_conv* p) {
  const size_t oc = (size_t)p->oc, ic = (size_t)p->ic, K = (size_t)p->kh * p->kw * ic, kp = (K + KA - 1) / KA * KA;
  const size_t k16 = (K + K16 - 1) / K16 * K16;
  const int64_t lo = p->act_min - p->output_zp, hi = p->act_max - p->output_zp;
  for (int32_t y = 0; y < p->oh; ++y) {
    for (int32_t x = 0; x < p->ow; ++x) {
      int8_t* out = output + ((size_t)y * p->ow + x) * oc;
      for (size_t o = 0; o < oc; ++o) {
        uint32_t sum = 0;
        for (int32_t ky = 0; ky < p->kh; ++ky) {
          const int32_t iy = y * p->stride_h - p->pad_top + ky;
          for (int32_t kx = 0; kx < p->kw; ++kx) {
            const int32_t ix = x * p->stride_w - p->pad_left + kx;
            const size_t k0 = ((size_t)ky * p->kw + kx) * ic;
            const int inside = iy >= 0 && iy < p->ih && ix >= 0 && ix < p->iw;
            const int8_t* in = inside ? input + ((size_t)iy * p->iw + ix) * ic : NULL;
            for (size_t c = 0; c < ic; ++c) {
              sum += (uint32_t)((in ? in[c] : p->input_zp) * packed_weight(packed, packed8, kp, k16, o, k0 + c));
            }
          }
        }
        const qchan qc = qvanilla_channel(q, o, qvanilla_bias(q, o), p->rounding);
        out[o] = finish_any(sum, &qc, lo, hi, p);
      }
    }
  }
}

/* Windows longer than KMAX, plain entry: for each output pixel the int32 sums of up to MAX_OC
 * channels in a scratch row acc, channel by channel (weights are OHWI: a channel's window is
 * contiguous, its taps inside the image added run by run). */
static void conv_plain_direct(const int8_t* input, const int8_t* weights, const qvanilla_channels* q,
                              int8_t* output, const qvanilla_conv* p, uint32_t* acc) {
  const int64_t lo = p->act_min - p->output_zp, hi = p->act_max - p->output_zp;
  const size_t ic = (size_t)p->ic, K = (size_t)p->kh * p->kw * ic;
  for (int32_t o0 = 0; o0 < p->oc; o0 += MAX_OC) {
    const int32_t n = imin(p->oc - o0, MAX_OC);
    for (int32_t y = 0; y < p->oh; ++y) {
      for (int32_t x = 0; x < p->ow; ++x) {
        for (int32_t o = 0; o < n; ++o) {
          const int8_t* w = weights + (size_t)(o0 + o) * K;
          uint32_t sum = 0;
          for (int32_t ky = 0; ky < p->kh; ++ky) {
            const int32_t iy = y * p->stride_h - p->pad_top + ky;
            if (iy < 0 || iy >= p->ih) continue; /* padding: (zp - zp) contributes nothing */
            for (int32_t kx = 0; kx < p->kw; ++kx) {
              const int32_t ix = x * p->stride_w - p->pad_left + kx;
              if (ix < 0 || ix >= p->iw) continue;
              const int8_t* in = input + ((size_t)iy * p->iw + ix) * ic;
              const int8_t* wt = w + ((size_t)ky * p->kw + kx) * ic;
              for (size_t c = 0; c < ic; ++c) { /* |in - zp|, |w - weight_zp| <= 255 */
                sum += (uint32_t)(((int32_t)in[c] - p->input_zp) * ((int32_t)wt[c] - p->weight_zp));
              }
            }
          }
          acc[o] = sum;
        }
        int8_t* out = output + ((size_t)y * p->ow + x) * p->oc + o0;
        for (int32_t o = 0; o < n; ++o) {
          const qchan qc = qvanilla_channel(q, (size_t)(o0 + o), qvanilla_bias(q, o0 + o), p->rounding);
          out[o] = finish_any(acc[o], &qc, lo, hi, p);
        }
      }
    }
  }
}

/* The dense entries: weights of `kind` (PLAIN: OHWI int8, PACKED: int16 rows, PACKED8: int8 blocks). */
static ALWAYS_INLINE qvanilla_status dense(const qvanilla_context* ctx, const qvanilla_conv_params* params,
                             const qvanilla_per_channel_quant_params* quant, const qvanilla_dims* input_dims,
                             const int8_t* input, const qvanilla_dims* filter_dims, const void* weights,
                             const int32_t* bias, const qvanilla_dims* output_dims, int8_t* output, int kind) {
  qvanilla_conv p;
  qvanilla_channels q;
  const qvanilla_status status = qvanilla_check(ctx, params, quant, input_dims, input, filter_dims, weights, bias,
                                                output_dims, output, kind, qvanilla_dense_scratch, &p, &q);
  if (status != QVANILLA_OK) return status;
  const int16_t* packed = kind == PACKED ? weights : NULL;
  const int8_t* packed8 = kind == PACKED8 ? weights : NULL;
  if (short_windows(&p)) {
    return conv_tiles(input, packed, packed8, kind == PLAIN ? weights : NULL, &q, output, &p, ctx->buf,
                      (size_t)ctx->size);
  } else if (kind == PLAIN) {
    conv_plain_direct(input, weights, &q, output, &p, ctx->buf);
  } else {
    conv_packed_direct(input, packed, packed8, &q, output, &p);
  }
  return QVANILLA_OK;
}

qvanilla_status qvanilla_conv2d_s8(const qvanilla_context* ctx, const qvanilla_conv_params* params,
                                   const qvanilla_per_channel_quant_params* quant, const qvanilla_dims* input_dims,
                                   const int8_t* input, const qvanilla_dims* filter_dims, const int8_t* weights,
                                   const int32_t* bias, const qvanilla_dims* output_dims, int8_t* output) {
  return dense(ctx, params, quant, input_dims, input, filter_dims, weights, bias, output_dims, output, PLAIN);
}

qvanilla_status qvanilla_conv2d_packed_s8(const qvanilla_context* ctx, const qvanilla_conv_params* params,
                                          const qvanilla_per_channel_quant_params* quant,
                                          const qvanilla_dims* input_dims, const int8_t* input,
                                          const qvanilla_dims* filter_dims, const int16_t* packed_weights,
                                          const int32_t* bias, const qvanilla_dims* output_dims, int8_t* output) {
  return dense(ctx, params, quant, input_dims, input, filter_dims, packed_weights, bias, output_dims, output, PACKED);
}

qvanilla_status qvanilla_conv2d_packed8_s8(const qvanilla_context* ctx, const qvanilla_conv_params* params,
                                           const qvanilla_per_channel_quant_params* quant,
                                           const qvanilla_dims* input_dims, const int8_t* input,
                                           const qvanilla_dims* filter_dims, const int8_t* packed_weights,
                                           const int32_t* bias, const qvanilla_dims* output_dims, int8_t* output) {
  return dense(ctx, params, quant, input_dims, input, filter_dims, packed_weights, bias, output_dims, output, PACKED8);
}

int32_t qvanilla_conv2d_s8_get_buffer_size(const qvanilla_dims* input_dims, const qvanilla_dims* filter_dims) {
  return qvanilla_buffer_size(input_dims, filter_dims, PLAIN, qvanilla_dense_scratch);
}

int32_t qvanilla_conv2d_packed_s8_get_buffer_size(const qvanilla_dims* input_dims, const qvanilla_dims* filter_dims) {
  return qvanilla_buffer_size(input_dims, filter_dims, PACKED, qvanilla_dense_scratch);
}

int32_t qvanilla_conv2d_packed8_s8_get_buffer_size(const qvanilla_dims* input_dims, const qvanilla_dims* filter_dims) {
  return qvanilla_buffer_size(input_dims, filter_dims, PACKED8, qvanilla_dense_scratch);
}
