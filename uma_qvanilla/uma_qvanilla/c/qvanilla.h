/* QVanilla: an int8 accelerator's Conv2D engine (a host mock of the hardware).
 *
 * Quantization follows TFLite Micro / CMSIS-NN: int8 activations with zero points, int8
 * weights, int32 bias, and per-output-channel fixed-point requantization, in one of two
 * roundings (the entries' `rounding` argument):
 *  - QVANILLA_ROUNDING_UPWARD: TVM's qnn.requantize (single rounding, ties upward), so the
 *    results are bit-exact with TVM's own CPU build of the same graph (qvanilla_requantize);
 *  - QVANILLA_ROUNDING_TFLITE: TFLite's reference kernels' MultiplyByQuantizedMultiplier (two
 *    roundings, gemmlowp's), so the results are bit-exact with TFLite's reference conv and
 *    depthwise conv kernels (qvanilla_requantize_tflite).
 *
 * The API follows CMSIS-NN (arm_nnfunctions.h): a status enum, const structs of sizes and
 * parameters, scratch memory from the caller (a qvanilla_context of _get_buffer_size bytes).
 * Two kinds of entry compute the same convolutions:
 *  - the plain entries take the graph's tensors as they are: int8 weights, their zero point,
 *    the graph's bias (qvanilla_conv2d_s8, qvanilla_depthwise_conv2d_s8);
 *  - the packed entries take weights prepared once, at compile time (uma_qvanilla/packing.py
 *    writes them, see "Packed weights" below): int16 weights with the weight zero point
 *    subtracted, and a bias with the input zero point's contribution folded in, as TFLite
 *    Micro and CMSIS-NN do.  This is what compiled models call. */
#ifndef QVANILLA_H_
#define QVANILLA_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status of the conv entries (all of them check the same things, each its own arguments).
 * On an error the entry computed nothing: output is untouched.
 * When several arguments are bad, the code listed first here comes back. */
typedef enum {
  QVANILLA_OK = 0,
  QVANILLA_EINVAL = 1,     /* a NULL ctx, params, quant (or one of its pointers), dims, input, weights or
                            * output (a NULL bias is zeros, as CMSIS-NN's) */
  QVANILLA_ESIZE = 2,      /* a height, width, channel count or kernel size below 1, a batch other than 1,
                            * or dims that disagree (channels of input, filter and output) */
  QVANILLA_ESTRIDE = 3,    /* a stride below 1 */
  QVANILLA_EPAD = 4,       /* a negative pad */
  QVANILLA_ECLAMP = 5,     /* activation.min > activation.max, or either outside int8's [-128, 127] */
  QVANILLA_EZEROPOINT = 6, /* input_zp, weight_zp (plain entries) or output_zp outside int8's [-128, 127] */
  QVANILLA_ERANGE = 7,     /* too large to index: a tensor (packed weights included) above
                            * PTRDIFF_MAX bytes, or a window extent (oh-1)*stride.h + kh or
                            * (ow-1)*stride.w + kw above INT32_MAX/2 */
  QVANILLA_ESHIFT = 8,     /* a channel's shift outside [QVANILLA_SHIFT_MIN, QVANILLA_SHIFT_MAX] */
  QVANILLA_EROUNDING = 9,  /* a rounding neither QVANILLA_ROUNDING_UPWARD nor QVANILLA_ROUNDING_TFLITE
                            * (after the shifts) */
  QVANILLA_ESCRATCH = 10   /* ctx->size below the least the entry accepts (its _get_buffer_size in a build
                            * of QVANILLA_SCRATCH_BUDGET 1), or ctx->buf NULL or not a multiple of
                            * QVANILLA_SCRATCH_ALIGN bytes where scratch is needed (last) */
} qvanilla_status;

/* The requantization's rounding (qvanilla_conv_params.rounding). */
#define QVANILLA_ROUNDING_UPWARD 0 /* TVM's qnn.requantize: qvanilla_requantize() */
#define QVANILLA_ROUNDING_TFLITE 1 /* TFLite's MultiplyByQuantizedMultiplier: qvanilla_requantize_tflite() */

