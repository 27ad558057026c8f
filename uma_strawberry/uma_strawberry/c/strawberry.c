/* Host model of the Strawberry accelerator: a scratchpad separate from host memory, a DMA
 * engine moving 3-D tiles between the two (zero padding on the way in), and the kit's float Conv2D
 * engine (kit_conv_f32.h) computing on scratchpad addresses only.
 *
 * The model is strict where real hardware would silently compute garbage: every scratchpad
 * element has a "written" flag, set by a transfer into it or a computation writing it and
 * cleared when a layer begins; reading an element whose flag is clear fails (STRAWBERRY_EUNWRITTEN)
 * with a message on stderr.  Arguments are validated before anything is touched; past the checks
 * no index arithmetic can overflow (64-bit, with sizes saturated far above any scratchpad). */
#include "strawberry.h"

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kit_conv_f32.h"

/* Products of extents saturate here: far above any scratchpad, far below INT64_MAX. */
#define SATURATED ((int64_t)1 << 40)

typedef struct {
  int ready;
  int32_t spad_bytes, dma_bytes_per_cycle, dma_setup_cycles, macs_per_cycle;
  float* mem;              /* spad_bytes / 4 elements */
  unsigned char* written;  /* one flag per element */
  void* engine_buf;        /* the conv engine's working memory (its own, not the scratchpad's) */
  int32_t engine_bytes;
  int64_t layer_bytes;     /* scratchpad bytes written since the layer began */
  strawberry_counters counters;
} device;

static device dev;
static char last_error[320];
static int report_registered;

static const char* code_name(strawberry_status code) {
  static const char* const names[] = {
      "STRAWBERRY_OK",     "STRAWBERRY_ENOTREADY", "STRAWBERRY_ECONFIG",    "STRAWBERRY_ENOMEM",
      "STRAWBERRY_EINVAL", "STRAWBERRY_ESIZE",     "STRAWBERRY_ESTRIDE",    "STRAWBERRY_EWINDOW",
      "STRAWBERRY_ECLAMP", "STRAWBERRY_EHOST",     "STRAWBERRY_EADDR",      "STRAWBERRY_EUNWRITTEN",
      "STRAWBERRY_EOVERLAP", "STRAWBERRY_EENGINE"};
  return (size_t)code < sizeof names / sizeof names[0] ? names[code] : "STRAWBERRY_E?";
}

/* Records and prints "strawberry: ENTRY: MESSAGE (CODE)"; returns code. */
static strawberry_status fail(strawberry_status code, const char* entry, const char* format, ...) {
  char message[224];
  va_list args;
  va_start(args, format);
  vsnprintf(message, sizeof message, format, args);
  va_end(args);
  snprintf(last_error, sizeof last_error, "strawberry: %s: %s (%s)", entry, message, code_name(code));
  fprintf(stderr, "%s\n", last_error);
  return code;
}

static int64_t mul_sat(int64_t a, int64_t b) { /* a, b >= 0 */
  if (a == 0 || b == 0) return 0;
  return a > SATURATED / b ? SATURATED : a * b;
}

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* ------------------------------------------------------------------------------------------ */
/* Configuration */

static strawberry_status check_config(const char* entry, int32_t spad_bytes, int32_t bpc, int32_t setup, int32_t macs) {
  if (spad_bytes < 4 || spad_bytes % 4 != 0 || spad_bytes > STRAWBERRY_MAX_SPAD_BYTES)
    return fail(STRAWBERRY_ECONFIG, entry, "scratchpad size %ld is not a multiple of 4 in [4, %ld]",
                (long)spad_bytes, (long)STRAWBERRY_MAX_SPAD_BYTES);
  if (bpc < 1 || setup < 0 || macs < 1)
    return fail(STRAWBERRY_ECONFIG, entry,
                "DMA bytes per cycle %ld, DMA setup cycles %ld, MACs per cycle %ld (need >= 1, >= 0, >= 1)",
                (long)bpc, (long)setup, (long)macs);
  return STRAWBERRY_OK;
}

