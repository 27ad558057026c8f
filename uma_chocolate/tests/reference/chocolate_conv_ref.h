/* Plain reference of the operator Chocolate computes: a whole conv layer (batch 1, NHWC input,
 * weights [kh*kw*ic][oc], output [oh*ow][oc]), straight loops over each output's window in the
 * im2col order (ky, kx, c), no tiles, no scratchpad.  Not part of the library (tests only): the
 * tests compare the device's tiled run with it.  The parameters are assumed valid (the entries
 * check them). */
#ifndef CHOCOLATE_CONV_REF_H_
#define CHOCOLATE_CONV_REF_H_

#include <stdint.h>

#include "chocolate.h"

/* int8: out = clamp(output_zp + requant(sum((x - input_zp) * w) + bias[n], multiplier[n], shift[n])),
 * bias as the model has it (not folded with the input zero point; padding contributes 0). */
void chocolate_conv_s8_ref(const chocolate_conv_params* conv, const chocolate_quant_params* quant,
                           const chocolate_per_channel_quant_params* per_channel, const int8_t* input,
                           const int8_t* weights, int8_t* output);

/* float: out = clamp(sum(x * w) + bias[n], lo, hi), the sum from +0.0f in (ky, kx, c) order,
 * padding taps adding 0.0f * w as the im2col matrix defines them; bias may be NULL. */
void chocolate_conv_f32_ref(const chocolate_conv_params* conv, const chocolate_f32_params* stage, const float* input,
                            const float* weights, float* output);

#endif /* CHOCOLATE_CONV_REF_H_ */
