/* Plain reference of Vanilla's conv entries (vanilla_accelerator.h), for the tests only (not in
 * the MLF): straight loops, no blocking.  It sums the same chain the kit's engine does, so the
 * two agree bit for bit: per output, multiply-adds over (c, ky, kx) (depthwise: (ky, kx)) from +0,
 * a zero for a tap in the padding, fused where the build has a fast fmaf as the engine does;
 * then bias, residual, PReLU and the clamp in that order.  Arguments are not checked. */
#include <float.h>
#include <math.h>
#include <stddef.h>

#include "vanilla_accelerator.h"

#if defined(FP_FAST_FMAF)
#define MADD(a, b, c) fmaf((a), (b), (c))
#else
#define MADD(a, b, c) ((c) + (a) * (b))
#endif

/* Offset of element (c, y, x) of a feature map of h x w pixels and `channels` channels. */
static size_t at(int nhwc, const vanilla_dims* d, int c, int y, int x) {
  return nhwc ? ((size_t)y * d->w + x) * d->c + c : ((size_t)c * d->h + y) * d->w + x;
}

void vanilla_conv2d_reference(int depthwise, int nhwc, const vanilla_conv_params* p, const vanilla_dims* in,
                              const float* input, const vanilla_dims* fd, const float* filter, const float* bias,
                              const float* residual, const float* slope, const vanilla_dims* out, float* output) {
  const float lo = p->activation.min <= -FLT_MAX ? -INFINITY : p->activation.min;
  const float hi = p->activation.max >= FLT_MAX ? INFINITY : p->activation.max;
  for (int o = 0; o < out->c; ++o)
    for (int y = 0; y < out->h; ++y)
      for (int x = 0; x < out->w; ++x) {
        float acc = 0.0f;
        for (int c = depthwise ? o : 0; c < (depthwise ? o + 1 : in->c); ++c)
          for (int ky = 0; ky < fd->h; ++ky)
            for (int kx = 0; kx < fd->w; ++kx) {
              const int iy = y * p->stride.h - p->padding.h + ky, ix = x * p->stride.w - p->padding.w + kx;
              const float v = iy < 0 || iy >= in->h || ix < 0 || ix >= in->w ? 0.0f : input[at(nhwc, in, c, iy, ix)];
              const float w = filter[(((size_t)o * fd->c + (depthwise ? 0 : c)) * fd->h + ky) * fd->w + kx];
              acc = MADD(v, w, acc);
            }
        float v = acc;
        if (bias != NULL) v = v + bias[o];
        if (residual != NULL) v = v + residual[at(nhwc, out, o, y, x)];
        if (slope != NULL) v = v < 0.0f ? v * slope[o] : v;
        v = v < lo ? lo : v;
        output[at(nhwc, out, o, y, x)] = v > hi ? hi : v;
      }
}
