/* QVanilla's dense windows: the input under each output pixel's kernel gathered into rows of the
 * scratch (int16, or int8 for Helium's int8 path), input_zp where the window leaves the image,
 * contiguous pixels of 1x1 kernels copied as runs. */
#include "qvanilla_internal.h"

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

/* dst[0..n) = value. */
void qvanilla_fill(int16_t* dst, int16_t value, size_t n) {
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
      qvanilla_fill(r, (int16_t)p->input_zp, row);
      continue;
    }
    qvanilla_fill(r, (int16_t)p->input_zp, (size_t)a * ic);
    widen(r + (size_t)a * ic, input + ((size_t)iy * p->iw + (size_t)(x0 + a)) * ic, (size_t)(b - a) * ic);
    qvanilla_fill(r + (size_t)b * ic, (int16_t)p->input_zp, (size_t)(p->kw - b) * ic);
  }
  qvanilla_fill(dst + (size_t)p->kh * row, 0, kp - (size_t)p->kh * row);
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
void qvanilla_gather_tile(int16_t* win, size_t kp, size_t n, const int8_t* input, const qvanilla_conv* p,
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

#ifdef QVANILLA_MVE /* Helium's int8 windows (qvanilla_dot.c's int8 path) */
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
void qvanilla_gather_tile8(int8_t* win, size_t k16, size_t n, const int8_t* input, const qvanilla_conv* p,
                           int32_t* y, int32_t* x) {
  const int runs = in_runs(p, k16);
  for (size_t i = 0, run; i < n; i += run) {
    const int8_t* src;
    run = next_windows(n - i, runs, k16, input, p, *y, *x, &src);
    if (src != NULL) copy_bytes(win + i * k16, src, run * k16);
    else gather8(win + i * k16, k16, input, p, *y, *x);
    advance(p, run, y, x);
  }
}

#endif
