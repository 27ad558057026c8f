/* Vanilla accelerator: C API of its Conv2D engine (a host mock of the hardware). */
#ifndef VANILLA_ACCELERATOR_H_
#define VANILLA_ACCELERATOR_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VANILLA_OK 0
#define VANILLA_EINVAL 1 /* a NULL pointer, a non-positive size or an even kernel size */

/* Conv2D, stride 1, "same" zero padding of (k-1)/2 on each side, no bias.
 * ifmap: [ic][ih][iw], weights: [oc][ic][kh][kw], result: [oc][ih][iw], all float32.
 * Returns VANILLA_OK or an error code; result is untouched on error. */
int32_t vanilla_conv2dnchw(float* ifmap, float* weights, float* result, int oc, int iw, int ih, int ic,
                           int kh, int kw);

/* The same convolution followed by the output stage: result = clamp(conv + bias[o], lo, hi)
 * per output channel o (lo = 0, hi = FLT_MAX is ReLU; lo = 0, hi = 6 is ReLU6).
 * Returns VANILLA_EINVAL also for a NULL bias or lo > hi (or a NaN bound). */
int32_t vanilla_conv2dnchw_bias_clamp(float* ifmap, float* weights, float* bias, float* result, int oc, int iw,
                                      int ih, int ic, int kh, int kw, float lo, float hi);

/* The output stage without bias: result = clamp(conv, lo, hi). */
int32_t vanilla_conv2dnchw_clamp(float* ifmap, float* weights, float* result, int oc, int iw, int ih, int ic,
                                 int kh, int kw, float lo, float hi);

#ifdef __cplusplus
}
#endif

#endif /* VANILLA_ACCELERATOR_H_ */
