/* Vanilla accelerator: C API of its Conv2D engine (a host mock of the hardware), in the style of
 * CMSIS-NN (arm_nnfunctions.h): a status enum, sizes in structs, `const` parameter structs, and
 * scratch memory from the caller.
 *
 * The engine's DMA reads and writes feature maps in either layout, NCHW (the `_nchw` entries) or
 * NHWC (the `_nhwc` entries), so models keep their own layout and need no transposes.  Weights
 * are always [oc][ic][kh][kw] (depthwise: [channels][1][kh][kw]); the compiler packs them once.
 *
 * This struct API is what a hardware team implements.  The compiler's generated C cannot build a
 * struct: it calls the flat functions at the end of this header (vanilla_accelerator.c), which fill
 * the structs and call the entries. */
#ifndef VANILLA_ACCELERATOR_H_
#define VANILLA_ACCELERATOR_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status of every entry.  On an error the entry computed nothing: output is untouched and no
 * tensor was read.  When several arguments are bad, the code listed first here comes back. */
typedef enum {
  VANILLA_OK = 0,
  VANILLA_EINVAL = 1,  /* a NULL input, filter, output, params or dims */
  VANILLA_ESIZE = 2,   /* a channel count, height, width or kernel size below 1, a batch other than 1,
                        * or dims that disagree (filter n vs output c, filter c vs input c or 1) */
  VANILLA_ESTRIDE = 3, /* a stride below 1 */
  VANILLA_EPAD = 4,    /* a negative pad */
  VANILLA_ECLAMP = 5,  /* activation min > max, or a NaN bound */
  VANILLA_EEVEN = 6,   /* (no longer returned: the "same"-padded shorthands' even kernel; kept for its number) */
  VANILLA_ETAPS = 7,   /* depthwise: kh * kw above the VANILLA_MAX_TAPS taps of its window buffer */
  VANILLA_ERANGE = 8,  /* too large to index: a tensor above PTRDIFF_MAX bytes, kh * kw above INT_MAX,
                        * or a window extent (oh-1)*stride.h + kh or (ow-1)*stride.w + kw above INT_MAX/2 */
  VANILLA_EBUFFER = 9  /* no context, or its buf NULL or smaller than the entry's _get_buffer_size */
} vanilla_status;

/* The depthwise window buffer's taps (kh * kw): the kit's engine's KIT_CONV_F32_MAX_TAPS (its
 * build checks they agree).  The compiler reads this line too (tvm_extension.kit.limits.c_limits):
 * what it offloads and the largest max_kernel_size follow from it. */
#define VANILLA_MAX_TAPS 64

/* Sizes, (h, w) order everywhere. */
typedef struct {
  int32_t h, w;
} vanilla_hw;

/* A tensor's logical sizes, whatever its layout.  Input and output: n = 1 (batch), c channels.
 * Filter: n = output channels, h = kh, w = kw, c = input channels (depthwise: 1). */
typedef struct {
  int32_t n, h, w, c;
} vanilla_dims;

/* Scratch memory from the caller: size bytes at buf, any alignment (the entry's _get_buffer_size). */
typedef struct {
  void* buf;
  int32_t size;
} vanilla_context;

/* The activation, last in the output stage: result = clamp(v, min, max) (-FLT_MAX, FLT_MAX: none). */
typedef struct {
  float min, max;
} vanilla_activation;

/* One convolution's window and output stage.  Output pixel (y, x) reads input rows
 * y*stride.h - padding.h + 0..kh-1 and columns x*stride.w - padding.w + 0..kw-1, zero outside the
 * input (padding is the top and left pad; bottom/right padding follows from the output's h and w;
 * the pads may exceed the kernel and the image). */
typedef struct {
  vanilla_hw stride, padding;
  vanilla_activation activation;
} vanilla_conv_params;

/* The whole engine: the window, then the output stage.
 *   input [ic][ih][iw], filter [oc][ic][kh][kw], output [oc][oh][ow], float32;
 *   then per output element of channel o: v = conv + bias[o] + residual (same shape and layout as
 *   the output), v = v < 0 ? slope[o] * v : v (PReLU), output = clamp(v, activation).
 * bias, residual and slope may each be NULL (left out); residual may alias input, not output.
 * ctx: at least vanilla_conv2d_nchw_get_buffer_size() bytes (the scratch is not kept between calls).
 * Returns VANILLA_OK or an error code above (not EEVEN, ETAPS). */
vanilla_status vanilla_conv2d_nchw(const vanilla_context* ctx, const vanilla_conv_params* params,
                                   const vanilla_dims* input_dims, const float* input,
                                   const vanilla_dims* filter_dims, const float* filter, const float* bias,
                                   const float* residual, const float* slope, const vanilla_dims* output_dims,
                                   float* output);
