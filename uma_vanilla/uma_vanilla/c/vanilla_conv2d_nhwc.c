/* Conv2D on NHWC feature maps (vanilla_accelerator.h). */
#include "vanilla_accelerator.h"
#include "vanilla_entry.h"

vanilla_status vanilla_conv2d_nhwc(const vanilla_context* ctx, const vanilla_conv_params* params,
                                   const vanilla_dims* input_dims, const float* input,
                                   const vanilla_dims* filter_dims, const float* filter, const float* bias,
                                   const float* residual, const float* slope, const vanilla_dims* output_dims,
                                   float* output) {
  return vanilla_entry_run(0, 1, ctx, params, input_dims, input, filter_dims, filter, bias, residual, slope,
                           output_dims, output);
}

int32_t vanilla_conv2d_nhwc_get_buffer_size(const vanilla_conv_params* params,
                                            const vanilla_dims* input_dims, const vanilla_dims* filter_dims,
                                            const vanilla_dims* output_dims) {
  return vanilla_entry_buffer_size(0, 1, params, input_dims, filter_dims, output_dims);
}
