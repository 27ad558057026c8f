/* Chocolate's layer configuration: the conv's sizes and the output stage's tables, copied into
 * the device (the host may free its own afterwards). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "chocolate_internal.h"

/* tables: int8, bias, multiplier and shift; float, the bias (or NULL).  The caller checked the
 * structs are not NULL. */
static chocolate_status configure(const char* entry, const layer* c, const void* const tables[3]) {
  if (!c->f32 && (tables[0] == NULL || tables[1] == NULL || tables[2] == NULL))
    return chocolate_fail(CHOCOLATE_EINVAL, entry, "bias, multiplier or shift is NULL");
  const int32_t sizes[] = {c->rows, c->channels, c->depth, c->ih, c->iw, c->ic, c->kh, c->kw, c->ow};
  static const char* const names[] = {"rows", "channels", "depth", "ih", "iw", "ic", "kh", "kw", "ow"};
  for (int i = 0; i < 9; ++i)
    if (sizes[i] < 1) return chocolate_fail(CHOCOLATE_ELAYER, entry, "%s is %ld (needs >= 1)", names[i], (long)sizes[i]);
  if (c->stride_h < 1 || c->stride_w < 1 || c->pad_top < 0 || c->pad_top >= c->kh || c->pad_left < 0 ||
      c->pad_left >= c->kw)
    return chocolate_fail(CHOCOLATE_ELAYER, entry, "strides %ldx%ld, padding top %ld, left %ld (need strides >= 1, "
                "0 <= pad < the %ldx%ld window)", (long)c->stride_h, (long)c->stride_w, (long)c->pad_top,
                (long)c->pad_left, (long)c->kh, (long)c->kw);
  const int64_t taps = mul_sat(mul_sat(c->kh, c->kw), c->ic), elem = c->f32 ? 4 : 1;
  if (c->depth != taps)
    return chocolate_fail(CHOCOLATE_ELAYER, entry, "depth %ld is not kh*kw*ic = %lld", (long)c->depth, (long long)taps);
  if (c->rows % c->ow != 0)
    return chocolate_fail(CHOCOLATE_ELAYER, entry, "rows %ld are not whole output rows of ow %ld", (long)c->rows, (long)c->ow);
  const int64_t largest = max64(mul_sat(mul_sat(mul_sat(c->ih, c->iw), c->ic), elem),
                                mul_sat(mul_sat(max64(c->rows, c->depth), c->channels), elem));
  if (largest >= SATURATED || (uint64_t)largest > (uint64_t)PTRDIFF_MAX)
    return chocolate_fail(CHOCOLATE_ELAYER, entry, "a host tensor (input, weights or output) is too large to index");
  if (!c->f32 && (c->input_zp < -128 || c->input_zp > 127 || c->output_zp < -128 || c->output_zp > 127 ||
                  c->act_min < -128 || c->act_min > c->act_max || c->act_max > 127))
    return chocolate_fail(CHOCOLATE_ELAYER, entry, "zero points %ld (input), %ld (output), clamp [%ld, %ld] (need zero points "
                "in [-128, 127], -128 <= act_min <= act_max <= 127)", (long)c->input_zp, (long)c->output_zp,
                (long)c->act_min, (long)c->act_max);
  if (c->f32 && !(c->lo <= c->hi))
    return chocolate_fail(CHOCOLATE_ELAYER, entry, "clamp bounds [%g, %g] (need lo <= hi, neither NaN)", (double)c->lo,
                (double)c->hi);

  /* The configuration registers: a copy of the per-channel arrays (int8: [3][channels]). */
  const int arrays = c->f32 ? (tables[0] != NULL) : 3;
  const uint64_t bytes = (uint64_t)c->channels * 4 * (uint64_t)arrays;
  unsigned char* copy = bytes > 0 && bytes <= SIZE_MAX ? (unsigned char*)malloc((size_t)bytes) : NULL;
  if (bytes > 0 && copy == NULL)
    return chocolate_fail(CHOCOLATE_ENOMEM, entry, "cannot allocate %ld channels' configuration registers", (long)c->channels);
  for (int i = 0; i < arrays; ++i) memcpy(copy + (size_t)i * 4 * (size_t)c->channels, tables[i], 4 * (size_t)c->channels);
  chocolate_free_layer();
  chocolate_dev.conf = *c;
  if (c->f32) chocolate_dev.conf.bias = (float*)copy;
  else chocolate_dev.conf.table = (int32_t*)copy;
  chocolate_dev.configured = 1;
  chocolate_dev.counters.configure_calls += 1;
  const int64_t macs = mul_sat(mul_sat(c->rows, c->channels), c->depth), useful = chocolate_dev.counters.macs_useful;
  chocolate_dev.counters.macs_useful = macs > INT64_MAX - useful ? INT64_MAX : useful + macs; /* saturates */
  return CHOCOLATE_OK;
}

/* The layer's integers from the conv struct (the output stage's are filled in by the caller). */
static layer layer_of(int f32, const chocolate_conv_params* p) {
  const layer c = {f32, p->rows, p->channels, p->depth, p->input.h, p->input.w, p->input.c, p->kernel.h, p->kernel.w,
                   p->stride.h, p->stride.w, p->padding.h, p->padding.w, p->ow, 0, 0, 0, 0, 0.0f, 0.0f, NULL, NULL};
  return c;
}

chocolate_status chocolate_configure_s8(const chocolate_conv_params* conv, const chocolate_quant_params* quant,
                                        const chocolate_per_channel_quant_params* per_channel) {
  if (!chocolate_dev.ready) return chocolate_fail(CHOCOLATE_ENOTREADY, __func__, "the device is not powered up (chocolate_begin first)");
  if (conv == NULL || quant == NULL || per_channel == NULL)
    return chocolate_fail(CHOCOLATE_EINVAL, __func__, "conv, quant or per_channel is NULL");
  layer c = layer_of(0, conv);
  c.input_zp = quant->input_zp;
  c.output_zp = quant->output_zp;
  c.act_min = quant->act_min;
  c.act_max = quant->act_max;
  const void* const tables[3] = {per_channel->bias, per_channel->multiplier, per_channel->shift};
  return configure(__func__, &c, tables);
}

chocolate_status chocolate_configure_f32(const chocolate_conv_params* conv, const chocolate_f32_params* stage) {
  if (!chocolate_dev.ready) return chocolate_fail(CHOCOLATE_ENOTREADY, __func__, "the device is not powered up (chocolate_begin first)");
  if (conv == NULL || stage == NULL) return chocolate_fail(CHOCOLATE_EINVAL, __func__, "conv or stage is NULL");
  layer c = layer_of(1, conv);
  c.lo = stage->lo;
  c.hi = stage->hi;
  const void* const tables[3] = {stage->bias, NULL, NULL};
  return configure(__func__, &c, tables);
}