static void report_to(FILE* out) {
  const strawberry_counters* c = &dev.counters;
  fprintf(out, "strawberry.spad_bytes: %ld\n", (long)dev.spad_bytes);
  fprintf(out, "strawberry.dma_bytes_per_cycle: %ld\n", (long)dev.dma_bytes_per_cycle);
  fprintf(out, "strawberry.dma_setup_cycles: %ld\n", (long)dev.dma_setup_cycles);
  fprintf(out, "strawberry.macs_per_cycle: %ld\n", (long)dev.macs_per_cycle);
  fprintf(out, "strawberry.layers: %lld\n", (long long)c->layers);
  fprintf(out, "strawberry.dma_in_calls: %lld\n", (long long)c->dma_in_calls);
  fprintf(out, "strawberry.dma_out_calls: %lld\n", (long long)c->dma_out_calls);
  fprintf(out, "strawberry.dma_in_bytes: %lld\n", (long long)c->dma_in_bytes);
  fprintf(out, "strawberry.dma_pad_bytes: %lld\n", (long long)c->dma_pad_bytes);
  fprintf(out, "strawberry.dma_out_bytes: %lld\n", (long long)c->dma_out_bytes);
  fprintf(out, "strawberry.dma_cycles: %lld\n", (long long)c->dma_cycles);
  fprintf(out, "strawberry.compute_calls: %lld\n", (long long)c->compute_calls);
  fprintf(out, "strawberry.macs: %lld\n", (long long)c->macs);
  fprintf(out, "strawberry.compute_cycles: %lld\n", (long long)c->compute_cycles);
  fprintf(out, "strawberry.spad_high_water: %lld\n", (long long)c->spad_high_water);
  fprintf(out, "strawberry.spad_peak_bytes: %lld\n", (long long)c->spad_peak_bytes);
}

void strawberry_report(void) { report_to(stderr); }

static void report_at_exit(void) {
  const char* where = getenv("STRAWBERRY_REPORT");
  if (where == NULL || where[0] == '\0') return;
  if (strcmp(where, "1") == 0) {
    report_to(stderr);
    return;
  }
  FILE* out = fopen(where, "a");
  if (out == NULL) {
    fprintf(stderr, "strawberry: cannot write the report to %s\n", where);
    return;
  }
  report_to(out);
  fclose(out);
}

strawberry_status strawberry_init(int32_t spad_bytes, int32_t dma_bytes_per_cycle, int32_t dma_setup_cycles,
                                  int32_t macs_per_cycle) {
  const strawberry_status status =
      check_config("strawberry_init", spad_bytes, dma_bytes_per_cycle, dma_setup_cycles, macs_per_cycle);
  if (status != STRAWBERRY_OK) return status;
  const size_t elements = (size_t)spad_bytes / 4;
  float* mem = (float*)calloc(elements, sizeof(float));
  unsigned char* written = (unsigned char*)calloc(elements, 1);
  if (mem == NULL || written == NULL) {
    free(mem);
    free(written);
    return fail(STRAWBERRY_ENOMEM, "strawberry_init", "cannot allocate a %ld-byte scratchpad model", (long)spad_bytes);
  }
  strawberry_shutdown();
  dev.ready = 1;
  dev.spad_bytes = spad_bytes;
  dev.dma_bytes_per_cycle = dma_bytes_per_cycle;
  dev.dma_setup_cycles = dma_setup_cycles;
  dev.macs_per_cycle = macs_per_cycle;
  dev.mem = mem;
  dev.written = written;
  if (!report_registered && getenv("STRAWBERRY_REPORT") != NULL) {
    report_registered = 1;
    atexit(report_at_exit);
  }
  return STRAWBERRY_OK;
}

