/* Host mock of the Vanilla accelerator's Conv2D engine: its C API (vanilla_accelerator.h) over the
 * kit's float32 conv engine (kit_conv_f32.c, shipped beside it in the MLF), which does the work.
 *
 * The entries keep Vanilla's status codes: the kit's are the same numbers up to ECLAMP, and Vanilla's
 * "same"-padded shorthands add VANILLA_EEVEN, in the header's order. */
#include "vanilla_accelerator.h"

#include <float.h>
#include <stddef.h>
#include <stdint.h>

#include "kit_conv_f32.h"

/* Compile-time checks (C99): the limit the compiler reads from this header is the engine's, and
 * the codes the entries pass on unchanged have the same numbers. */
#define SAME_VALUE(name, a, b) typedef char name[(a) == (b) ? 1 : -1]
SAME_VALUE(vanilla_max_taps_is_the_kits, VANILLA_MAX_TAPS, KIT_CONV_F32_MAX_TAPS);
SAME_VALUE(vanilla_einval_is_the_kits, VANILLA_EINVAL, KIT_CONV_F32_EINVAL);
SAME_VALUE(vanilla_esize_is_the_kits, VANILLA_ESIZE, KIT_CONV_F32_ESIZE);
SAME_VALUE(vanilla_estride_is_the_kits, VANILLA_ESTRIDE, KIT_CONV_F32_ESTRIDE);
SAME_VALUE(vanilla_epad_is_the_kits, VANILLA_EPAD, KIT_CONV_F32_EPAD);
SAME_VALUE(vanilla_eclamp_is_the_kits, VANILLA_ECLAMP, KIT_CONV_F32_ECLAMP);

/* Vanilla's code for a status of the kit's engine. */
static int32_t status(int32_t kit) {
  switch (kit) {
    case KIT_CONV_F32_ETAPS: return VANILLA_ETAPS;
    case KIT_CONV_F32_ERANGE: return VANILLA_ERANGE;
    default: return kit; /* OK, EINVAL .. ECLAMP (checked above) */
  }
}

static kit_conv_f32_geometry geometry(int32_t oc, int32_t ic, int32_t ih, int32_t iw, int32_t oh, int32_t ow,
                                      int32_t kh, int32_t kw, int32_t stride_h, int32_t stride_w, int32_t pad_top,
                                      int32_t pad_left) {
  const kit_conv_f32_geometry g = {oc, ic, ih, iw, oh, ow, kh, kw, stride_h, stride_w, pad_top, pad_left};
  return g;
}

int32_t vanilla_depthwise_conv2dnchw(float* ifmap, float* weights, float* bias, float* residual, float* slope,
                                     float* result, int32_t channels, int32_t iw, int32_t ih, int32_t kh, int32_t kw,
                                     int32_t ow, int32_t oh, int32_t stride_w, int32_t stride_h, int32_t pad_left,
                                     int32_t pad_top, float lo, float hi) {
  const kit_conv_f32_geometry g =
      geometry(channels, channels, ih, iw, oh, ow, kh, kw, stride_h, stride_w, pad_top, pad_left);
  return status(kit_depthwise_conv2d_f32_nchw(ifmap, weights, bias, residual, slope, result, &g, lo, hi));
}

int32_t vanilla_depthwise_conv2dnhwc(float* ifmap, float* weights, float* bias, float* residual, float* slope,
                                     float* result, int32_t channels, int32_t iw, int32_t ih, int32_t kh, int32_t kw,
                                     int32_t ow, int32_t oh, int32_t stride_w, int32_t stride_h, int32_t pad_left,
                                     int32_t pad_top, float lo, float hi) {
  const kit_conv_f32_geometry g =
      geometry(channels, channels, ih, iw, oh, ow, kh, kw, stride_h, stride_w, pad_top, pad_left);
  return status(kit_depthwise_conv2d_f32_nhwc(ifmap, weights, bias, residual, slope, result, &g, lo, hi));
}

int32_t vanilla_conv2dnchw_general(float* ifmap, float* weights, float* bias,
                                   float* residual, float* slope, float* result, int32_t oc, int32_t iw,
                                   int32_t ih, int32_t ic, int32_t kh, int32_t kw, int32_t ow, int32_t oh,
                                   int32_t stride_w, int32_t stride_h, int32_t pad_left, int32_t pad_top, float lo,
                                   float hi) {
  const kit_conv_f32_geometry g = geometry(oc, ic, ih, iw, oh, ow, kh, kw, stride_h, stride_w, pad_top, pad_left);
  return status(kit_conv2d_f32_nchw(ifmap, weights, bias, residual, slope, result, &g, lo, hi));
}

