/* What code TVM generates calls: QVanilla's packed entries with plain pointers and ints.
 *
 * TVM's TIR cannot build a C struct, so these fill the API's structs (qvanilla.h: the API a hardware
 * team implements) on their stack and call its entries; a firmware team calling the library by hand
 * uses qvanilla.h alone.  static inline: the C that includes this header (the Relay engine's) calls
 * them there; qvanilla_linked.c gives code that only links to the library (the Relax engine's)
 * symbols of the same calls. */
#ifndef QVANILLA_CALLS_H_
#define QVANILLA_CALLS_H_

#include "qvanilla.h"

#ifdef __cplusplus
extern "C" {
#endif

/* channel_params is the compiler's table of three int32 rows of oc entries: folded bias,
 * multiplier, shift; scratch holds scratch_size bytes. */
/* Both dense calls: int8 weights (packed8) if int8_weights, else int16 (packed). */
static inline int32_t qvanilla_conv2d_nhwc_call(int8_t* input, const void* packed_weights, int int8_weights,
                                                int32_t* channel_params, int8_t* output, int8_t* scratch,
                                                int32_t scratch_size, int32_t ih, int32_t iw, int32_t ic, int32_t oh,
                                                int32_t ow, int32_t oc, int32_t kh, int32_t kw, int32_t stride_h,
                                                int32_t stride_w, int32_t pad_top, int32_t pad_left,
                                                int32_t input_zp, int32_t output_zp, int32_t act_min,
                                                int32_t act_max, int32_t rounding) {
  const qvanilla_context ctx = {scratch, scratch_size};
  const qvanilla_conv_params params = {{stride_h, stride_w}, {pad_top, pad_left}, input_zp, 0, output_zp,
                                       {act_min, act_max}, rounding};
  const int32_t* table = channel_params;
  const int valid = table != 0 && oc > 0; /* no pointer formed from a size the entry rejects */
  const qvanilla_per_channel_quant_params quant = {valid ? table + oc : table, valid ? table + 2 * (int64_t)oc : table};
  const qvanilla_dims input_dims = {1, ih, iw, ic}, filter_dims = {oc, kh, kw, ic}, output_dims = {1, oh, ow, oc};
  if (int8_weights) {
    return qvanilla_conv2d_packed8_s8(&ctx, &params, &quant, &input_dims, input, &filter_dims,
                                      (const int8_t*)packed_weights, table, &output_dims, output);
  }
  return qvanilla_conv2d_packed_s8(&ctx, &params, &quant, &input_dims, input, &filter_dims,
                                   (const int16_t*)packed_weights, table, &output_dims, output);
}

static inline int32_t qvanilla_conv2d_nhwc_packed_s8(int8_t* input, int16_t* packed_weights, int32_t* channel_params,
                                                     int8_t* output, int8_t* scratch, int32_t scratch_size,
                                                     int32_t ih, int32_t iw, int32_t ic, int32_t oh, int32_t ow,
                                                     int32_t oc, int32_t kh, int32_t kw, int32_t stride_h,
                                                     int32_t stride_w, int32_t pad_top, int32_t pad_left,
                                                     int32_t input_zp, int32_t output_zp, int32_t act_min,
                                                     int32_t act_max, int32_t rounding) {
  return qvanilla_conv2d_nhwc_call(input, packed_weights, 0, channel_params, output, scratch, scratch_size, ih, iw,
                                   ic, oh, ow, oc, kh, kw, stride_h, stride_w, pad_top, pad_left, input_zp, output_zp,
                                   act_min, act_max, rounding);
}

static inline int32_t qvanilla_conv2d_nhwc_packed8_s8(int8_t* input, int8_t* packed_weights, int32_t* channel_params,
                                                      int8_t* output, int8_t* scratch, int32_t scratch_size,
                                                      int32_t ih, int32_t iw, int32_t ic, int32_t oh, int32_t ow,
                                                      int32_t oc, int32_t kh, int32_t kw, int32_t stride_h,
                                                      int32_t stride_w, int32_t pad_top, int32_t pad_left,
                                                      int32_t input_zp, int32_t output_zp, int32_t act_min,
                                                      int32_t act_max, int32_t rounding) {
  return qvanilla_conv2d_nhwc_call(input, packed_weights, 1, channel_params, output, scratch, scratch_size, ih, iw,
                                   ic, oh, ow, oc, kh, kw, stride_h, stride_w, pad_top, pad_left, input_zp, output_zp,
                                   act_min, act_max, rounding);
}

static inline int32_t qvanilla_depthwise_conv2d_nhwc_packed_s8(int8_t* input, int16_t* packed_weights,
                                                               int32_t* channel_params, int8_t* output,
                                                               int8_t* scratch, int32_t scratch_size, int32_t ih,
                                                               int32_t iw, int32_t channels, int32_t oh, int32_t ow,
                                                               int32_t kh, int32_t kw, int32_t stride_h,
                                                               int32_t stride_w, int32_t pad_top, int32_t pad_left,
                                                               int32_t input_zp, int32_t output_zp, int32_t act_min,
                                                               int32_t act_max, int32_t rounding) {
  const qvanilla_context ctx = {scratch, scratch_size};
  const qvanilla_conv_params params = {{stride_h, stride_w}, {pad_top, pad_left}, input_zp, 0, output_zp,
                                       {act_min, act_max}, rounding};
  const int32_t* table = channel_params;
  const int valid = table != 0 && channels > 0; /* no pointer formed from a size the entry rejects */
  const qvanilla_per_channel_quant_params quant = {valid ? table + channels : table,
                                                   valid ? table + 2 * (int64_t)channels : table};
  const qvanilla_dims input_dims = {1, ih, iw, channels}, filter_dims = {1, kh, kw, channels};
  const qvanilla_dims output_dims = {1, oh, ow, channels};
  return qvanilla_depthwise_conv2d_packed_s8(&ctx, &params, &quant, &input_dims, input, &filter_dims,
                                             packed_weights, table, &output_dims, output);
}

#ifdef __cplusplus
}
#endif

#endif /* QVANILLA_CALLS_H_ */