strawberry_status strawberry_begin(int32_t spad_bytes, int32_t dma_bytes_per_cycle, int32_t dma_setup_cycles,
                                   int32_t macs_per_cycle) {
  if (!dev.ready) {
    const strawberry_status status = strawberry_init(spad_bytes, dma_bytes_per_cycle, dma_setup_cycles, macs_per_cycle);
    if (status != STRAWBERRY_OK) return status;
  } else {
    const strawberry_status status =
        check_config("strawberry_begin", spad_bytes, dma_bytes_per_cycle, dma_setup_cycles, macs_per_cycle);
    if (status != STRAWBERRY_OK) return status;
    if (spad_bytes != dev.spad_bytes || dma_bytes_per_cycle != dev.dma_bytes_per_cycle ||
        dma_setup_cycles != dev.dma_setup_cycles || macs_per_cycle != dev.macs_per_cycle)
      return fail(STRAWBERRY_ECONFIG, "strawberry_begin",
                  "code compiled for a %ld-byte scratchpad, %ld B/cycle DMA, %ld setup cycles, %ld MACs/cycle; "
                  "the device has %ld, %ld, %ld, %ld",
                  (long)spad_bytes, (long)dma_bytes_per_cycle, (long)dma_setup_cycles, (long)macs_per_cycle,
                  (long)dev.spad_bytes, (long)dev.dma_bytes_per_cycle, (long)dev.dma_setup_cycles,
                  (long)dev.macs_per_cycle);
  }
  memset(dev.written, 0, (size_t)dev.spad_bytes / 4);
  dev.layer_bytes = 0;
  dev.counters.layers += 1;
  return STRAWBERRY_OK;
}

void strawberry_get_counters(strawberry_counters* out) {
  if (out != NULL) *out = dev.counters;
}

int32_t strawberry_spad_bytes(void) { return dev.ready ? dev.spad_bytes : 0; }

const char* strawberry_last_error(void) { return last_error; }

void strawberry_shutdown(void) {
  free(dev.mem);
  free(dev.written);
  free(dev.engine_buf);
  memset(&dev, 0, sizeof dev);
}

/* ------------------------------------------------------------------------------------------ */
/* Scratchpad regions */

typedef struct {
  const char* what;
  int64_t addr, bytes; /* bytes == 0: no region (STRAWBERRY_NONE) */
} region;

/* STRAWBERRY_EADDR unless [addr, addr + bytes) lies in the scratchpad and addr is a multiple of 4. */
static strawberry_status check_inside(const char* entry, region r) {
  if (r.addr < 0 || r.addr % 4 != 0 || r.addr + r.bytes > dev.spad_bytes) {
    if (r.bytes >= SATURATED)
      return fail(STRAWBERRY_EADDR, entry, "%s region is larger than the %ld-byte scratchpad", r.what,
                  (long)dev.spad_bytes);
    return fail(STRAWBERRY_EADDR, entry, "%s region [%lld, %lld) is not in the %ld-byte scratchpad%s", r.what,
                (long long)r.addr, (long long)(r.addr + r.bytes), (long)dev.spad_bytes,
                r.addr >= 0 && r.addr % 4 != 0 ? " (address not a multiple of 4)" : "");
  }
  return STRAWBERRY_OK;
}

/* STRAWBERRY_EUNWRITTEN unless every element of the region is written. */
static strawberry_status check_written(const char* entry, region r) {
  const int64_t first = r.addr / 4, end = (r.addr + r.bytes) / 4;
  for (int64_t i = first; i < end; ++i) {
    if (!dev.written[i]) {
      int64_t j = i;
      while (j < end && !dev.written[j]) ++j;
      return fail(STRAWBERRY_EUNWRITTEN, entry,
                  "reads %s bytes [%lld, %lld) of the scratchpad that nothing has written since the layer began "
                  "(a missing transfer?)",
                  r.what, (long long)(i * 4), (long long)(j * 4));
    }
  }
  return STRAWBERRY_OK;
}

static void mark_written(region r) {
  const int64_t first = r.addr / 4, end = (r.addr + r.bytes) / 4;
  for (int64_t i = first; i < end; ++i) {
    dev.layer_bytes += dev.written[i] ? 0 : 4;
    dev.written[i] = 1;
  }
  dev.counters.spad_peak_bytes = max64(dev.counters.spad_peak_bytes, dev.layer_bytes);
  dev.counters.spad_high_water = max64(dev.counters.spad_high_water, r.addr + r.bytes);
}

