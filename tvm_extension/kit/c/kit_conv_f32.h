/* The kit's float32 Conv2D engine: a host mock of a conv engine with an output stage, shared by
 * backends (Vanilla's C API wraps it; Strawberry's scratchpad model computes with it).
 *
 * The engine reads and writes feature maps in either layout, NCHW (the `nchw` entries) or NHWC
 * (the `nhwc` entries); weights are always [oc][ic][kh][kw] (depthwise: [channels][kh][kw]). */
#ifndef KIT_CONV_F32_H_
#define KIT_CONV_F32_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status of every entry.  On an error the entry computed nothing: result is untouched and no
 * tensor was read.  When several arguments are bad, the code listed first here comes back. */
#define KIT_CONV_F32_OK 0
#define KIT_CONV_F32_EINVAL 1  /* a NULL ifmap, weights, result or geometry */
#define KIT_CONV_F32_ESIZE 2   /* a channel count, height, width or kernel size (input or output) below 1;
                                * depthwise: ic other than oc */
#define KIT_CONV_F32_ESTRIDE 3 /* a stride below 1 */
#define KIT_CONV_F32_EPAD 4    /* a negative pad */
#define KIT_CONV_F32_ECLAMP 5  /* lo > hi, or a NaN bound */
#define KIT_CONV_F32_ETAPS 6   /* depthwise: kh * kw above the KIT_CONV_F32_MAX_TAPS taps of its window buffer */
#define KIT_CONV_F32_ERANGE 7  /* too large to index: a tensor above PTRDIFF_MAX bytes, kh * kw above INT_MAX,
                                * or a window extent (oh-1)*stride_h + kh or (ow-1)*stride_w + kw above INT_MAX/2 */
#define KIT_CONV_F32_EBUFFER 8 /* a context entry: no context, or its buffer NULL or smaller than
                                * kit_conv_f32_get_buffer_size() */

/* The depthwise window buffer's taps (kh * kw).  Compilers read this line too
 * (tvm_extension.kit.limits.c_limits): what they offload follows from it. */
#define KIT_CONV_F32_MAX_TAPS 64

/* One convolution's sizes and window.  Output pixel (y, x) reads input rows
 * y*stride_h - pad_top + 0..kh-1 and columns x*stride_w - pad_left + 0..kw-1, zero outside the
 * input (so bottom/right padding follows from oh and ow); the pads may exceed the kernel and the
 * image.  Depthwise: ic = oc, the channels. */
typedef struct {
  int32_t oc, ic, ih, iw, oh, ow, kh, kw;
  int32_t stride_h, stride_w, pad_top, pad_left;
} kit_conv_f32_geometry;

/* The engine's working memory (panels of input rows, transposed weights, offsets), from the
 * caller: buf of size bytes, any alignment. */
typedef struct {
  void* buf;
  int32_t size;
} kit_conv_f32_context;

/* The bytes of buffer an entry needs for this geometry (dense if depthwise is 0, NCHW if nhwc
 * is 0): at most about 37 KB, less for the engines that do not transpose weights; 0 for a geometry
 * the entries refuse.  It depends on the build's register blocks (KIT_CONV_F32_MR/NR, see the .c). */
int32_t kit_conv_f32_get_buffer_size(const kit_conv_f32_geometry* geometry, int32_t depthwise, int32_t nhwc);

/* Each entry computes in the caller's scratch ctx (after the checks above, EBUFFER if ctx does not
 * hold get_buffer_size bytes): no static state, reentrant. */

/* The whole engine: the window, then the output stage.
 *   ifmap [ic][ih][iw], weights [oc][ic][kh][kw], result [oc][oh][ow], float32;
 *   then per output element of channel o: v = conv + bias[o] + residual (same shape and layout as
 *   the result), v = v < 0 ? slope[o] * v : v (PReLU), result = clamp(v, lo, hi).
 * bias, residual and slope may each be NULL (left out); lo = -FLT_MAX, hi = FLT_MAX clamps nothing.
 * residual may alias ifmap, not result.  Returns KIT_CONV_F32_OK or an error code above but ETAPS.
 * Each output is one chain of multiply-adds in (c, ky, kx) order from +0, so both layouts give
 * the same bits. */
int32_t kit_conv2d_f32_nchw(const kit_conv_f32_context* ctx, const float* ifmap, const float* weights,
                            const float* bias, const float* residual, const float* slope, float* result,
                            const kit_conv_f32_geometry* geometry, float lo, float hi);
/* The same on NHWC feature maps: ifmap [ih][iw][ic], residual and result [oh][ow][oc]. */
int32_t kit_conv2d_f32_nhwc(const kit_conv_f32_context* ctx, const float* ifmap, const float* weights,
                            const float* bias, const float* residual, const float* slope, float* result,
                            const kit_conv_f32_geometry* geometry, float lo, float hi);

/* Depthwise convolution (groups = channels): output channel c reads input channel c only.
 * weights [channels][kh][kw] with kh*kw <= KIT_CONV_F32_MAX_TAPS (else KIT_CONV_F32_ETAPS); window,
 * output stage and other status codes as above; the NHWC entry equals the NCHW one bit for bit. */
int32_t kit_depthwise_conv2d_f32_nchw(const kit_conv_f32_context* ctx, const float* ifmap, const float* weights,
                                      const float* bias, const float* residual, const float* slope, float* result,
                                      const kit_conv_f32_geometry* geometry, float lo, float hi);
int32_t kit_depthwise_conv2d_f32_nhwc(const kit_conv_f32_context* ctx, const float* ifmap, const float* weights,
                                      const float* bias, const float* residual, const float* slope, float* result,
                                      const kit_conv_f32_geometry* geometry, float lo, float hi);

/* The status an entry would return for these arguments (a dense entry if depthwise is 0), without
 * reading a tensor: for callers that put checks of their own in the engine's order. */
int32_t kit_conv_f32_check(const float* ifmap, const float* weights, float* result,
                           const kit_conv_f32_geometry* geometry, float lo, float hi, int32_t depthwise);

#ifdef __cplusplus
}
#endif

#endif /* KIT_CONV_F32_H_ */
