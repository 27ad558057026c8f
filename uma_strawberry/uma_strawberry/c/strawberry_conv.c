/* Strawberry's conv engine: the kit's float Conv2D engine (kit_conv_f32.h) computing on
 * scratchpad addresses only, reading only what transfers or earlier computations wrote. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "kit_conv_f32.h"
#include "strawberry_internal.h"

/* ------------------------------------------------------------------------------------------ */
/* The conv engine */

typedef struct {
  int nhwc, depthwise;
  int32_t ifmap, weights, bias, residual, slope, ofmap;
  int32_t oc, iw, ih, ic, kh, kw, ow, oh, stride_w, stride_h; /* ic == oc for a depthwise conv */
  float lo, hi;
} conv_call;

static region optional(const char* what, int32_t addr, int64_t bytes) {
  const region r = {what, addr, addr == STRAWBERRY_NONE ? 0 : bytes};
  return r;
}

static strawberry_status conv(const char* entry, int nhwc, int depthwise, const strawberry_conv_addrs* addrs,
                              const strawberry_conv_params* params) {
  if (!strawberry_dev.ready) return strawberry_fail(STRAWBERRY_ENOTREADY, entry, "the device is not initialised (strawberry_begin first)");
  if (addrs == NULL || params == NULL) return strawberry_fail(STRAWBERRY_EINVAL, entry, "addrs or params is NULL");
  const conv_call call = {nhwc, depthwise, addrs->ifmap, addrs->weights, addrs->bias, addrs->residual, addrs->slope,
                          addrs->ofmap, params->output.c, params->input.w, params->input.h, params->input.c,
                          params->kernel.h, params->kernel.w, params->output.w, params->output.h, params->stride.w,
                          params->stride.h, params->lo, params->hi};
  const conv_call* c = &call;
  const int32_t sizes[] = {c->oc, c->iw, c->ih, c->ic, c->kh, c->kw, c->ow, c->oh};
  static const char* const size_names[] = {"oc", "iw", "ih", "ic", "kh", "kw", "ow", "oh"};
  for (int i = 0; i < 8; ++i)
    if (sizes[i] < 1) return strawberry_fail(STRAWBERRY_ESIZE, entry, "%s is %ld (needs >= 1)", size_names[i], (long)sizes[i]);
  if (c->depthwise && c->ic != c->oc)
    return strawberry_fail(STRAWBERRY_ESIZE, entry, "a depthwise conv with %ld input and %ld output channels", (long)c->ic,
                (long)c->oc);
  if (c->stride_w < 1 || c->stride_h < 1)
    return strawberry_fail(STRAWBERRY_ESTRIDE, entry, "strides %ld x %ld (need >= 1)", (long)c->stride_h, (long)c->stride_w);
  const int64_t rows = (int64_t)(c->oh - 1) * c->stride_h + c->kh, cols = (int64_t)(c->ow - 1) * c->stride_w + c->kw;
  if (rows > c->ih || cols > c->iw)
    return strawberry_fail(STRAWBERRY_EWINDOW, entry, "%ldx%ld outputs of a %ldx%ld window at stride %ldx%ld read %lldx%lld inputs, "
                "the tile has %ldx%ld", (long)c->oh, (long)c->ow, (long)c->kh, (long)c->kw, (long)c->stride_h,
                (long)c->stride_w, (long long)rows, (long long)cols, (long)c->ih, (long)c->iw);
  if (!(c->lo <= c->hi)) return strawberry_fail(STRAWBERRY_ECLAMP, entry, "clamp bounds [%g, %g]", (double)c->lo, (double)c->hi);

  const int64_t taps = mul_sat(c->kh, c->kw), plane = mul_sat(c->oh, c->ow);
  const int64_t reduction = c->depthwise ? taps : mul_sat(c->ic, taps);
  const region in[] = {
      {"ifmap", c->ifmap, mul_sat(mul_sat(4, c->ic), mul_sat(c->ih, c->iw))},
      {"weights", c->weights, mul_sat(mul_sat(4, c->oc), reduction)},
      optional("bias", c->bias, mul_sat(4, c->oc)),
      optional("residual", c->residual, mul_sat(mul_sat(4, c->oc), plane)),
      optional("slope", c->slope, mul_sat(4, c->oc)),
  };
  const region out = {"ofmap", c->ofmap, mul_sat(mul_sat(4, c->oc), plane)};
  const int count = (int)(sizeof in / sizeof in[0]);
  strawberry_status status;
  for (int i = 0; i < count; ++i)
    if (in[i].bytes > 0 && (status = strawberry_check_inside(entry, in[i])) != STRAWBERRY_OK) return status;
  if ((status = strawberry_check_inside(entry, out)) != STRAWBERRY_OK) return status;
  for (int i = 0; i < count; ++i)
    if (in[i].bytes > 0 && (status = strawberry_check_written(entry, in[i])) != STRAWBERRY_OK) return status;
  for (int i = 0; i < count; ++i)
    if (strawberry_overlaps(out, in[i]))
      return strawberry_fail(STRAWBERRY_EOVERLAP, entry, "ofmap [%lld, %lld) overlaps %s [%lld, %lld)", (long long)out.addr,
                  (long long)(out.addr + out.bytes), in[i].what, (long long)in[i].addr,
                  (long long)(in[i].addr + in[i].bytes));

  float* const m = strawberry_dev.mem;
#define AT(r) ((r).bytes > 0 ? m + (r).addr / 4 : NULL)
  /* a "valid" window: the DMA padded the tile (depthwise: ic = oc, the channels) */
  const kit_conv_f32_geometry g = {c->oc, c->depthwise ? c->oc : c->ic, c->ih, c->iw, c->oh, c->ow, c->kh, c->kw,
                                   c->stride_h, c->stride_w, 0, 0};
  /* The engine's working memory grows to the largest call's; 0 (a geometry the engine refuses)
   * leaves it as it is, and the engine says why below. */
  const int32_t need = kit_conv_f32_get_buffer_size(&g, c->depthwise, c->nhwc);
  if (need > strawberry_dev.engine_bytes) {
    void* grown = realloc(strawberry_dev.engine_buf, (size_t)need);
    if (grown == NULL)
      return strawberry_fail(STRAWBERRY_ENOMEM, entry, "cannot allocate the conv engine's %ld bytes of working memory", (long)need);
    strawberry_dev.engine_buf = grown;
    strawberry_dev.engine_bytes = need;
  }
  const kit_conv_f32_context ctx = {strawberry_dev.engine_buf, strawberry_dev.engine_bytes};
  const int32_t engine = (c->depthwise ? (c->nhwc ? kit_depthwise_conv2d_f32_nhwc : kit_depthwise_conv2d_f32_nchw)
                                       : (c->nhwc ? kit_conv2d_f32_nhwc : kit_conv2d_f32_nchw))(
      &ctx, AT(in[0]), AT(in[1]), AT(in[2]), AT(in[3]), AT(in[4]), AT(out), &g, c->lo, c->hi);
#undef AT
  if (engine != KIT_CONV_F32_OK)
    return strawberry_fail(STRAWBERRY_EENGINE, entry, "the conv engine returned kit status %ld (kit_conv_f32.h)", (long)engine);
  strawberry_mark_written(out);
  const int64_t macs = mul_sat(mul_sat(c->oc, plane), reduction);
  strawberry_dev.counters.compute_calls += 1;
  strawberry_dev.counters.macs += macs;
  strawberry_dev.counters.compute_cycles += ceil_div(macs, strawberry_dev.macs_per_cycle);
  return STRAWBERRY_OK;
}

strawberry_status strawberry_conv2d_nchw(const strawberry_conv_addrs* addrs, const strawberry_conv_params* params) {
  return conv("strawberry_conv2d_nchw", 0, 0, addrs, params);
}

strawberry_status strawberry_conv2d_nhwc(const strawberry_conv_addrs* addrs, const strawberry_conv_params* params) {
  return conv("strawberry_conv2d_nhwc", 1, 0, addrs, params);
}

strawberry_status strawberry_depthwise_conv2d_nchw(const strawberry_conv_addrs* addrs,
                                                   const strawberry_conv_params* params) {
  return conv("strawberry_depthwise_conv2d_nchw", 0, 1, addrs, params);
}

strawberry_status strawberry_depthwise_conv2d_nhwc(const strawberry_conv_addrs* addrs,
                                                   const strawberry_conv_params* params) {
  return conv("strawberry_depthwise_conv2d_nhwc", 1, 1, addrs, params);
}
