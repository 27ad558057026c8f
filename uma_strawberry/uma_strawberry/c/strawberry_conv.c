/* Strawberry's conv engine: the kit's float Conv2D engine (kit_conv_f32.h) computing on
 * scratchpad addresses only, reading only what transfers or earlier computations wrote.  A conv
 * split along its input channels (params->accumulate) runs the kit's engine without its output
 * stage on each chunk, adds the sums into the ofmap region, and applies the stage after the last. */
#include <float.h>
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
  int32_t accumulate;
} conv_call;

static region optional(const char* what, int32_t addr, int64_t bytes) {
  const region r = {what, addr, addr == STRAWBERRY_NONE ? 0 : bytes};
  return r;
}

/* The kit's engine for this call's layout and kind, output stage included (NULLs: none). */
static int32_t run_engine(const conv_call* c, const kit_conv_f32_context* ctx, const kit_conv_f32_geometry* g,
                          const float* ifmap, const float* weights, const float* bias, const float* residual,
                          const float* slope, float* out, float lo, float hi) {
  return (c->depthwise ? (c->nhwc ? kit_depthwise_conv2d_f32_nhwc : kit_depthwise_conv2d_f32_nchw)
                       : (c->nhwc ? kit_conv2d_f32_nhwc : kit_conv2d_f32_nchw))(ctx, ifmap, weights, bias, residual,
                                                                                   slope, out, g, lo, hi);
}

#define ENGINE_NOMEM (-1) /* chunk(): no model memory for the sums */

/* One chunk of input channels: its sums (the kit's engine, no stage) into the model's own buffer,
 * added to the partial sums in out (STRAWBERRY_ACC_ADD) or replacing them; after the last chunk
 * the output stage in the kit's order: v = sum + bias[o] + residual; PReLU; clamp. */
static int32_t chunk(const conv_call* c, const kit_conv_f32_context* ctx, const kit_conv_f32_geometry* g,
                     const float* ifmap, const float* weights, const float* bias, const float* residual,
                     const float* slope, float* out) {
  const int64_t plane = (int64_t)c->oh * c->ow, n = plane * c->oc; /* inside the scratchpad: no overflow */
  if (n > strawberry_dev.sums_elems) {
    float* grown = (float*)realloc(strawberry_dev.sums, (size_t)n * sizeof(float));
    if (grown == NULL) return ENGINE_NOMEM;
    strawberry_dev.sums = grown;
    strawberry_dev.sums_elems = n;
  }
  float* const sums = strawberry_dev.sums;
  const int32_t engine = run_engine(c, ctx, g, ifmap, weights, NULL, NULL, NULL, sums, -FLT_MAX, FLT_MAX);
  if (engine != KIT_CONV_F32_OK) return engine;
  for (int64_t i = 0; i < n; ++i) out[i] = (c->accumulate & STRAWBERRY_ACC_ADD) ? out[i] + sums[i] : sums[i];
  if (c->accumulate & STRAWBERRY_ACC_PARTIAL) return KIT_CONV_F32_OK;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t o = c->nhwc ? i % c->oc : i / plane;
    float v = out[i];
    if (bias != NULL) v += bias[o];
    if (residual != NULL) v += residual[i];
    if (slope != NULL) v = v < 0.0f ? v * slope[o] : v;
    if (c->lo > -FLT_MAX) v = v < c->lo ? c->lo : v; /* -FLT_MAX .. FLT_MAX clamps nothing, as in the kit */
    if (c->hi < FLT_MAX) v = v > c->hi ? c->hi : v;
    out[i] = v;
  }
  return KIT_CONV_F32_OK;
}

static strawberry_status conv(const char* entry, int nhwc, int depthwise, const strawberry_conv_addrs* addrs,
                              const strawberry_conv_params* params) {
  if (!strawberry_dev.ready) return strawberry_fail(STRAWBERRY_ENOTREADY, entry, "the device is not initialised (strawberry_begin first)");
  if (addrs == NULL || params == NULL) return strawberry_fail(STRAWBERRY_EINVAL, entry, "addrs or params is NULL");
  const conv_call call = {nhwc, depthwise, addrs->ifmap, addrs->weights, addrs->bias, addrs->residual, addrs->slope,
                          addrs->ofmap, params->output.c, params->input.w, params->input.h, params->input.c,
                          params->kernel.h, params->kernel.w, params->output.w, params->output.h, params->stride.w,
                          params->stride.h, params->lo, params->hi, params->accumulate};
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
  if (c->accumulate & ~(STRAWBERRY_ACC_ADD | STRAWBERRY_ACC_PARTIAL))
    return strawberry_fail(STRAWBERRY_EPARTIAL, entry, "accumulate is %ld (0 or STRAWBERRY_ACC_ADD | STRAWBERRY_ACC_PARTIAL)",
                           (long)c->accumulate);
  if (c->accumulate && c->depthwise)
    return strawberry_fail(STRAWBERRY_EPARTIAL, entry, "accumulate %ld on a depthwise conv (its channels are not summed)",
                           (long)c->accumulate);

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
  if ((c->accumulate & STRAWBERRY_ACC_ADD) && (status = strawberry_check_written(entry, out)) != STRAWBERRY_OK)
    return status;
  for (int i = 0; i < count; ++i)
    if (in[i].bytes > 0 && (status = strawberry_check_no_partial(entry, in[i])) != STRAWBERRY_OK) return status;
  if ((c->accumulate & STRAWBERRY_ACC_ADD) && (status = strawberry_check_partial(entry, out)) != STRAWBERRY_OK)
    return status;
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
  const int32_t engine = c->accumulate ? chunk(c, &ctx, &g, AT(in[0]), AT(in[1]), AT(in[2]), AT(in[3]), AT(in[4]), AT(out))
                                       : run_engine(c, &ctx, &g, AT(in[0]), AT(in[1]), AT(in[2]), AT(in[3]), AT(in[4]),
                                                    AT(out), c->lo, c->hi);
#undef AT
  if (engine == ENGINE_NOMEM)
    return strawberry_fail(STRAWBERRY_ENOMEM, entry, "cannot allocate the partial sums' %lld bytes of model memory",
                           (long long)out.bytes);
  if (engine != KIT_CONV_F32_OK)
    return strawberry_fail(STRAWBERRY_EENGINE, entry, "the conv engine returned kit status %ld (kit_conv_f32.h)", (long)engine);
  if (c->accumulate & STRAWBERRY_ACC_PARTIAL) strawberry_mark_partial(out);
  else strawberry_mark_written(out);
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
