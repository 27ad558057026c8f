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

#ifdef __cplusplus
}
#endif

#endif /* VANILLA_ACCELERATOR_H_ */