int32_t vanilla_conv2dnhwc_general(float* ifmap, float* weights, float* bias,
                                   float* residual, float* slope, float* result, int32_t oc, int32_t iw,
                                   int32_t ih, int32_t ic, int32_t kh, int32_t kw, int32_t ow, int32_t oh,
                                   int32_t stride_w, int32_t stride_h, int32_t pad_left, int32_t pad_top, float lo,
                                   float hi) {
  const kit_conv_f32_geometry g = geometry(oc, ic, ih, iw, oh, ow, kh, kw, stride_h, stride_w, pad_top, pad_left);
  return status(kit_conv2d_f32_nhwc(ifmap, weights, bias, residual, slope, result, &g, lo, hi));
}

/* The "same"-padded stride-1 entries: odd kernels, output as large as the input.  An even kernel
 * is VANILLA_EEVEN, after the checks the header lists before it (the kit's up to ECLAMP). */
static int32_t same(const float* ifmap, const float* weights, const float* bias, const float* residual,
                    float* result, int oc, int iw, int ih, int ic, int kh, int kw, int nhwc, float lo, float hi) {
  /* kh > 0 keeps kh - 1 from overflowing: the kit reports a size below 1 before it looks at pads */
  const kit_conv_f32_geometry g =
      geometry(oc, ic, ih, iw, ih, iw, kh, kw, 1, 1, kh > 0 ? (kh - 1) / 2 : 0, kw > 0 ? (kw - 1) / 2 : 0);
  if (kh % 2 == 0 || kw % 2 == 0) {
    const int32_t s = kit_conv_f32_check(ifmap, weights, result, &g, lo, hi, 0);
    return s == KIT_CONV_F32_OK || s == KIT_CONV_F32_ERANGE ? VANILLA_EEVEN : status(s);
  }
  return status(nhwc ? kit_conv2d_f32_nhwc(ifmap, weights, bias, residual, NULL, result, &g, lo, hi)
                     : kit_conv2d_f32_nchw(ifmap, weights, bias, residual, NULL, result, &g, lo, hi));
}

int32_t vanilla_conv2dnchw(float* ifmap, float* weights, float* result, int oc, int iw, int ih, int ic,
                           int kh, int kw) {
  return same(ifmap, weights, NULL, NULL, result, oc, iw, ih, ic, kh, kw, 0, -FLT_MAX, FLT_MAX);
}

int32_t vanilla_conv2dnhwc(float* ifmap, float* weights, float* result, int oc, int iw, int ih, int ic,
                           int kh, int kw) {
  return same(ifmap, weights, NULL, NULL, result, oc, iw, ih, ic, kh, kw, 1, -FLT_MAX, FLT_MAX);
}

int32_t vanilla_conv2dnchw_clamp(float* ifmap, float* weights, float* result, int oc, int iw, int ih, int ic,
                                 int kh, int kw, float lo, float hi) {
  return same(ifmap, weights, NULL, NULL, result, oc, iw, ih, ic, kh, kw, 0, lo, hi);
}

int32_t vanilla_conv2dnhwc_clamp(float* ifmap, float* weights, float* result, int oc, int iw, int ih, int ic,
                                 int kh, int kw, float lo, float hi) {
  return same(ifmap, weights, NULL, NULL, result, oc, iw, ih, ic, kh, kw, 1, lo, hi);
}

int32_t vanilla_conv2dnchw_bias_clamp(float* ifmap, float* weights, float* bias, float* result, int oc, int iw,
                                      int ih, int ic, int kh, int kw, float lo, float hi) {
  if (bias == NULL) return VANILLA_EINVAL;
  return same(ifmap, weights, bias, NULL, result, oc, iw, ih, ic, kh, kw, 0, lo, hi);
}

int32_t vanilla_conv2dnhwc_bias_clamp(float* ifmap, float* weights, float* bias, float* result, int oc, int iw,
                                      int ih, int ic, int kh, int kw, float lo, float hi) {
  if (bias == NULL) return VANILLA_EINVAL;
  return same(ifmap, weights, bias, NULL, result, oc, iw, ih, ic, kh, kw, 1, lo, hi);
}

int32_t vanilla_conv2dnchw_bias_residual_clamp(float* ifmap, float* weights, float* bias, float* residual,
                                               float* result, int oc, int iw, int ih, int ic, int kh, int kw,
                                               float lo, float hi) {
  if (bias == NULL || residual == NULL) return VANILLA_EINVAL;
  return same(ifmap, weights, bias, residual, result, oc, iw, ih, ic, kh, kw, 0, lo, hi);
}

int32_t vanilla_conv2dnhwc_bias_residual_clamp(float* ifmap, float* weights, float* bias, float* residual,
                                               float* result, int oc, int iw, int ih, int ic, int kh, int kw,
                                               float lo, float hi) {
  if (bias == NULL || residual == NULL) return VANILLA_EINVAL;
  return same(ifmap, weights, bias, residual, result, oc, iw, ih, ic, kh, kw, 1, lo, hi);
}