static int overlaps(region a, region b) {
  return a.bytes > 0 && b.bytes > 0 && a.addr < b.addr + b.bytes && b.addr < a.addr + a.bytes;
}

/* ------------------------------------------------------------------------------------------ */
/* DMA */

typedef struct {
  int64_t ext[3], stride[3], start[3], n[3];
} tile;

static strawberry_status check_tile(const char* entry, const float* host, const strawberry_tile* in, tile* t,
                                    int inside) {
  if (!dev.ready) return fail(STRAWBERRY_ENOTREADY, entry, "the device is not initialised (strawberry_begin first)");
  if (host == NULL) return fail(STRAWBERRY_EINVAL, entry, "host pointer is NULL");
  if (in == NULL) return fail(STRAWBERRY_EINVAL, entry, "tile is NULL");
  for (int d = 0; d < 3; ++d) {
    t->ext[d] = in->extent[d];
    t->stride[d] = in->stride[d];
    t->start[d] = in->start[d];
    t->n[d] = in->size[d];
  }
  for (int d = 0; d < 3; ++d)
    if (t->ext[d] < 1 || t->n[d] < 1)
      return fail(STRAWBERRY_ESIZE, entry, "extent %d of the host tensor (%lld) or of the tile (%lld) is below 1", d,
                  (long long)t->ext[d], (long long)t->n[d]);
  for (int d = 0; d < 3; ++d)
    if (t->stride[d] < 0) return fail(STRAWBERRY_ESTRIDE, entry, "host stride %d is %lld", d, (long long)t->stride[d]);
  int64_t last = 0; /* the host tensor's last element, in elements from host */
  for (int d = 0; d < 3; ++d) last = min64(SATURATED, last + mul_sat(t->ext[d] - 1, t->stride[d]));
  if (last >= (int64_t)(PTRDIFF_MAX / sizeof(float)) || last >= SATURATED)
    return fail(STRAWBERRY_EHOST, entry, "the host tensor is too large to index");
  if (inside)
    for (int d = 0; d < 3; ++d)
      if (t->start[d] < 0 || t->start[d] + t->n[d] > t->ext[d])
        return fail(STRAWBERRY_EHOST, entry, "tile [%lld, %lld) along dimension %d is not inside the host tensor's %lld",
                    (long long)t->start[d], (long long)(t->start[d] + t->n[d]), d, (long long)t->ext[d]);
  return STRAWBERRY_OK;
}

static int64_t tile_bytes(const tile* t) { return mul_sat(mul_sat(mul_sat(4, t->n[0]), t->n[1]), t->n[2]); }

static void count_transfer(int64_t spad_bytes) {
  dev.counters.dma_cycles += dev.dma_setup_cycles + ceil_div(spad_bytes, dev.dma_bytes_per_cycle);
}

