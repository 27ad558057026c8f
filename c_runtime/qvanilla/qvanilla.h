/* QVanilla: an int8 accelerator's Conv2D engine (a host mock of the hardware).
 *
 * Quantization follows TFLite Micro / CMSIS-NN: int8 activations with zero points, int8
 * weights, int32 bias, and per-output-channel fixed-point requantization.  The rounding is
 * the one TVM's qnn.requantize uses (single rounding, ties upward), so the results are
 * bit-exact with TVM's own CPU build of the same graph. */
#ifndef QVANILLA_H_
#define QVANILLA_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status of the conv entries.  On an error the entry computed nothing: output is untouched.
 * When several arguments are bad, the code listed first here comes back. */
#define QVANILLA_OK 0
#define QVANILLA_EINVAL 1     /* a NULL input, weights, channel_params, output or p */
#define QVANILLA_ESIZE 2      /* a height, width, channel count or kernel size below 1 */
#define QVANILLA_ESTRIDE 3    /* a stride below 1 */
#define QVANILLA_EPAD 4       /* a negative pad */
#define QVANILLA_ECLAMP 5     /* act_min > act_max, or either outside int8's [-128, 127] */
#define QVANILLA_EZEROPOINT 6 /* input_zp, weight_zp or output_zp outside int8's [-128, 127] */
#define QVANILLA_ERANGE 7     /* too large to index: a tensor above PTRDIFF_MAX bytes, or a window
                               * extent (oh-1)*stride_h + kh or (ow-1)*stride_w + kw above INT32_MAX/2 */
#define QVANILLA_ESHIFT 8     /* a channel's shift outside [QVANILLA_SHIFT_MIN, QVANILLA_SHIFT_MAX] */

/* The shifts a conv accepts, as TFLite's MultiplyByQuantizedMultiplier: at most 2^30 up, 2^-31 down. */
#define QVANILLA_SHIFT_MIN (-31)
#define QVANILLA_SHIFT_MAX 30

/* Geometry and quantization of one convolution; all fields are plain integers. */
typedef struct {
  int32_t ih, iw, ic;            /* input, NHWC with batch 1 */
  int32_t oh, ow, oc;            /* output, NHWC with batch 1 */
  int32_t kh, kw;                /* kernel, weights are HWIO */
  int32_t stride_h, stride_w;
  int32_t pad_top, pad_left;     /* zero points fill the padding (i.e. real zeros) */
  int32_t input_zp, weight_zp, output_zp;
  int32_t act_min, act_max;      /* clamp of the int8 output (ReLU/ReLU6 folded in) */
} qvanilla_conv_params;

/* output[y][x][o] = clamp(output_zp + requant(bias[o] + sum (in - input_zp) * (w - weight_zp), o))
 * channel_params holds three int32 rows of oc entries: bias, multiplier, shift, where
 * requant(acc, o) = round_up(acc * multiplier[o] * 2^(shift[o] - 31)) = qvanilla_requantize().
 * The padding holds input_zp (real zeros).  The sum is int32 arithmetic and wraps around, as a
 * 32-bit adder does, should it overflow (int8 convolutions stay far below).  Returns QVANILLA_OK
 * or an error code above; the shifts are checked last, after everything else is known valid. */
int32_t qvanilla_conv2d_s8(const int8_t* input, const int8_t* weights, const int32_t* channel_params,
                           int8_t* output, const qvanilla_conv_params* p);

/* The same with the parameters spelled out (what generated code calls). */
int32_t qvanilla_conv2d_nhwc_s8(int8_t* input, int8_t* weights, int32_t* channel_params, int8_t* output,
                                int32_t ih, int32_t iw, int32_t ic, int32_t oh, int32_t ow, int32_t oc,
                                int32_t kh, int32_t kw, int32_t stride_h, int32_t stride_w, int32_t pad_top,
                                int32_t pad_left, int32_t input_zp, int32_t weight_zp, int32_t output_zp,
                                int32_t act_min, int32_t act_max);

/* TVM's fixed-point multiply: (acc << max(shift, 0)) * multiplier, rounded (ties upward) and
 * shifted right by 31 - min(shift, 0), saturated to int32.  Exact for every int32 argument,
 * i.e. as if computed with unbounded integers, whatever the shift. */
int32_t qvanilla_requantize(int32_t acc, int32_t multiplier, int32_t shift);

#ifdef __cplusplus
}
#endif

#endif /* QVANILLA_H_ */
