/* QVanilla's dense dot products: a tile's windows times four channels' weights, in one variant per
 * instruction set (plain C that compilers vectorise, the DSP extension's SMLAD, Helium, AVX2 in
 * qvanilla_avx2.c), into rows of accumulators (qvanilla_conv2d_s8.c's conv_tiles() calls them once
 * per four channels of a tile). */
#include "qvanilla_internal.h"

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

/* dot_pairs with the reduction's length a constant for the short ones (up to 64: 1x1 convs of up
 * to 64 channels), so that gcc unrolls it: their sums' horizontal additions are much of the work. */
void qvanilla_dot_tile(const int16_t* win, size_t n, size_t kp, const int16_t* w, uint32_t* a, size_t stride,
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

#ifdef QVANILLA_MVE
/* Helium's int8 path of conv_tiles(), for packed weights all in [-128, 127] (a symmetric
 * quantization's are): windows of int8 (the raw input, input_zp where the window leaves the
 * image, zeros from K on to K16, K rounded up to 16), four channels' weights interleaved in blocks
 * of 16 (one pointer, immediate offsets) -- as the packed8 entry takes them, else narrowed to int8
 * for each tile -- and sixteen int8
 * multiply-adds per VMLADAVA: 2 windows x 4 channels, six loads and eight VMLADAVA per 128
 * multiply-adds, against 64 with int16. */

/* Whether the n int16 at w (n a multiple of 8) are all in [-128, 127]. */
int qvanilla_fit_int8(const int16_t* w, size_t n) {
  int16x8_t lo = vdupq_n_s16(0), hi = lo;
  for (size_t i = 0; i < n; i += 8) {
    const int16x8_t v = vld1q_s16(w + i);
    lo = vminq_s16(lo, v);
    hi = vmaxq_s16(hi, v);
  }
  return vminvq_s16(INT16_MAX, lo) >= -128 && vmaxvq_s16(INT16_MIN, hi) <= 127;
}

/* wq[(k / 16) * 64 + j * 16 + k % 16] = w[j * kp + k] (k < kp; 0 up to k16), j < 4: four rows of
 * packed weights (kp a multiple of 8, so k16 - kp is 0 or 8) narrowed to int8 by VSTRB's
 * truncating store, sixteen a step (no predicates: gcc 12 moves them through general registers). */
void qvanilla_narrow4(int8_t* wq, const int16_t* w, size_t kp, size_t k16) {
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
void qvanilla_dot_tile8(const int8_t* win, size_t n, size_t k16, const int8_t* wq, uint32_t* a, size_t stride,
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
void qvanilla_dot_tile_w8(const int16_t* win, size_t n, size_t kp, const int8_t* w8, uint32_t* a,
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
