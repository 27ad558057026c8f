/* Vanilla accelerator: C API of its Conv2D engine (a host mock of the hardware).
 *
 * The engine's DMA reads and writes feature maps in either layout, NCHW (the `nchw` entries)
 * or NHWC (the `nhwc` entries), so models keep their own layout and need no transposes.
 * Weights are always [oc][ic][kh][kw]; the compiler packs them into that layout once. */
#ifndef VANILLA_ACCELERATOR_H_
#define VANILLA_ACCELERATOR_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status of every entry.  On an error the entry computed nothing: result is untouched and no
 * tensor was read.  When several arguments are bad, the code listed first here comes back. */
#define VANILLA_OK 0
#define VANILLA_EINVAL 1  /* a NULL ifmap, weights or result (or the bias/residual a shorthand needs) */
#define VANILLA_ESIZE 2   /* a channel count, height, width or kernel size (input or output) below 1 */
#define VANILLA_ESTRIDE 3 /* a stride below 1 */
#define VANILLA_EPAD 4    /* a negative pad */
#define VANILLA_ECLAMP 5  /* lo > hi, or a NaN bound */
#define VANILLA_EEVEN 6   /* an even kernel size for a "same"-padded shorthand (no centred window) */
#define VANILLA_ETAPS 7   /* depthwise: kh * kw above the VANILLA_MAX_TAPS taps of its window buffer */
#define VANILLA_ERANGE 8  /* too large to index: a tensor above PTRDIFF_MAX bytes, kh * kw above INT_MAX,
                           * or a window extent (oh-1)*stride_h + kh or (ow-1)*stride_w + kw above INT_MAX/2 */

/* The depthwise window buffer's taps (kh * kw): the kit's engine's KIT_CONV_F32_MAX_TAPS (its
 * build checks they agree).  The compiler reads this line too (tvm_extension.kit.limits.c_limits):
 * what it offloads and the largest max_kernel_size follow from it. */
#define VANILLA_MAX_TAPS 64

/* The whole engine, what the compiler calls: any window, then the output stage.
 *   ifmap [ic][ih][iw], weights [oc][ic][kh][kw], result [oc][oh][ow], float32;
 *   output pixel (y, x) reads input rows y*stride_h - pad_top + 0..kh-1 and columns
 *   x*stride_w - pad_left + 0..kw-1, zero outside the input (so bottom/right padding follows
 *   from oh and ow);
 *   then per output element of channel o: v = conv + bias[o] + residual (same shape and layout as
 *   the result), v = v < 0 ? slope[o] * v : v (PReLU), result = clamp(v, lo, hi).
 * bias, residual and slope may each be NULL (left out); lo = -FLT_MAX, hi = FLT_MAX clamps nothing.
 * residual may alias ifmap, not result.  Returns VANILLA_OK or one of the error codes above
 * (EINVAL, ESIZE, ESTRIDE, EPAD, ECLAMP, ERANGE); the pads may exceed the kernel and the image. */
int32_t vanilla_conv2dnchw_general(float* ifmap, float* weights, float* bias,
                                   float* residual, float* slope, float* result, int32_t oc, int32_t iw,
                                   int32_t ih, int32_t ic, int32_t kh, int32_t kw, int32_t ow, int32_t oh,
                                   int32_t stride_w, int32_t stride_h, int32_t pad_left, int32_t pad_top, float lo,
                                   float hi);
/* The same on NHWC feature maps: ifmap [ih][iw][ic], residual and result [oh][ow][oc]. */
int32_t vanilla_conv2dnhwc_general(float* ifmap, float* weights, float* bias,
                                   float* residual, float* slope, float* result, int32_t oc, int32_t iw,
                                   int32_t ih, int32_t ic, int32_t kh, int32_t kw, int32_t ow, int32_t oh,
                                   int32_t stride_w, int32_t stride_h, int32_t pad_left, int32_t pad_top, float lo,
                                   float hi);

