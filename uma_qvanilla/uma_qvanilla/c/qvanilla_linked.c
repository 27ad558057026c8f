/* The header's calls for generated code are static inline: C that includes qvanilla.h (the Relay
 * engine's) calls them there.  Code that only links to the library, as the Relax engine's LLVM
 * code does, needs symbols: these are the same calls, with the same arguments, under a name ending
 * in _linked. */
#include "qvanilla_calls.h"

__typeof__(qvanilla_conv2d_nhwc_packed_s8) qvanilla_conv2d_nhwc_packed_s8_linked;
__typeof__(qvanilla_conv2d_nhwc_packed8_s8) qvanilla_conv2d_nhwc_packed8_s8_linked;
__typeof__(qvanilla_depthwise_conv2d_nhwc_packed_s8) qvanilla_depthwise_conv2d_nhwc_packed_s8_linked;

int32_t qvanilla_conv2d_nhwc_packed_s8_linked(int8_t* input, int16_t* packed_weights, int32_t* channel_params,
                                              int8_t* output, int8_t* scratch, int32_t scratch_size, int32_t ih,
                                              int32_t iw, int32_t ic, int32_t oh, int32_t ow, int32_t oc, int32_t kh,
                                              int32_t kw, int32_t stride_h, int32_t stride_w, int32_t pad_top,
                                              int32_t pad_left, int32_t input_zp, int32_t output_zp, int32_t act_min,
                                              int32_t act_max, int32_t rounding) {
  return qvanilla_conv2d_nhwc_packed_s8(input, packed_weights, channel_params, output, scratch, scratch_size, ih, iw,
                                        ic, oh, ow, oc, kh, kw, stride_h, stride_w, pad_top, pad_left, input_zp,
                                        output_zp, act_min, act_max, rounding);
}

int32_t qvanilla_conv2d_nhwc_packed8_s8_linked(int8_t* input, int8_t* packed_weights, int32_t* channel_params,
                                               int8_t* output, int8_t* scratch, int32_t scratch_size, int32_t ih,
                                               int32_t iw, int32_t ic, int32_t oh, int32_t ow, int32_t oc, int32_t kh,
                                               int32_t kw, int32_t stride_h, int32_t stride_w, int32_t pad_top,
                                               int32_t pad_left, int32_t input_zp, int32_t output_zp, int32_t act_min,
                                               int32_t act_max, int32_t rounding) {
  return qvanilla_conv2d_nhwc_packed8_s8(input, packed_weights, channel_params, output, scratch, scratch_size, ih, iw,
                                         ic, oh, ow, oc, kh, kw, stride_h, stride_w, pad_top, pad_left, input_zp,
                                         output_zp, act_min, act_max, rounding);
}

int32_t qvanilla_depthwise_conv2d_nhwc_packed_s8_linked(int8_t* input, int16_t* packed_weights,
                                                        int32_t* channel_params, int8_t* output, int8_t* scratch,
                                                        int32_t scratch_size, int32_t ih, int32_t iw, int32_t channels,
                                                        int32_t oh, int32_t ow, int32_t kh, int32_t kw,
                                                        int32_t stride_h, int32_t stride_w, int32_t pad_top,
                                                        int32_t pad_left, int32_t input_zp, int32_t output_zp,
                                                        int32_t act_min, int32_t act_max, int32_t rounding) {
  return qvanilla_depthwise_conv2d_nhwc_packed_s8(input, packed_weights, channel_params, output, scratch,
                                                  scratch_size, ih, iw, channels, oh, ow, kh, kw, stride_h, stride_w,
                                                  pad_top, pad_left, input_zp, output_zp, act_min, act_max, rounding);
}