/* The same on NHWC feature maps: input [ih][iw][ic], residual and output [oh][ow][oc]; the same bits. */
vanilla_status vanilla_conv2d_nhwc(const vanilla_context* ctx, const vanilla_conv_params* params,
                                   const vanilla_dims* input_dims, const float* input,
                                   const vanilla_dims* filter_dims, const float* filter, const float* bias,
                                   const float* residual, const float* slope, const vanilla_dims* output_dims,
                                   float* output);

/* Depthwise convolution (groups = channels): output channel c reads input channel c only; input c
 * = output c, filter dims {c, kh, kw, 1} with kh*kw <= VANILLA_MAX_TAPS (else VANILLA_ETAPS);
 * output stage and status codes as above; the NHWC entry equals the NCHW one bit for bit. */
vanilla_status vanilla_depthwise_conv2d_nchw(const vanilla_context* ctx, const vanilla_conv_params* params,
                                             const vanilla_dims* input_dims, const float* input,
                                             const vanilla_dims* filter_dims, const float* filter, const float* bias,
                                             const float* residual, const float* slope,
                                             const vanilla_dims* output_dims, float* output);
vanilla_status vanilla_depthwise_conv2d_nhwc(const vanilla_context* ctx, const vanilla_conv_params* params,
                                             const vanilla_dims* input_dims, const float* input,
                                             const vanilla_dims* filter_dims, const float* filter, const float* bias,
                                             const float* residual, const float* slope,
                                             const vanilla_dims* output_dims, float* output);

/* The scratch bytes each entry needs for these sizes (at most about 37 KB; 0 for arguments it
 * refuses).  The compiler mirrors this (uma_vanilla.buffer_size) to plan the scratch into
 * the AOT workspace; it depends on the build's register blocks (-DKIT_CONV_F32_MR/NR). */
int32_t vanilla_conv2d_nchw_get_buffer_size(const vanilla_conv_params* params, const vanilla_dims* input_dims,
                                            const vanilla_dims* filter_dims, const vanilla_dims* output_dims);
int32_t vanilla_conv2d_nhwc_get_buffer_size(const vanilla_conv_params* params, const vanilla_dims* input_dims,
                                            const vanilla_dims* filter_dims, const vanilla_dims* output_dims);
int32_t vanilla_depthwise_conv2d_nchw_get_buffer_size(const vanilla_conv_params* params,
                                                      const vanilla_dims* input_dims,
                                                      const vanilla_dims* filter_dims,
                                                      const vanilla_dims* output_dims);
int32_t vanilla_depthwise_conv2d_nhwc_get_buffer_size(const vanilla_conv_params* params,
                                                      const vanilla_dims* input_dims,
                                                      const vanilla_dims* filter_dims,
                                                      const vanilla_dims* output_dims);

/* The compiler's calls (vanilla_accelerator.c): each fills the structs from flat arguments and calls the
 * entry of its name's layout (vanilla_conv2dnchw_general: vanilla_conv2d_nchw, ...), returning
 * its status.  Flat because TVM's TIR cannot build a C struct; real functions, not static inline,
 * because the Relax engine's LLVM code calls them by symbol too.  Pointers are float* as TVM
 * declares them; buf holds buf_size bytes of scratch (int8_t*: a planned workspace tensor). */
int32_t vanilla_conv2dnchw_general(int8_t* buf, int32_t buf_size, float* input, float* filter, float* bias,
                                   float* residual, float* slope, float* output, int32_t ic, int32_t ih, int32_t iw,
                                   int32_t oc, int32_t oh, int32_t ow, int32_t kh, int32_t kw, int32_t stride_h,
                                   int32_t stride_w, int32_t pad_top, int32_t pad_left, float lo, float hi);
int32_t vanilla_conv2dnhwc_general(int8_t* buf, int32_t buf_size, float* input, float* filter, float* bias,
                                   float* residual, float* slope, float* output, int32_t ic, int32_t ih, int32_t iw,
                                   int32_t oc, int32_t oh, int32_t ow, int32_t kh, int32_t kw, int32_t stride_h,
                                   int32_t stride_w, int32_t pad_top, int32_t pad_left, float lo, float hi);
/* Depthwise: channels = ic = oc. */
int32_t vanilla_depthwise_conv2dnchw(int8_t* buf, int32_t buf_size, float* input, float* filter, float* bias,
                                     float* residual, float* slope, float* output, int32_t channels, int32_t ih,
                                     int32_t iw, int32_t oh, int32_t ow, int32_t kh, int32_t kw, int32_t stride_h,
                                     int32_t stride_w, int32_t pad_top, int32_t pad_left, float lo, float hi);
int32_t vanilla_depthwise_conv2dnhwc(int8_t* buf, int32_t buf_size, float* input, float* filter, float* bias,
                                     float* residual, float* slope, float* output, int32_t channels, int32_t ih,
                                     int32_t iw, int32_t oh, int32_t ow, int32_t kh, int32_t kw, int32_t stride_h,
                                     int32_t stride_w, int32_t pad_top, int32_t pad_left, float lo, float hi);

#ifdef __cplusplus
}
#endif

#endif /* VANILLA_ACCELERATOR_H_ */