/* Depthwise convolution (groups = channels): output channel c reads input channel c only.
 * weights [channels][kh][kw] with kh*kw <= VANILLA_MAX_TAPS (else VANILLA_ETAPS); window, output stage and other
 * status codes as above; the NHWC entry equals the NCHW one bit for bit. */
int32_t vanilla_depthwise_conv2dnchw(float* ifmap, float* weights, float* bias, float* residual, float* slope,
                                     float* result, int32_t channels, int32_t iw, int32_t ih, int32_t kh, int32_t kw,
                                     int32_t ow, int32_t oh, int32_t stride_w, int32_t stride_h, int32_t pad_left,
                                     int32_t pad_top, float lo, float hi);
int32_t vanilla_depthwise_conv2dnhwc(float* ifmap, float* weights, float* bias, float* residual, float* slope,
                                     float* result, int32_t channels, int32_t iw, int32_t ih, int32_t kh, int32_t kw,
                                     int32_t ow, int32_t oh, int32_t stride_w, int32_t stride_h, int32_t pad_left,
                                     int32_t pad_top, float lo, float hi);

/* Shorthands for the common case, as in TVM's UMA tutorial: stride 1, "same" padding. */

/* Conv2D, stride 1, "same" zero padding of (k-1)/2 on each side, no bias.
 * ifmap: [ic][ih][iw], weights: [oc][ic][kh][kw], result: [oc][ih][iw], all float32.
 * Returns VANILLA_OK, VANILLA_EEVEN for an even kernel size, or another error code as above. */
int32_t vanilla_conv2dnchw(float* ifmap, float* weights, float* result, int oc, int iw, int ih, int ic,
                           int kh, int kw);

/* The same convolution followed by the output stage: result = clamp(conv + bias[o], lo, hi)
 * per output channel o (lo = 0, hi = FLT_MAX is ReLU; lo = 0, hi = 6 is ReLU6).
 * Returns VANILLA_EINVAL also for a NULL bias, VANILLA_ECLAMP for lo > hi (or a NaN bound). */
int32_t vanilla_conv2dnchw_bias_clamp(float* ifmap, float* weights, float* bias, float* result, int oc, int iw,
                                      int ih, int ic, int kh, int kw, float lo, float hi);

/* The output stage without bias: result = clamp(conv, lo, hi). */
int32_t vanilla_conv2dnchw_clamp(float* ifmap, float* weights, float* result, int oc, int iw, int ih, int ic,
                                 int kh, int kw, float lo, float hi);

/* The output stage with a residual (a skip connection) of the result's shape and layout:
 * result = clamp(conv + bias[o] + residual, lo, hi).  residual may alias ifmap, not result. */
int32_t vanilla_conv2dnchw_bias_residual_clamp(float* ifmap, float* weights, float* bias, float* residual,
                                               float* result, int oc, int iw, int ih, int ic, int kh, int kw,
                                               float lo, float hi);

/* The same four operations on NHWC feature maps: ifmap [ih][iw][ic], result [ih][iw][oc];
 * weights still [oc][ic][kh][kw], bias [oc].  Results equal the NCHW entries' bit for bit. */
int32_t vanilla_conv2dnhwc(float* ifmap, float* weights, float* result, int oc, int iw, int ih, int ic,
                           int kh, int kw);
int32_t vanilla_conv2dnhwc_bias_clamp(float* ifmap, float* weights, float* bias, float* result, int oc, int iw,
                                      int ih, int ic, int kh, int kw, float lo, float hi);
int32_t vanilla_conv2dnhwc_clamp(float* ifmap, float* weights, float* result, int oc, int iw, int ih, int ic,
                                 int kh, int kw, float lo, float hi);
int32_t vanilla_conv2dnhwc_bias_residual_clamp(float* ifmap, float* weights, float* bias, float* residual,
                                               float* result, int oc, int iw, int ih, int ic, int kh, int kw,
                                               float lo, float hi);

#ifdef __cplusplus
}
#endif

#endif /* VANILLA_ACCELERATOR_H_ */
