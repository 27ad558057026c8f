/* Host mock of the QVanilla int8 Conv2D engine.
 *
 * For each output pixel the int32 accumulators of all output channels are built in a stack
 * row (weights are HWIO, so the innermost loop runs over contiguous output channels and
 * vectorises), then requantized per channel.  Integer arithmetic: results do not depend on
 * the summation order and are bit-exact.
 * The entries validate every argument first (see the header's status codes); past that no
 * signed arithmetic can overflow: sums wrap as unsigned int32 and requantization saturates. */
#include "qvanilla.h"

#include <stddef.h>
#include <stdint.h>

enum { MAX_OC = 1024 }; /* output channels per pass over the input (stack accumulators) */

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

/* The entries' validation: a status code of the header, in the header's order. */
static int32_t check(const int8_t* input, const int8_t* weights, const int32_t* channel_params,
                     const int8_t* output, const qvanilla_conv_params* p) {
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
  if (!fits(&in, p->ih, bytes) || !fits(&in, p->iw, bytes) || !fits(&in, p->ic, bytes) || !fits(&out, p->oh, bytes) ||
      !fits(&out, p->ow, bytes) || !fits(&out, p->oc, bytes) || !fits(&w, p->kh, bytes) || !fits(&w, p->kw, bytes) ||
      !fits(&w, p->ic, bytes) || !fits(&w, p->oc, bytes) || !fits(&table, p->oc, bytes / sizeof(int32_t)) ||
      !extent_ok(p->oh, p->stride_h, p->kh) || !extent_ok(p->ow, p->stride_w, p->kw)) {
    return QVANILLA_ERANGE;
  }
  const int32_t* shift = channel_params + 2 * (size_t)p->oc;
  for (int32_t o = 0; o < p->oc; ++o) {
    if (shift[o] < QVANILLA_SHIFT_MIN || shift[o] > QVANILLA_SHIFT_MAX) return QVANILLA_ESHIFT;
  }
  return QVANILLA_OK;
}

int32_t qvanilla_conv2d_s8(const int8_t* input, const int8_t* weights, const int32_t* channel_params,
                           int8_t* output, const qvanilla_conv_params* p) {
  const int32_t status = check(input, weights, channel_params, output, p);
  if (status != QVANILLA_OK) return status;
  const int32_t* bias = channel_params;
  const int32_t* multiplier = channel_params + (size_t)p->oc;
  const int32_t* shift = channel_params + 2 * (size_t)p->oc;
  uint32_t acc[MAX_OC]; /* int32 sums in unsigned arithmetic: they wrap, as the hardware's adders */
  for (int32_t o0 = 0; o0 < p->oc; o0 += MAX_OC) {
    const int32_t n = p->oc - o0 < MAX_OC ? p->oc - o0 : MAX_OC;
    for (int32_t y = 0; y < p->oh; ++y) {
      for (int32_t x = 0; x < p->ow; ++x) {
        for (int32_t o = 0; o < n; ++o) acc[o] = (uint32_t)bias[o0 + o];
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
          const int64_t q = (int64_t)requantize(wrapped(acc[o]), multiplier[o0 + o], shift[o0 + o]) + p->output_zp;
          out[o] = (int8_t)(q < p->act_min ? p->act_min : (q > p->act_max ? p->act_max : q));
        }
      }
    }
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
