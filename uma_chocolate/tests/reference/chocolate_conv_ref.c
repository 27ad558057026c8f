/* See chocolate_conv_ref.h. */
#include "chocolate_conv_ref.h"

#include <stddef.h>

#include "kit_requantize.h"

/* The input element tap (ky, kx, c) of output pixel m reads, or -1 in the padding. */
static int64_t tap(const chocolate_conv_params* p, int64_t m, int64_t ky, int64_t kx, int64_t c) {
  const int64_t y = m / p->ow * p->stride.h - p->padding.h + ky, x = m % p->ow * p->stride.w - p->padding.w + kx;
  if (y < 0 || y >= p->input.h || x < 0 || x >= p->input.w) return -1;
  return (y * p->input.w + x) * p->input.c + c;
}

void chocolate_conv_s8_ref(const chocolate_conv_params* conv, const chocolate_quant_params* quant,
                           const chocolate_per_channel_quant_params* per_channel, const int8_t* input,
                           const int8_t* weights, int8_t* output) {
  for (int64_t m = 0; m < conv->rows; ++m) {
    for (int64_t n = 0; n < conv->channels; ++n) {
      int64_t sum = per_channel->bias[n];
      for (int64_t ky = 0, k = 0; ky < conv->kernel.h; ++ky)
        for (int64_t kx = 0; kx < conv->kernel.w; ++kx)
          for (int64_t c = 0; c < conv->input.c; ++c, ++k) {
            const int64_t at = tap(conv, m, ky, kx, c);
            if (at >= 0) sum += (int64_t)(input[at] - quant->input_zp) * weights[k * conv->channels + n];
          }
      /* the 32-bit accumulator's value (the test data stay within int32) */
      int64_t v = (int64_t)kit_requantize((int32_t)sum, per_channel->multiplier[n], per_channel->shift[n]);
      v += quant->output_zp;
      v = v < quant->act_min ? quant->act_min : v > quant->act_max ? quant->act_max : v;
      output[m * conv->channels + n] = (int8_t)v;
    }
  }
}

void chocolate_conv_f32_ref(const chocolate_conv_params* conv, const chocolate_f32_params* stage, const float* input,
                            const float* weights, float* output) {
  for (int64_t m = 0; m < conv->rows; ++m) {
    for (int64_t n = 0; n < conv->channels; ++n) {
      float sum = 0.0f;
      for (int64_t ky = 0, k = 0; ky < conv->kernel.h; ++ky)
        for (int64_t kx = 0; kx < conv->kernel.w; ++kx)
          for (int64_t c = 0; c < conv->input.c; ++c, ++k) {
            const int64_t at = tap(conv, m, ky, kx, c);
            sum += (at >= 0 ? input[at] : 0.0f) * weights[k * conv->channels + n];
          }
      if (stage->bias != NULL) sum += stage->bias[n];
      output[m * conv->channels + n] = sum < stage->lo ? stage->lo : sum > stage->hi ? stage->hi : sum;
    }
  }
}
