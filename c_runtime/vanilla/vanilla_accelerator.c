/* Host mock of the Vanilla accelerator's Conv2D engine.
 *
 * Accumulates one weight at a time over a whole output row, so the innermost loop walks
 * contiguous memory and compilers vectorise it.  The summation order is fixed, so results
 * are bit-for-bit reproducible run to run. */
#include "vanilla_accelerator.h"

#include <stddef.h>
#include <string.h>

static int max_int(int a, int b) { return a > b ? a : b; }
static int min_int(int a, int b) { return a < b ? a : b; }

int32_t vanilla_conv2dnchw(float* ifmap, float* weights, float* result, int oc, int iw, int ih, int ic,
                           int kh, int kw) {
  if (ifmap == NULL || weights == NULL || result == NULL) return VANILLA_EINVAL;
  if (oc <= 0 || iw <= 0 || ih <= 0 || ic <= 0 || kh <= 0 || kw <= 0) return VANILLA_EINVAL;
  if (kh % 2 == 0 || kw % 2 == 0) return VANILLA_EINVAL;

  const int pad_h = (kh - 1) / 2, pad_w = (kw - 1) / 2;
  const size_t plane = (size_t)ih * (size_t)iw;
  for (int o = 0; o < oc; ++o) {
    float* out = result + (size_t)o * plane;
    memset(out, 0, plane * sizeof(float));
    for (int c = 0; c < ic; ++c) {
      const float* in = ifmap + (size_t)c * plane;
      const float* w = weights + (((size_t)o * ic + c) * kh) * kw;
      for (int ky = 0; ky < kh; ++ky) {
        const int dy = ky - pad_h;
        const int y_begin = max_int(0, -dy), y_end = min_int(ih, ih - dy);
        for (int kx = 0; kx < kw; ++kx) {
          const int dx = kx - pad_w;
          const int x_begin = max_int(0, -dx), x_end = min_int(iw, iw - dx);
          const float wv = w[ky * kw + kx];
          for (int y = y_begin; y < y_end; ++y) {
            float* restrict orow = out + (size_t)y * iw;
            const float* restrict irow = in + (size_t)(y + dy) * iw + dx;
            for (int x = x_begin; x < x_end; ++x) orow[x] += wv * irow[x];
          }
        }
      }
    }
  }
  return VANILLA_OK;
}