strawberry_status strawberry_dma_in(int32_t spad_addr, const float* host, const strawberry_tile* box) {
  static const char entry[] = "strawberry_dma_in";
  tile t;
  strawberry_status status = check_tile(entry, host, box, &t, 0);
  if (status != STRAWBERRY_OK) return status;
  const region dst = {"destination", spad_addr, tile_bytes(&t)};
  if ((status = check_inside(entry, dst)) != STRAWBERRY_OK) return status;

  float* out = dev.mem + spad_addr / 4;
  /* Along dimension 2, the tile's elements j in [lo2, hi2) are inside the host tensor. */
  const int64_t lo2 = min64(t.n[2], max64(0, -t.start[2])), hi2 = max64(lo2, min64(t.n[2], t.ext[2] - t.start[2]));
  int64_t read = 0;
  for (int64_t j0 = 0; j0 < t.n[0]; ++j0) {
    const int64_t h0 = t.start[0] + j0;
    for (int64_t j1 = 0; j1 < t.n[1]; ++j1, out += t.n[2]) {
      const int64_t h1 = t.start[1] + j1;
      if (h0 < 0 || h0 >= t.ext[0] || h1 < 0 || h1 >= t.ext[1] || lo2 >= hi2) {
        memset(out, 0, (size_t)t.n[2] * sizeof(float));
        continue;
      }
      const float* row = host + (h0 * t.stride[0] + h1 * t.stride[1]);
      for (int64_t j2 = 0; j2 < lo2; ++j2) out[j2] = 0.0f;
      if (t.stride[2] == 1) {
        memcpy(out + lo2, row + (t.start[2] + lo2), (size_t)(hi2 - lo2) * sizeof(float));
      } else {
        for (int64_t j2 = lo2; j2 < hi2; ++j2) out[j2] = row[(t.start[2] + j2) * t.stride[2]];
      }
      for (int64_t j2 = hi2; j2 < t.n[2]; ++j2) out[j2] = 0.0f;
      read += hi2 - lo2;
    }
  }
  mark_written(dst);
  dev.counters.dma_in_calls += 1;
  dev.counters.dma_in_bytes += 4 * read;
  dev.counters.dma_pad_bytes += dst.bytes - 4 * read;
  count_transfer(dst.bytes);
  return STRAWBERRY_OK;
}

strawberry_status strawberry_dma_out(float* host, int32_t spad_addr, const strawberry_tile* box) {
  static const char entry[] = "strawberry_dma_out";
  tile t;
  strawberry_status status = check_tile(entry, host, box, &t, 1);
  if (status != STRAWBERRY_OK) return status;
  const region src = {"source", spad_addr, tile_bytes(&t)};
  if ((status = check_inside(entry, src)) != STRAWBERRY_OK) return status;
  if ((status = check_written(entry, src)) != STRAWBERRY_OK) return status;

  const float* in = dev.mem + spad_addr / 4;
  for (int64_t j0 = 0; j0 < t.n[0]; ++j0) {
    for (int64_t j1 = 0; j1 < t.n[1]; ++j1, in += t.n[2]) {
      float* row = host + ((t.start[0] + j0) * t.stride[0] + (t.start[1] + j1) * t.stride[1]);
      if (t.stride[2] == 1) {
        memcpy(row + t.start[2], in, (size_t)t.n[2] * sizeof(float));
      } else {
        for (int64_t j2 = 0; j2 < t.n[2]; ++j2) row[(t.start[2] + j2) * t.stride[2]] = in[j2];
      }
    }
  }
  dev.counters.dma_out_calls += 1;
  dev.counters.dma_out_bytes += src.bytes;
  count_transfer(src.bytes);
  return STRAWBERRY_OK;
}

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
  if (!dev.ready) return fail(STRAWBERRY_ENOTREADY, entry, "the device is not initialised (strawberry_begin first)");
  if (addrs == NULL || params == NULL) return fail(STRAWBERRY_EINVAL, entry, "addrs or params is NULL");
  const conv_call call = {nhwc, depthwise, addrs->ifmap, addrs->weights, addrs->bias, addrs->residual, addrs->slope,
                          addrs->ofmap, params->output.c, params->input.w, params->input.h, params->input.c,
                          params->kernel.h, params->kernel.w, params->output.w, params->output.h, params->stride.w,
                          params->stride.h, params->lo, params->hi};
  const conv_call* c = &call;
  const int32_t sizes[] = {c->oc, c->iw, c->ih, c->ic, c->kh, c->kw, c->ow, c->oh};
  static const char* const size_names[] = {"oc", "iw", "ih", "ic", "kh", "kw", "ow", "oh"};
  for (int i = 0; i < 8; ++i)
    if (sizes[i] < 1) return fail(STRAWBERRY_ESIZE, entry, "%s is %ld (needs >= 1)", size_names[i], (long)sizes[i]);
  if (c->depthwise && c->ic != c->oc)
    return fail(STRAWBERRY_ESIZE, entry, "a depthwise conv with %ld input and %ld output channels", (long)c->ic,
                (long)c->oc);
  if (c->stride_w < 1 || c->stride_h < 1)
    return fail(STRAWBERRY_ESTRIDE, entry, "strides %ld x %ld (need >= 1)", (long)c->stride_h, (long)c->stride_w);
  const int64_t rows = (int64_t)(c->oh - 1) * c->stride_h + c->kh, cols = (int64_t)(c->ow - 1) * c->stride_w + c->kw;
  if (rows > c->ih || cols > c->iw)
    return fail(STRAWBERRY_EWINDOW, entry, "%ldx%ld outputs of a %ldx%ld window at stride %ldx%ld read %lldx%lld inputs, "
                "the tile has %ldx%ld", (long)c->oh, (long)c->ow, (long)c->kh, (long)c->kw, (long)c->stride_h,
                (long)c->stride_w, (long long)rows, (long long)cols, (long)c->ih, (long)c->iw);
  if (!(c->lo <= c->hi)) return fail(STRAWBERRY_ECLAMP, entry, "clamp bounds [%g, %g]", (double)c->lo, (double)c->hi);

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
    if (in[i].bytes > 0 && (status = check_inside(entry, in[i])) != STRAWBERRY_OK) return status;
  if ((status = check_inside(entry, out)) != STRAWBERRY_OK) return status;
  for (int i = 0; i < count; ++i)
    if (in[i].bytes > 0 && (status = check_written(entry, in[i])) != STRAWBERRY_OK) return status;
  for (int i = 0; i < count; ++i)
    if (overlaps(out, in[i]))
      return fail(STRAWBERRY_EOVERLAP, entry, "ofmap [%lld, %lld) overlaps %s [%lld, %lld)", (long long)out.addr,
                  (long long)(out.addr + out.bytes), in[i].what, (long long)in[i].addr,
                  (long long)(in[i].addr + in[i].bytes));

  float* const m = dev.mem;