/* The shifts a conv accepts, as TFLite's MultiplyByQuantizedMultiplier: at most 2^30 up, 2^-31 down. */
#define QVANILLA_SHIFT_MIN (-31)
#define QVANILLA_SHIFT_MAX 30

/* Sizes, (h, w) order everywhere. */
typedef struct { int32_t h, w; } qvanilla_hw;
typedef struct { int32_t n, h, w, c; } qvanilla_dims; /* NHWC tensors; a filter is {oc, kh, kw, ic} (OHWI) */

typedef struct { int32_t min, max; } qvanilla_activation; /* the int8 output's clamp (ReLU/ReLU6 folded in) */

/* One convolution's parameters (CMSIS-NN's cmsis_nn_conv_params). */
typedef struct {
  qvanilla_hw stride;
  qvanilla_hw padding;           /* top, left; zero points fill the padding (i.e. real zeros) */
  int32_t input_zp, weight_zp, output_zp; /* weight_zp: plain entries only (packed weights have it taken off) */
  qvanilla_activation activation;
  int32_t rounding;              /* QVANILLA_ROUNDING_UPWARD or QVANILLA_ROUNDING_TFLITE */
} qvanilla_conv_params;

/* Per output channel o (CMSIS-NN's cmsis_nn_per_channel_quant_params):
 * requant(acc, o) = round(acc * multiplier[o] * 2^(shift[o] - 31)), in the rounding of the params. */
typedef struct {
  const int32_t* multiplier;
  const int32_t* shift;
} qvanilla_per_channel_quant_params;

/* Scratch memory from the caller (CMSIS-NN's cmsis_nn_context): size bytes at buf, buf a multiple
 * of QVANILLA_SCRATCH_ALIGN bytes.  An entry takes any size from the least it accepts on (see
 * ESCRATCH) and tiles its work to what it is given: _get_buffer_size's bytes are what it runs
 * fastest with within QVANILLA_SCRATCH_BUDGET; more is not used; less gives the same results,
 * computed in smaller tiles.  The entries keep no state in it between calls. */
typedef struct {
  void* buf;
  int32_t size;
} qvanilla_context;
#define QVANILLA_SCRATCH_ALIGN 8

/* Dense conv, plain weights:
 * output[y][x][o] = clamp(output_zp + requant(bias[o] + sum (in - input_zp) * (w - weight_zp), o))
 * over the window of output (y, x) (input (y*stride.h - padding.h + ky, x*stride.w - padding.w + kx)),
 * with input_dims {1, ih, iw, ic}, filter_dims {oc, kh, kw, ic}, weights OHWI [oc][kh][kw][ic] int8
 * (TFLite's conv filter, CMSIS-NN's arm_convolve_s8's), bias[oc] int32 or NULL (zeros),
 * output_dims {1, oh, ow, oc}.  requant is qvanilla_requantize() if params->rounding
 * is QVANILLA_ROUNDING_UPWARD, qvanilla_requantize_tflite() if QVANILLA_ROUNDING_TFLITE.
 * The padding holds input_zp (real zeros).  The sum is int32 arithmetic and wraps around, as a
 * 32-bit adder does, should it overflow (int8 convolutions stay far below).  Returns QVANILLA_OK
 * or an error code above. */
qvanilla_status qvanilla_conv2d_s8(const qvanilla_context* ctx, const qvanilla_conv_params* params,
                                   const qvanilla_per_channel_quant_params* quant, const qvanilla_dims* input_dims,
                                   const int8_t* input, const qvanilla_dims* filter_dims, const int8_t* weights,
                                   const int32_t* bias, const qvanilla_dims* output_dims, int8_t* output);

/* Depthwise (groups = channels, channel multiplier 1): for channel c,
 * output[y][x][c] = clamp(output_zp + requant(bias[c] + sum (in[..][c] - input_zp) * (w[ky][kx][c] - weight_zp), c))
 * with filter_dims {1, kh, kw, channels}, weights [kh][kw][channels] int8 (TFLite's HWOI of a
 * depthwise conv, or HWIO with I = 1: the same bytes), input, filter and output of `channels`
 * channels, everything else as in qvanilla_conv2d_s8. */
