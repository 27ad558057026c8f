/* Plain reference kernels of QVanilla's plain entries: straight loops over the definition in
 * qvanilla.h, no blocking, no packing, no scratch, 64-bit sums wrapped to int32 at the end.  For
 * the tests (they compare the optimised entries with these and with numpy); not part of the
 * library an MLF ships (the compiler copies only the files of c/ itself).  The arguments must be
 * valid: what the entries accept. */
#include <stdint.h>

#include "kit_requantize.h"
#include "qvanilla.h"

static int8_t output_stage(int64_t acc, int32_t multiplier, int32_t shift, const qvanilla_conv_params* params) {
  const int32_t wrapped = (int32_t)(uint32_t)(uint64_t)acc; /* an int32 adder's sum */
  const int64_t r = (int64_t)params->output_zp + (params->rounding == QVANILLA_ROUNDING_TFLITE
                                                      ? kit_requantize_tflite(wrapped, multiplier, shift)
                                                      : kit_requantize(wrapped, multiplier, shift));
  return (int8_t)(r < params->activation.min ? params->activation.min
                  : r > params->activation.max ? params->activation.max : r);
}

/* The input at (iy, ix, c) less input_zp: 0 in the padding. */
static int64_t centred(const int8_t* input, const qvanilla_dims* in, int64_t iy, int64_t ix, int32_t c, int32_t zp) {
  if (iy < 0 || iy >= in->h || ix < 0 || ix >= in->w) return 0;
  return (int64_t)input[(iy * in->w + ix) * in->c + c] - zp;
}

void qvanilla_conv2d_s8_ref(const qvanilla_conv_params* params, const qvanilla_per_channel_quant_params* quant,
                            const qvanilla_dims* input_dims, const int8_t* input, const qvanilla_dims* filter_dims,
                            const int8_t* weights, const int32_t* bias, const qvanilla_dims* output_dims,
                            int8_t* output) {
  const int32_t ic = input_dims->c, oc = output_dims->c;
  for (int64_t y = 0; y < output_dims->h; ++y) {
    for (int64_t x = 0; x < output_dims->w; ++x) {
      for (int32_t o = 0; o < oc; ++o) {
        int64_t acc = bias[o];
        for (int64_t ky = 0; ky < filter_dims->h; ++ky) {
          for (int64_t kx = 0; kx < filter_dims->w; ++kx) {
            const int64_t iy = y * params->stride.h - params->padding.h + ky;
            const int64_t ix = x * params->stride.w - params->padding.w + kx;
            for (int32_t c = 0; c < ic; ++c) {
              const int64_t w = weights[((o * filter_dims->h + ky) * filter_dims->w + kx) * ic + c]; /* OHWI */
              acc += centred(input, input_dims, iy, ix, c, params->input_zp) * (w - params->weight_zp);
            }
          }
        }
        output[(y * output_dims->w + x) * oc + o] = output_stage(acc, quant->multiplier[o], quant->shift[o], params);
      }
    }
  }
}

void qvanilla_depthwise_conv2d_s8_ref(const qvanilla_conv_params* params,
                                      const qvanilla_per_channel_quant_params* quant, const qvanilla_dims* input_dims,
                                      const int8_t* input, const qvanilla_dims* filter_dims, const int8_t* weights,
                                      const int32_t* bias, const qvanilla_dims* output_dims, int8_t* output) {
  const int32_t channels = input_dims->c;
  for (int64_t y = 0; y < output_dims->h; ++y) {
    for (int64_t x = 0; x < output_dims->w; ++x) {
      for (int32_t c = 0; c < channels; ++c) {
        int64_t acc = bias[c];
        for (int64_t ky = 0; ky < filter_dims->h; ++ky) {
          for (int64_t kx = 0; kx < filter_dims->w; ++kx) {
            const int64_t iy = y * params->stride.h - params->padding.h + ky;
            const int64_t ix = x * params->stride.w - params->padding.w + kx;
            const int64_t w = weights[(ky * filter_dims->w + kx) * channels + c];
            acc += centred(input, input_dims, iy, ix, c, params->input_zp) * (w - params->weight_zp);
          }
        }
        output[(y * output_dims->w + x) * channels + c] =
            output_stage(acc, quant->multiplier[c], quant->shift[c], params);
      }
    }
  }
}
