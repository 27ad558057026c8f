/* The checks and the engine call Vanilla's entries share: the API's structs become the kit's
 * geometry (kit_conv_f32.h), whose float32 engine does the work.
 *
 * The entries keep Vanilla's status codes: the kit's are the same numbers up to ECLAMP; its
 * ETAPS, ERANGE and EBUFFER are Vanilla's next three after EEVEN, in the header's order. */
#include "vanilla_entry.h"

#include <stddef.h>
#include <stdint.h>

#include "kit_conv_f32.h"

/* Compile-time checks (C99): the limit the compiler reads from the header is the engine's, and
 * the codes passed on unchanged have the same numbers. */
#define SAME_VALUE(name, a, b) typedef char name[(a) == (b) ? 1 : -1]
SAME_VALUE(vanilla_max_taps_is_the_kits, VANILLA_MAX_TAPS, KIT_CONV_F32_MAX_TAPS);
SAME_VALUE(vanilla_einval_is_the_kits, VANILLA_EINVAL, KIT_CONV_F32_EINVAL);
SAME_VALUE(vanilla_esize_is_the_kits, VANILLA_ESIZE, KIT_CONV_F32_ESIZE);
SAME_VALUE(vanilla_estride_is_the_kits, VANILLA_ESTRIDE, KIT_CONV_F32_ESTRIDE);
SAME_VALUE(vanilla_epad_is_the_kits, VANILLA_EPAD, KIT_CONV_F32_EPAD);
SAME_VALUE(vanilla_eclamp_is_the_kits, VANILLA_ECLAMP, KIT_CONV_F32_ECLAMP);

/* Vanilla's code for a status of the kit's engine. */
static vanilla_status status(int32_t kit) {
  switch (kit) {
    case KIT_CONV_F32_ETAPS: return VANILLA_ETAPS;
    case KIT_CONV_F32_ERANGE: return VANILLA_ERANGE;
    case KIT_CONV_F32_EBUFFER: return VANILLA_EBUFFER;
    default: return (vanilla_status)kit; /* OK, EINVAL .. ECLAMP (checked above) */
  }
}

/* The kit's geometry of the structs, and the status of every check before the scratch's, in the
 * header's order: NULL pointers, then sizes (the kit's and the dims' agreement), then the rest. */
static vanilla_status geometry(int32_t depthwise, const vanilla_conv_params* params, const vanilla_dims* in,
                               const float* input, const vanilla_dims* filter_dims, const float* filter,
                               const vanilla_dims* out, float* output, kit_conv_f32_geometry* g) {
  if (params == NULL || in == NULL || filter_dims == NULL || out == NULL) return VANILLA_EINVAL;
  const kit_conv_f32_geometry k = {out->c, in->c, in->h, in->w, out->h, out->w, filter_dims->h, filter_dims->w,
                                   params->stride.h, params->stride.w, params->padding.h, params->padding.w};
  *g = k;
  const int32_t s = kit_conv_f32_check(input, filter, output, g, params->activation.min, params->activation.max,
                                       depthwise);
  if (s == KIT_CONV_F32_EINVAL || s == KIT_CONV_F32_ESIZE) return status(s);
  if (in->n != 1 || out->n != 1 || filter_dims->n != out->c || filter_dims->c != (depthwise ? 1 : in->c))
    return VANILLA_ESIZE;
  return status(s);
}

vanilla_status vanilla_entry_run(int32_t depthwise, int32_t nhwc, const vanilla_context* ctx,
                                 const vanilla_conv_params* params, const vanilla_dims* input_dims,
                                 const float* input, const vanilla_dims* filter_dims, const float* filter,
                                 const float* bias, const float* residual, const float* slope,
                                 const vanilla_dims* output_dims, float* output) {
  kit_conv_f32_geometry g;
  const vanilla_status s = geometry(depthwise, params, input_dims, input, filter_dims, filter, output_dims, output, &g);
  if (s != VANILLA_OK) return s;
  const kit_conv_f32_context c = {ctx != NULL ? ctx->buf : NULL, ctx != NULL ? ctx->size : 0};
  const float lo = params->activation.min, hi = params->activation.max;
  if (depthwise)
    return status(nhwc ? kit_depthwise_conv2d_f32_nhwc(&c, input, filter, bias, residual, slope, output, &g, lo, hi)
                       : kit_depthwise_conv2d_f32_nchw(&c, input, filter, bias, residual, slope, output, &g, lo, hi));
  return status(nhwc ? kit_conv2d_f32_nhwc(&c, input, filter, bias, residual, slope, output, &g, lo, hi)
                     : kit_conv2d_f32_nchw(&c, input, filter, bias, residual, slope, output, &g, lo, hi));
}

int32_t vanilla_entry_buffer_size(int32_t depthwise, int32_t nhwc, const vanilla_conv_params* params,
                                  const vanilla_dims* input_dims, const vanilla_dims* filter_dims,
                                  const vanilla_dims* output_dims) {
  static float any; /* never read or written: stands for each tensor in the checks */
  kit_conv_f32_geometry g;
  if (geometry(depthwise, params, input_dims, &any, filter_dims, &any, output_dims, &any, &g) != VANILLA_OK) return 0;
  return kit_conv_f32_get_buffer_size(&g, depthwise, nhwc);
}