qvanilla_status qvanilla_depthwise_conv2d_s8(const qvanilla_context* ctx, const qvanilla_conv_params* params,
                                             const qvanilla_per_channel_quant_params* quant,
                                             const qvanilla_dims* input_dims, const int8_t* input,
                                             const qvanilla_dims* filter_dims, const int8_t* weights,
                                             const int32_t* bias, const qvanilla_dims* output_dims, int8_t* output);

/* Packed weights.
 *
 * Conv (qvanilla_conv2d_packed_s8): K = kh*kw*ic, KP = QVANILLA_PACKED_K(K) (K rounded up to
 * a multiple of QVANILLA_K_ALIGN), OCP = QVANILLA_PACKED_OC(oc) (oc rounded up to a multiple of
 * QVANILLA_OC_BLOCK).  The weights are OCP rows of KP int16:
 *     packed[o][(ky*kw + kx)*ic + c] = w[o][ky][kx][c] - weight_zp     (OHWI w, k < K, o < oc)
 * and 0 elsewhere (the rows' tails and the rows o >= oc).
 * Depthwise (qvanilla_depthwise_conv2d_packed_s8): kh*kw rows of `channels` int16:
 *     packed[ky*kw + kx][c] = w[ky][kx][c] - weight_zp.
 * For both, the bias has the input zero point folded in,
 *     bias[o] - input_zp * (sum over k of packed[o][k])     (modulo 2^32),
 * so that the engine multiplies the raw input (input_zp in the padding) by the packed weights:
 *     sum (in - input_zp) * (w - weight_zp) + bias = sum in * packed + folded bias.
 * params->weight_zp is not read.  The results equal the plain entries' bit for bit (any int16
 * packed values are accepted; sums wrap as 32-bit adders do). */
#define QVANILLA_K_ALIGN 8
#define QVANILLA_OC_BLOCK 4
#define QVANILLA_PACKED_K(k) (((k) + QVANILLA_K_ALIGN - 1) / QVANILLA_K_ALIGN * QVANILLA_K_ALIGN)
#define QVANILLA_PACKED_OC(oc) (((oc) + QVANILLA_OC_BLOCK - 1) / QVANILLA_OC_BLOCK * QVANILLA_OC_BLOCK)

qvanilla_status qvanilla_conv2d_packed_s8(const qvanilla_context* ctx, const qvanilla_conv_params* params,
                                          const qvanilla_per_channel_quant_params* quant,
                                          const qvanilla_dims* input_dims, const int8_t* input,
                                          const qvanilla_dims* filter_dims, const int16_t* packed_weights,
                                          const int32_t* bias, const qvanilla_dims* output_dims, int8_t* output);

/* Conv with int8 packed weights (qvanilla_conv2d_packed8_s8), for vector units that multiply int8
 * by int8 (Helium: sixteen multiply-adds per VMLADAVA.S8; half the int16 weights' bytes): the
 * packed entry's weights and folded bias, the weights as int8 (every w - weight_zp in [-128, 127],
 * as TFLite's int8 weights, whose zero point is 0), K16 = QVANILLA_PACKED8_K(K) (K rounded up to a
 * multiple of 16), in blocks of four channels by sixteen entries:
 *     packed8[((o / 4) * (K16 / 16) + k / 16) * 64 + (o % 4) * 16 + k % 16] = packed[o][k]
 * (0 for k >= K and o >= oc), OCP * K16 bytes.  Its scratch is the packed entry's.  Other cores
 * compute it too (results equal the packed entry's), but their packed entry is faster. */
#define QVANILLA_K8_ALIGN 16
#define QVANILLA_PACKED8_K(k) (((k) + QVANILLA_K8_ALIGN - 1) / QVANILLA_K8_ALIGN * QVANILLA_K8_ALIGN)

qvanilla_status qvanilla_conv2d_packed8_s8(const qvanilla_context* ctx, const qvanilla_conv_params* params,
                                           const qvanilla_per_channel_quant_params* quant,
                                           const qvanilla_dims* input_dims, const int8_t* input,
                                           const qvanilla_dims* filter_dims, const int8_t* packed_weights,
                                           const int32_t* bias, const qvanilla_dims* output_dims, int8_t* output);