#define AT(r) ((r).bytes > 0 ? m + (r).addr / 4 : NULL)
  /* a "valid" window: the DMA padded the tile (depthwise: ic = oc, the channels) */
  const kit_conv_f32_geometry g = {c->oc, c->depthwise ? c->oc : c->ic, c->ih, c->iw, c->oh, c->ow, c->kh, c->kw,
                                   c->stride_h, c->stride_w, 0, 0};
  /* The engine's working memory grows to the largest call's; 0 (a geometry the engine refuses)
   * leaves it as it is, and the engine says why below. */
  const int32_t need = kit_conv_f32_get_buffer_size(&g, c->depthwise, c->nhwc);
  if (need > dev.engine_bytes) {
    void* grown = realloc(dev.engine_buf, (size_t)need);
    if (grown == NULL)
      return fail(STRAWBERRY_ENOMEM, entry, "cannot allocate the conv engine's %ld bytes of working memory", (long)need);
    dev.engine_buf = grown;
    dev.engine_bytes = need;
  }
  const kit_conv_f32_context ctx = {dev.engine_buf, dev.engine_bytes};
  const int32_t engine = (c->depthwise ? (c->nhwc ? kit_depthwise_conv2d_f32_nhwc : kit_depthwise_conv2d_f32_nchw)
                                       : (c->nhwc ? kit_conv2d_f32_nhwc : kit_conv2d_f32_nchw))(
      &ctx, AT(in[0]), AT(in[1]), AT(in[2]), AT(in[3]), AT(in[4]), AT(out), &g, c->lo, c->hi);
#undef AT
  if (engine != KIT_CONV_F32_OK)
    return fail(STRAWBERRY_EENGINE, entry, "the conv engine returned kit status %ld (kit_conv_f32.h)", (long)engine);
  mark_written(out);
  const int64_t macs = mul_sat(mul_sat(c->oc, plane), reduction);
  dev.counters.compute_calls += 1;
  dev.counters.macs += macs;
  dev.counters.compute_cycles += ceil_div(macs, dev.macs_per_cycle);
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
