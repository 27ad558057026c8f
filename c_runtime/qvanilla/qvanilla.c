/* Host mock of the QVanilla int8 Conv2D engine.
 *
 * For each output pixel the int32 accumulators of all output channels are built in a stack
 * row (weights are HWIO, so the innermost loop runs over contiguous output channels and
 * vectorises), then requantized per channel.  Integer arithmetic: results do not depend on
 * the summation order and are bit-exact. */
#include "qvanilla.h"

#include <stddef.h>

enum { MAX_OC = 1024 }; /* output channels per pass over the input (stack accumulators) */

int32_t qvanilla_requantize(int32_t acc, int32_t multiplier, int32_t shift) {
  const int left = shift > 0 ? shift : 0;
  const int right = 31 + (shift > 0 ? 0 : -shift);
  int64_t x = (int64_t)acc * ((int64_t)1 << left);
  x = x * (int64_t)multiplier;
  x = (x + ((int64_t)1 << (right - 1))) >> right; /* arithmetic shift: rounds ties upward */
  if (x > INT32_MAX) return INT32_MAX;
  if (x < INT32_MIN) return INT32_MIN;
  return (int32_t)x;
}

static int valid(const qvanilla_conv_params* p) {
  return p->ih > 0 && p->iw > 0 && p->ic > 0 && p->oh > 0 && p->ow > 0 && p->oc > 0 && p->kh > 0 && p->kw > 0 &&
         p->stride_h > 0 && p->stride_w > 0 && p->pad_top >= 0 && p->pad_left >= 0 && p->act_min <= p->act_max &&
         p->act_min >= -128 && p->act_max <= 127;
}

int32_t qvanilla_conv2d_s8(const int8_t* input, const int8_t* weights, const int32_t* channel_params,
                           int8_t* output, const qvanilla_conv_params* p) {
  if (input == NULL || weights == NULL || channel_params == NULL || output == NULL || p == NULL || !valid(p)) {
    return QVANILLA_EINVAL;
  }
  const int32_t* bias = channel_params;
  const int32_t* multiplier = channel_params + p->oc;
  const int32_t* shift = channel_params + 2 * p->oc;
  int32_t acc[MAX_OC];
  for (int o0 = 0; o0 < p->oc; o0 += MAX_OC) {
    const int n = p->oc - o0 < MAX_OC ? p->oc - o0 : MAX_OC;
    for (int y = 0; y < p->oh; ++y) {
      for (int x = 0; x < p->ow; ++x) {
        for (int o = 0; o < n; ++o) acc[o] = bias[o0 + o];
        for (int ky = 0; ky < p->kh; ++ky) {
          const int iy = y * p->stride_h - p->pad_top + ky;
          if (iy < 0 || iy >= p->ih) continue; /* padding: (zp - zp) contributes nothing */
          for (int kx = 0; kx < p->kw; ++kx) {
            const int ix = x * p->stride_w - p->pad_left + kx;
            if (ix < 0 || ix >= p->iw) continue;
            const int8_t* in = input + ((size_t)iy * p->iw + ix) * p->ic;
            const int8_t* w = weights + ((size_t)ky * p->kw + kx) * p->ic * p->oc + o0;
            for (int c = 0; c < p->ic; ++c) {
              const int32_t v = (int32_t)in[c] - p->input_zp;
              const int8_t* restrict wc = w + (size_t)c * p->oc;
              int32_t* restrict a = acc;
              for (int o = 0; o < n; ++o) a[o] += v * ((int32_t)wc[o] - p->weight_zp);
            }
          }
        }
        int8_t* out = output + ((size_t)y * p->ow + x) * p->oc + o0;
        for (int o = 0; o < n; ++o) {
          int32_t q = qvanilla_requantize(acc[o], multiplier[o0 + o], shift[o0 + o]) + p->output_zp;
          q = q < p->act_min ? p->act_min : (q > p->act_max ? p->act_max : q);
          out[o] = (int8_t)q;
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