qvanilla_status qvanilla_depthwise_conv2d_packed_s8(const qvanilla_context* ctx, const qvanilla_conv_params* params,
                                                    const qvanilla_per_channel_quant_params* quant,
                                                    const qvanilla_dims* input_dims, const int8_t* input,
                                                    const qvanilla_dims* filter_dims, const int16_t* packed_weights,
                                                    const int32_t* bias, const qvanilla_dims* output_dims,
                                                    int8_t* output);

/* The scratch a call may take, in bytes: _get_buffer_size's answer stays within it where the entry
 * can (0: no limit, the fastest layout, up to about 80 KB).  Microcontrollers default to 4 KB (as
 * CMSIS-NN's kernels take 0.1-4.5 KB), hosts to 0; -DQVANILLA_SCRATCH_BUDGET=N sets it. */
#ifndef QVANILLA_SCRATCH_BUDGET
#if defined(__ARM_ARCH_PROFILE) && __ARM_ARCH_PROFILE == 'M'
#define QVANILLA_SCRATCH_BUDGET 4096
#else
#define QVANILLA_SCRATCH_BUDGET 0
#endif
#endif

/* The scratch bytes (ctx->size) each entry runs best with for these dims (kh, kw, ic and oc: the
 * filter's and the input's channels) within QVANILLA_SCRATCH_BUDGET, 0 for dims the entry rejects
 * with ESIZE or ERANGE (its tensors' sizes: the strides, not given here, are checked by the call).
 * The compiler sizes its workspace buffer with the same formula
 * (uma_qvanilla/scratch.py, its budget the target's attribute). */
int32_t qvanilla_conv2d_s8_get_buffer_size(const qvanilla_dims* input_dims, const qvanilla_dims* filter_dims);
int32_t qvanilla_conv2d_packed_s8_get_buffer_size(const qvanilla_dims* input_dims, const qvanilla_dims* filter_dims);
int32_t qvanilla_conv2d_packed8_s8_get_buffer_size(const qvanilla_dims* input_dims, const qvanilla_dims* filter_dims);
int32_t qvanilla_depthwise_conv2d_s8_get_buffer_size(const qvanilla_dims* input_dims,
                                                     const qvanilla_dims* filter_dims);
int32_t qvanilla_depthwise_conv2d_packed_s8_get_buffer_size(const qvanilla_dims* input_dims,
                                                            const qvanilla_dims* filter_dims);

/* TVM's fixed-point multiply: (acc << max(shift, 0)) * multiplier, rounded (ties upward) and
 * shifted right by 31 - min(shift, 0), saturated to int32.  Exact for every int32 argument,
 * i.e. as if computed with unbounded integers, whatever the shift. */
int32_t qvanilla_requantize(int32_t acc, int32_t multiplier, int32_t shift);

/* TFLite's MultiplyByQuantizedMultiplier (tensorflow/lite/kernels/internal/common.h, the build
 * without TFLITE_SINGLE_ROUNDING), with gemmlowp's two roundings:
 *     left = max(shift, 0), right = max(-shift, 0)
 *     x = acc * 2^left, wrapped to int32 (TFLite multiplies in int32)
 *     h = SaturatingRoundingDoublingHighMul(x, multiplier): x * multiplier / 2^31 rounded to
 *         nearest, ties upward (gemmlowp's nudge, 2^30 or 1 - 2^30 for a negative product, then
 *         C's truncation), INT32_MAX for x = multiplier = INT32_MIN
 *     result = RoundingDivideByPOT(h, right): h / 2^right rounded half away from zero.
 * No zero point, no clamp.  For shift in [QVANILLA_SHIFT_MIN, QVANILLA_SHIFT_MAX] this is
 * TFLite's result bit for bit.  Beyond that range (where TFLite's C++ would shift by 31 or more,
 * which C does not define) the same arithmetic goes on with its meaning kept: x = acc * 2^left
 * modulo 2^32 (INT32_MIN or 0 at shift 31, 0 from shift 32 on), and h / 2^right rounded half
 * away from zero (0 from shift -32 down: |h| < 2^31).  Defined for every int32 argument. */
int32_t qvanilla_requantize_tflite(int32_t acc, int32_t multiplier, int32_t shift);

#ifdef __cplusplus
}
#endif

#endif /* QVANILLA_H_ */
