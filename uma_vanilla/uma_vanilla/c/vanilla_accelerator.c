/* The compiler's calls of Vanilla's entries (vanilla_accelerator.h): flat arguments, because TVM's
 * TIR cannot build a C struct, packed into the entries' `const` structs here. */
#include <stddef.h>

#include "vanilla_accelerator.h"

typedef vanilla_status (*entry_t)(const vanilla_context*, const vanilla_conv_params*, const vanilla_dims*,
                                  const float*, const vanilla_dims*, const float*, const float*, const float*,
                                  const float*, const vanilla_dims*, float*);

static int32_t call(entry_t entry, int8_t* buf, int32_t buf_size, float* input, float* filter, float* bias,
                    float* residual, float* slope, float* output, int32_t ic, int32_t ih, int32_t iw, int32_t oc,
                    int32_t oh, int32_t ow, int32_t kh, int32_t kw, int32_t filter_c, int32_t stride_h,
                    int32_t stride_w, int32_t pad_top, int32_t pad_left, float lo, float hi) {
  const vanilla_context ctx = {buf, buf_size};
  const vanilla_conv_params params = {{stride_h, stride_w}, {pad_top, pad_left}, {lo, hi}};
  const vanilla_dims input_dims = {1, ih, iw, ic}, filter_dims = {oc, kh, kw, filter_c}, output_dims = {1, oh, ow, oc};
  return (int32_t)entry(&ctx, &params, &input_dims, input, &filter_dims, filter, bias, residual, slope, &output_dims,
                        output);
}

int32_t vanilla_conv2dnchw_general(int8_t* buf, int32_t buf_size, float* input, float* filter, float* bias,
                                   float* residual, float* slope, float* output, int32_t ic, int32_t ih, int32_t iw,
                                   int32_t oc, int32_t oh, int32_t ow, int32_t kh, int32_t kw, int32_t stride_h,
                                   int32_t stride_w, int32_t pad_top, int32_t pad_left, float lo, float hi) {
  return call(vanilla_conv2d_nchw, buf, buf_size, input, filter, bias, residual, slope, output, ic, ih, iw, oc, oh,
              ow, kh, kw, ic, stride_h, stride_w, pad_top, pad_left, lo, hi);
}

int32_t vanilla_conv2dnhwc_general(int8_t* buf, int32_t buf_size, float* input, float* filter, float* bias,
                                   float* residual, float* slope, float* output, int32_t ic, int32_t ih, int32_t iw,
                                   int32_t oc, int32_t oh, int32_t ow, int32_t kh, int32_t kw, int32_t stride_h,
                                   int32_t stride_w, int32_t pad_top, int32_t pad_left, float lo, float hi) {
  return call(vanilla_conv2d_nhwc, buf, buf_size, input, filter, bias, residual, slope, output, ic, ih, iw, oc, oh,
              ow, kh, kw, ic, stride_h, stride_w, pad_top, pad_left, lo, hi);
}

int32_t vanilla_depthwise_conv2dnchw(int8_t* buf, int32_t buf_size, float* input, float* filter, float* bias,
                                     float* residual, float* slope, float* output, int32_t channels, int32_t ih,
                                     int32_t iw, int32_t oh, int32_t ow, int32_t kh, int32_t kw, int32_t stride_h,
                                     int32_t stride_w, int32_t pad_top, int32_t pad_left, float lo, float hi) {
  return call(vanilla_depthwise_conv2d_nchw, buf, buf_size, input, filter, bias, residual, slope, output, channels,
              ih, iw, channels, oh, ow, kh, kw, 1, stride_h, stride_w, pad_top, pad_left, lo, hi);
}

int32_t vanilla_depthwise_conv2dnhwc(int8_t* buf, int32_t buf_size, float* input, float* filter, float* bias,
                                     float* residual, float* slope, float* output, int32_t channels, int32_t ih,
                                     int32_t iw, int32_t oh, int32_t ow, int32_t kh, int32_t kw, int32_t stride_h,
                                     int32_t stride_w, int32_t pad_top, int32_t pad_left, float lo, float hi) {
  return call(vanilla_depthwise_conv2d_nhwc, buf, buf_size, input, filter, bias, residual, slope, output, channels,
              ih, iw, channels, oh, ow, kh, kw, 1, stride_h, stride_w, pad_top, pad_left, lo, hi);
}
