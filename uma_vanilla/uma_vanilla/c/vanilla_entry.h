/* What Vanilla's entries share (vanilla_entry.c); not part of the API. */
#ifndef VANILLA_ENTRY_H_
#define VANILLA_ENTRY_H_

#include <stdint.h>

#include "vanilla_accelerator.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One entry's call of the kit's engine (kit_conv_f32.h) after Vanilla's checks. */
vanilla_status vanilla_entry_run(int32_t depthwise, int32_t nhwc, const vanilla_context* ctx,
                                 const vanilla_conv_params* params, const vanilla_dims* input_dims,
                                 const float* input, const vanilla_dims* filter_dims, const float* filter,
                                 const float* bias, const float* residual, const float* slope,
                                 const vanilla_dims* output_dims, float* output);

/* The entry's _get_buffer_size. */
int32_t vanilla_entry_buffer_size(int32_t depthwise, int32_t nhwc, const vanilla_conv_params* params,
                                  const vanilla_dims* input_dims, const vanilla_dims* filter_dims,
                                  const vanilla_dims* output_dims);

#ifdef __cplusplus
}
#endif

#endif /* VANILLA_ENTRY_H_ */
