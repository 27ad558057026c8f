/* Host model of the Chocolate accelerator (see chocolate.h): the matrix core, its scratchpad and
 * the DMA engine, strict where hardware would silently compute garbage.  Every scratchpad byte has
 * a "written" flag (cleared when a layer begins) and reading an unwritten byte fails.  Every entry
 * checks all its arguments first, in the order of the header's codes, so an error changes nothing
 * (no scratchpad or host byte, no counter) and the lowest applicable code comes back.  Past the
 * checks nothing overflows: indices are 64-bit, products of sizes saturate at 2^62 (far above
 * anything indexable), and int32 sums wrap through uint32 as the hardware's adders do. */
#include "chocolate.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kit_requantize.h" /* kit_requantize: the output stage's rounding, TVM's */

#define SATURATED ((int64_t)1 << 62)

typedef struct {
  int f32;
  int32_t rows, channels, depth, ih, iw, ic, kh, kw, stride_h, stride_w, pad_top, pad_left, ow;
  int32_t input_zp, output_zp, act_min, act_max; /* int8 */
  float lo, hi;                                   /* float */
  int32_t* table;                                 /* int8: [3][channels] bias, multiplier, shift */
  float* bias;                                    /* float: [channels], or NULL */
} layer;

typedef struct {
  int ready, configured;
  int32_t spad_bytes, tile_m, tile_n, tile_k, dma_bytes_per_cycle, dma_setup_cycles;
  unsigned char* mem;     /* spad_bytes bytes (int32 and float go through memcpy), then the flags */
  unsigned char* written; /* one flag per byte */
  int64_t layer_bytes;    /* distinct bytes written since the layer began */
  layer conf;
  chocolate_counters counters;
} device;

static device dev;
static char last_error[320];
static int report_registered;

static const char* code_name(chocolate_status code) {
  static const char* const names[] = {"OK",     "ENOTREADY",      "ECONFIG", "ENOMEM", "EINVAL",   "ELAYER",
                                      "ENOTCONFIGURED", "EBOUNDS", "EADDR",  "EOVERLAP", "EUNWRITTEN"};
  return (size_t)code < sizeof names / sizeof names[0] ? names[code] : "E?";
}

/* Records and prints "chocolate: ENTRY: MESSAGE (CHOCOLATE_CODE)"; returns code. */
static chocolate_status fail(chocolate_status code, const char* entry, const char* format, ...) {
  char message[224];
  va_list args;
  va_start(args, format);
  vsnprintf(message, sizeof message, format, args);
  va_end(args);
  snprintf(last_error, sizeof last_error, "chocolate: %s: %s (CHOCOLATE_%s)", entry, message, code_name(code));
  fprintf(stderr, "%s\n", last_error);
  return code;
}

/* Returns the status of a failed check from the calling entry. */
#define CHECK(check) do { const chocolate_status status_ = (check); if (status_ != CHOCOLATE_OK) return status_; } while (0)

static int64_t mul_sat(int64_t a, int64_t b) { return a == 0 || b == 0 ? 0 : a > SATURATED / b ? SATURATED : a * b; }

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* The int32 a two's-complement adder holds as u (no implementation-defined conversion). */
static int32_t wrap32(uint32_t u) { return u <= INT32_MAX ? (int32_t)u : -(int32_t)~u - 1; }

/* Scratchpad words, by memcpy: no alignment or aliasing assumptions. */
static float load_f32(const unsigned char* p) { float v; memcpy(&v, p, 4); return v; }
static int32_t load_i32(const unsigned char* p) { int32_t v; memcpy(&v, p, 4); return v; }
static int32_t load_s8(const unsigned char* p) { int8_t v; memcpy(&v, p, 1); return v; }
static void store_f32(unsigned char* p, float v) { memcpy(p, &v, 4); }
static void store_s8(unsigned char* p, int32_t v) { const int8_t b = (int8_t)v; memcpy(p, &b, 1); } /* v fits */
static void store_i32(unsigned char* p, int32_t v) { memcpy(p, &v, 4); }

static void report_to(FILE* out) {
  static const char* const keys[] = {
      "spad_bytes", "tile_m", "tile_n", "tile_k", "dma_bytes_per_cycle", "dma_setup_cycles", "layers",
      "configure_calls", "core_calls", "zero_calls", "macs_issued", "macs_useful", "dma_in_calls", "dma_out_calls",
      "dma_in_bytes", "dma_out_bytes", "dma_cycles", "core_cycles", "spad_peak_bytes"};
  const chocolate_counters* c = &dev.counters;
  const int64_t values[] = {
      dev.spad_bytes, dev.tile_m, dev.tile_n, dev.tile_k, dev.dma_bytes_per_cycle, dev.dma_setup_cycles, c->layers,
      c->configure_calls, c->core_calls, c->zero_calls, c->macs_issued, c->macs_useful, c->dma_in_calls,
      c->dma_out_calls, c->dma_in_bytes, c->dma_out_bytes, c->dma_cycles, c->core_cycles, c->spad_peak_bytes};
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; ++i)
    fprintf(out, "chocolate.%s: %lld\n", keys[i], (long long)values[i]);
}

void chocolate_report(void) { report_to(stderr); }

/* CHOCOLATE_REPORT set at power-up: "1" prints the report on stderr at exit, a path appends it there. */
static void report_at_exit(void) {
  const char* where = getenv("CHOCOLATE_REPORT");
  if (where == NULL || where[0] == '\0') return;
  FILE* out = strcmp(where, "1") == 0 ? stderr : fopen(where, "a");
  if (out == NULL) {
    fprintf(stderr, "chocolate: cannot write the report to %s\n", where);
    return;
  }
  report_to(out);
  if (out != stderr) fclose(out);
}

/* The core's status register and its completion.  Polling (default): the driver spins on the
 * register.  CHOCOLATE_COMPLETION_INTERRUPT: the core raises an interrupt whose handler,
 * registered at power-up, sets a flag the driver sleeps on.  The model's "hardware" runs inside
 * the start, so either wait ends at once; both exist so that both drivers are built and run. */
enum { CORE_IDLE, CORE_BUSY, CORE_DONE };
static volatile int core_status;
static void (*core_irq_handler)(void); /* NULL: the completion interrupt is disabled */
#ifdef CHOCOLATE_COMPLETION_INTERRUPT
static volatile int core_completed;
static void on_core_completion(void) { core_completed = 1; }
#endif

static void free_layer(void) {
  free(dev.conf.table);
  free(dev.conf.bias);
  memset(&dev.conf, 0, sizeof dev.conf);
  dev.configured = 0;
}

chocolate_status chocolate_begin(int32_t spad_bytes, int32_t tile_m, int32_t tile_n, int32_t tile_k,
                                 int32_t dma_bytes_per_cycle, int32_t dma_setup_cycles) {
  if (spad_bytes < 4 || spad_bytes % 4 != 0 || spad_bytes > CHOCOLATE_MAX_SPAD_BYTES)
    return fail(CHOCOLATE_ECONFIG, __func__, "scratchpad size %ld is not a multiple of 4 in [4, %ld]", (long)spad_bytes,
                (long)CHOCOLATE_MAX_SPAD_BYTES);
  if (tile_m < 1 || tile_n < 1 || tile_k < 1 || tile_m > CHOCOLATE_MAX_TILE || tile_n > CHOCOLATE_MAX_TILE ||
      tile_k > CHOCOLATE_MAX_TILE)
    return fail(CHOCOLATE_ECONFIG, __func__, "tile sizes %ldx%ldx%ld are not in [1, %d]", (long)tile_m, (long)tile_n,
                (long)tile_k, CHOCOLATE_MAX_TILE);
  if (dma_bytes_per_cycle < 1 || dma_setup_cycles < 0)
    return fail(CHOCOLATE_ECONFIG, __func__, "DMA bytes per cycle %ld, DMA setup cycles %ld (need >= 1, >= 0)",
                (long)dma_bytes_per_cycle, (long)dma_setup_cycles);
  if (dev.ready && (spad_bytes != dev.spad_bytes || tile_m != dev.tile_m || tile_n != dev.tile_n ||
                    tile_k != dev.tile_k || dma_bytes_per_cycle != dev.dma_bytes_per_cycle ||
                    dma_setup_cycles != dev.dma_setup_cycles))
    return fail(CHOCOLATE_ECONFIG, __func__,
                "code compiled for a %ld-byte scratchpad, %ldx%ldx%ld tiles, %ld B/cycle DMA, %ld setup cycles; "
                "the device has %ld, %ldx%ldx%ld, %ld, %ld", (long)spad_bytes, (long)tile_m, (long)tile_n,
                (long)tile_k, (long)dma_bytes_per_cycle, (long)dma_setup_cycles, (long)dev.spad_bytes,
                (long)dev.tile_m, (long)dev.tile_n, (long)dev.tile_k, (long)dev.dma_bytes_per_cycle,
                (long)dev.dma_setup_cycles);
  if (!dev.ready) { /* power-up */
    unsigned char* mem = (unsigned char*)calloc(2 * (size_t)spad_bytes, 1);
    if (mem == NULL)
      return fail(CHOCOLATE_ENOMEM, __func__, "cannot allocate a %ld-byte scratchpad model", (long)spad_bytes);
    const device powered = {.ready = 1, .spad_bytes = spad_bytes, .tile_m = tile_m, .tile_n = tile_n,
                            .tile_k = tile_k, .dma_bytes_per_cycle = dma_bytes_per_cycle,
                            .dma_setup_cycles = dma_setup_cycles, .mem = mem, .written = mem + spad_bytes};
    dev = powered;
#ifdef CHOCOLATE_COMPLETION_INTERRUPT
    core_irq_handler = on_core_completion;
#endif
    if (!report_registered && getenv("CHOCOLATE_REPORT") != NULL) report_registered = atexit(report_at_exit) == 0;
  }
  memset(dev.written, 0, (size_t)dev.spad_bytes); /* a new layer: nothing written, not configured */
  dev.layer_bytes = 0;
  free_layer();
  dev.counters.layers += 1;
  return CHOCOLATE_OK;
}

void chocolate_get_counters(chocolate_counters* out) { if (out != NULL) *out = dev.counters; }

const char* chocolate_last_error(void) { return last_error; }

void chocolate_shutdown(void) {
  free_layer();
  free(dev.mem);
  memset(&dev, 0, sizeof dev);
  core_irq_handler = NULL;
}

/* tables: int8, bias, multiplier and shift; float, the bias (or NULL).  The caller checked the
 * structs are not NULL. */
static chocolate_status configure(const char* entry, const layer* c, const void* const tables[3]) {
  if (!c->f32 && (tables[0] == NULL || tables[1] == NULL || tables[2] == NULL))
    return fail(CHOCOLATE_EINVAL, entry, "bias, multiplier or shift is NULL");
  const int32_t sizes[] = {c->rows, c->channels, c->depth, c->ih, c->iw, c->ic, c->kh, c->kw, c->ow};
  static const char* const names[] = {"rows", "channels", "depth", "ih", "iw", "ic", "kh", "kw", "ow"};
  for (int i = 0; i < 9; ++i)
    if (sizes[i] < 1) return fail(CHOCOLATE_ELAYER, entry, "%s is %ld (needs >= 1)", names[i], (long)sizes[i]);
  if (c->stride_h < 1 || c->stride_w < 1 || c->pad_top < 0 || c->pad_top >= c->kh || c->pad_left < 0 ||
      c->pad_left >= c->kw)
    return fail(CHOCOLATE_ELAYER, entry, "strides %ldx%ld, padding top %ld, left %ld (need strides >= 1, "
                "0 <= pad < the %ldx%ld window)", (long)c->stride_h, (long)c->stride_w, (long)c->pad_top,
                (long)c->pad_left, (long)c->kh, (long)c->kw);
  const int64_t taps = mul_sat(mul_sat(c->kh, c->kw), c->ic), elem = c->f32 ? 4 : 1;
  if (c->depth != taps)
    return fail(CHOCOLATE_ELAYER, entry, "depth %ld is not kh*kw*ic = %lld", (long)c->depth, (long long)taps);
  if (c->rows % c->ow != 0)
    return fail(CHOCOLATE_ELAYER, entry, "rows %ld are not whole output rows of ow %ld", (long)c->rows, (long)c->ow);
  const int64_t largest = max64(mul_sat(mul_sat(mul_sat(c->ih, c->iw), c->ic), elem),
                                mul_sat(mul_sat(max64(c->rows, c->depth), c->channels), elem));
  if (largest >= SATURATED || (uint64_t)largest > (uint64_t)PTRDIFF_MAX)
    return fail(CHOCOLATE_ELAYER, entry, "a host tensor (input, weights or output) is too large to index");
  if (!c->f32 && (c->input_zp < -128 || c->input_zp > 127 || c->output_zp < -128 || c->output_zp > 127 ||
                  c->act_min < -128 || c->act_min > c->act_max || c->act_max > 127))
    return fail(CHOCOLATE_ELAYER, entry, "zero points %ld (input), %ld (output), clamp [%ld, %ld] (need zero points "
                "in [-128, 127], -128 <= act_min <= act_max <= 127)", (long)c->input_zp, (long)c->output_zp,
                (long)c->act_min, (long)c->act_max);
  if (c->f32 && !(c->lo <= c->hi))
    return fail(CHOCOLATE_ELAYER, entry, "clamp bounds [%g, %g] (need lo <= hi, neither NaN)", (double)c->lo,
                (double)c->hi);

  /* The configuration registers: a copy of the per-channel arrays (int8: [3][channels]). */
  const int arrays = c->f32 ? (tables[0] != NULL) : 3;
  const uint64_t bytes = (uint64_t)c->channels * 4 * (uint64_t)arrays;
  unsigned char* copy = bytes > 0 && bytes <= SIZE_MAX ? (unsigned char*)malloc((size_t)bytes) : NULL;
  if (bytes > 0 && copy == NULL)
    return fail(CHOCOLATE_ENOMEM, entry, "cannot allocate %ld channels' configuration registers", (long)c->channels);
  for (int i = 0; i < arrays; ++i) memcpy(copy + (size_t)i * 4 * (size_t)c->channels, tables[i], 4 * (size_t)c->channels);
  free_layer();
  dev.conf = *c;
  if (c->f32) dev.conf.bias = (float*)copy;
  else dev.conf.table = (int32_t*)copy;
  dev.configured = 1;
  dev.counters.configure_calls += 1;
  const int64_t macs = mul_sat(mul_sat(c->rows, c->channels), c->depth), useful = dev.counters.macs_useful;
  dev.counters.macs_useful = macs > INT64_MAX - useful ? INT64_MAX : useful + macs; /* saturates */
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
  if (!dev.ready) return fail(CHOCOLATE_ENOTREADY, __func__, "the device is not powered up (chocolate_begin first)");
  if (conv == NULL || quant == NULL || per_channel == NULL)
    return fail(CHOCOLATE_EINVAL, __func__, "conv, quant or per_channel is NULL");
  layer c = layer_of(0, conv);
  c.input_zp = quant->input_zp;
  c.output_zp = quant->output_zp;
  c.act_min = quant->act_min;
  c.act_max = quant->act_max;
  const void* const tables[3] = {per_channel->bias, per_channel->multiplier, per_channel->shift};
  return configure(__func__, &c, tables);
}

chocolate_status chocolate_configure_f32(const chocolate_conv_params* conv, const chocolate_f32_params* stage) {
  if (!dev.ready) return fail(CHOCOLATE_ENOTREADY, __func__, "the device is not powered up (chocolate_begin first)");
  if (conv == NULL || stage == NULL) return fail(CHOCOLATE_EINVAL, __func__, "conv or stage is NULL");
  layer c = layer_of(1, conv);
  c.lo = stage->lo;
  c.hi = stage->hi;
  const void* const tables[3] = {stage->bias, NULL, NULL};
  return configure(__func__, &c, tables);
}

/* Powered up, the host pointer set (entries with one: host_name), configured, and (entries with
 * a tile origin: matrix) the origin (r0, c0) inside the rows x cols matrix. */
static chocolate_status check_call(const char* entry, const char* host_name, const void* host, const char* matrix, int32_t r0,
                          int32_t c0, int32_t rows, int32_t cols) {
  if (!dev.ready) return fail(CHOCOLATE_ENOTREADY, entry, "the device is not powered up (chocolate_begin first)");
  if (host_name != NULL && host == NULL) return fail(CHOCOLATE_EINVAL, entry, "%s pointer is NULL", host_name);
  if (!dev.configured)
    return fail(CHOCOLATE_ENOTCONFIGURED, entry, "no chocolate_configure_s8/_f32 since this layer began");
  if (matrix != NULL && (r0 < 0 || r0 >= rows || c0 < 0 || c0 >= cols))
    return fail(CHOCOLATE_EBOUNDS, entry, "tile origin (%ld, %ld) is outside the %ldx%ld %s matrix", (long)r0,
                (long)c0, (long)rows, (long)cols, matrix);
  return CHOCOLATE_OK;
}

/* A tile in the scratchpad: "a", "b" or "accumulator"; aligned: 4-byte words (float operands, accumulators). */
typedef struct { const char* what; int64_t addr, bytes; int aligned; } region;

static region operand(const char* what, int32_t addr, int64_t rows, int64_t cols) {
  return (region){what, addr, rows * cols * (dev.conf.f32 ? 4 : 1), dev.conf.f32};
}

static region accumulator(int32_t addr) {
  return (region){"accumulator", addr, 4 * (int64_t)dev.tile_m * dev.tile_n, 1};
}

static chocolate_status check_inside(const char* entry, region r) {
  if (r.addr < 0 || r.addr + r.bytes > dev.spad_bytes)
    return fail(CHOCOLATE_EADDR, entry, "%s tile [%lld, %lld) is not in the %ld-byte scratchpad", r.what,
                (long long)r.addr, (long long)(r.addr + r.bytes), (long)dev.spad_bytes);
  if (r.aligned && r.addr % 4 != 0)
    return fail(CHOCOLATE_EADDR, entry, "%s tile at %lld is not 4-byte aligned", r.what, (long long)r.addr);
  return CHOCOLATE_OK;
}

static chocolate_status check_apart(const char* entry, region acc, region r) {
  if (acc.addr < r.addr + r.bytes && r.addr < acc.addr + acc.bytes)
    return fail(CHOCOLATE_EOVERLAP, entry, "accumulator tile [%lld, %lld) overlaps %s tile [%lld, %lld)",
                (long long)acc.addr, (long long)(acc.addr + acc.bytes), r.what, (long long)r.addr,
                (long long)(r.addr + r.bytes));
  return CHOCOLATE_OK;
}

static chocolate_status check_written(const char* entry, region r) {
  const int64_t end = r.addr + r.bytes;
  int64_t i = r.addr;
  while (i < end && dev.written[i]) ++i;
  if (i == end) return CHOCOLATE_OK;
  int64_t j = i;
  while (j < end && !dev.written[j]) ++j; /* the first unwritten run, for the message */
  return fail(CHOCOLATE_EUNWRITTEN, entry, "reads %s bytes [%lld, %lld) of the scratchpad that nothing has written "
              "since the layer began (a missing transfer?)", r.what, (long long)i, (long long)j);
}

static void mark_written(region r) {
  for (int64_t i = r.addr; i < r.addr + r.bytes; ++i) {
    dev.layer_bytes += !dev.written[i];
    dev.written[i] = 1;
  }
  dev.counters.spad_peak_bytes = max64(dev.counters.spad_peak_bytes, dev.layer_bytes);
}

static void count_transfer(int64_t bytes) { /* bytes moved in the scratchpad */
  dev.counters.dma_cycles += dev.dma_setup_cycles + (bytes + dev.dma_bytes_per_cycle - 1) / dev.dma_bytes_per_cycle;
}

/* The host element of the im2col matrix at (m, k), or -1 for the padding value. */
static int64_t im2col_index(const layer* c, int64_t m, int64_t k) {
  if (m >= c->rows || k >= c->depth) return -1;
  const int64_t y = m / c->ow, x = m % c->ow, kx = k / c->ic % c->kw, ky = k / c->ic / c->kw;
  const int64_t iy = y * c->stride_h - c->pad_top + ky, ix = x * c->stride_w - c->pad_left + kx;
  return iy >= 0 && iy < c->ih && ix >= 0 && ix < c->iw ? (iy * c->iw + ix) * c->ic + k % c->ic : -1;
}

/* The host element of the weights at (k, n), or -1 for 0. */
static int64_t weights_index(const layer* c, int64_t k, int64_t n) {
  return k < c->depth && n < c->channels ? k * c->channels + n : -1;
}

/* The rows x cols tile at (r0, c0) of a host matrix (index() locates its elements) into dst,
 * padded with `pad` (int8) or 0.0f; only host elements actually read count as DMA bytes. */
static chocolate_status dma_in(region dst, const void* host, int64_t r0, int64_t c0, int64_t rows, int64_t cols,
                      int64_t (*index)(const layer*, int64_t, int64_t), int32_t pad) {
  const int64_t elem = dev.conf.f32 ? 4 : 1;
  unsigned char* out = dev.mem + dst.addr;
  int64_t read = 0;
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j, out += elem) {
      const int64_t at = index(&dev.conf, r0 + i, c0 + j);
      if (dev.conf.f32) store_f32(out, at < 0 ? 0.0f : ((const float*)host)[at]);
      else store_s8(out, at < 0 ? pad : ((const int8_t*)host)[at]);
      read += at >= 0;
    }
  }
  mark_written(dst);
  dev.counters.dma_in_calls += 1;
  dev.counters.dma_in_bytes += read * elem;
  count_transfer(dst.bytes);
  return CHOCOLATE_OK;
}

chocolate_status chocolate_dma_im2col(int32_t a, const void* input, int32_t m0, int32_t k0) {
  const region dst = operand("a", a, dev.tile_m, dev.tile_k);
  CHECK(check_call(__func__, "input", input, "im2col", m0, k0, dev.conf.rows, dev.conf.depth));
  CHECK(check_inside(__func__, dst));
  return dma_in(dst, input, m0, k0, dev.tile_m, dev.tile_k, im2col_index, dev.conf.input_zp);
}

chocolate_status chocolate_dma_weights(int32_t b, const void* weights, int32_t k0, int32_t n0) {
  const region dst = operand("b", b, dev.tile_k, dev.tile_n);
  CHECK(check_call(__func__, "weights", weights, "weights", k0, n0, dev.conf.depth, dev.conf.channels));
  CHECK(check_inside(__func__, dst));
  return dma_in(dst, weights, k0, n0, dev.tile_k, dev.tile_n, weights_index, 0);
}

chocolate_status chocolate_zero(int32_t acc) {
  const region r = accumulator(acc);
  CHECK(check_call(__func__, NULL, NULL, NULL, 0, 0, 0, 0));
  CHECK(check_inside(__func__, r));
  memset(dev.mem + acc, 0, (size_t)r.bytes); /* int32 0 and float +0.0f alike (IEEE 754) */
  mark_written(r);
  dev.counters.zero_calls += 1;
  return CHOCOLATE_OK;
}

/* The "hardware": acc += a . b over one tile, then DONE in the status register and, if enabled,
 * the completion interrupt. */
static void core_run(int32_t a, int32_t b, int32_t acc) {
  const int64_t tm = dev.tile_m, tn = dev.tile_n, tk = dev.tile_k;
  const unsigned char *pa = dev.mem + a, *pb = dev.mem + b;
  for (int64_t i = 0; i < tm; ++i) {
    for (int64_t n = 0; n < tn; ++n) {
      unsigned char* pc = dev.mem + acc + 4 * (i * tn + n);
      if (dev.conf.f32) {
        float s = load_f32(pc);
        for (int64_t k = 0; k < tk; ++k) s += load_f32(pa + 4 * (i * tk + k)) * load_f32(pb + 4 * (k * tn + n));
        store_f32(pc, s);
      } else {
        int64_t dot = 0; /* exact: at most 256 products of at most 2^14 */
        for (int64_t k = 0; k < tk; ++k) dot += load_s8(pa + i * tk + k) * load_s8(pb + k * tn + n);
        store_i32(pc, wrap32((uint32_t)load_i32(pc) + (uint32_t)dot)); /* the running sum wraps: a 32-bit adder */
      }
    }
  }
  core_status = CORE_DONE;
  if (core_irq_handler != NULL) core_irq_handler();
}

chocolate_status chocolate_matmul(int32_t a, int32_t b, int32_t acc) {
  const region ra = operand("a", a, dev.tile_m, dev.tile_k), rb = operand("b", b, dev.tile_k, dev.tile_n);
  const region rc = accumulator(acc);
  CHECK(check_call(__func__, NULL, NULL, NULL, 0, 0, 0, 0));
  CHECK(check_inside(__func__, ra)); CHECK(check_inside(__func__, rb)); CHECK(check_inside(__func__, rc));
  CHECK(check_apart(__func__, rc, ra)); CHECK(check_apart(__func__, rc, rb));
  CHECK(check_written(__func__, ra)); CHECK(check_written(__func__, rb)); CHECK(check_written(__func__, rc));

  core_status = CORE_BUSY; /* start */
  core_run(a, b, acc);
#ifdef CHOCOLATE_COMPLETION_INTERRUPT
  while (!core_completed) { /* sleep until the interrupt (wfi on a real chip) */
  }
  core_completed = 0;
#else
  while (core_status != CORE_DONE) { /* poll the status register */
  }
#endif
  core_status = CORE_IDLE;
  dev.counters.core_calls += 1;
  dev.counters.macs_issued += (int64_t)dev.tile_m * dev.tile_n * dev.tile_k;
  dev.counters.core_cycles += dev.tile_k;
  return CHOCOLATE_OK;
}

chocolate_status chocolate_store(void* output, int32_t acc, int32_t m0, int32_t n0) {
  const layer* c = &dev.conf;
  const region src = accumulator(acc);
  CHECK(check_call(__func__, "output", output, "output", m0, n0, c->rows, c->channels));
  CHECK(check_inside(__func__, src));
  CHECK(check_written(__func__, src));

  const int64_t channels = c->channels;
  const int64_t rows = c->rows - m0 < dev.tile_m ? c->rows - m0 : dev.tile_m;
  const int64_t cols = channels - n0 < dev.tile_n ? channels - n0 : dev.tile_n;
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      const unsigned char* pc = dev.mem + acc + 4 * (i * dev.tile_n + j);
      const int64_t n = n0 + j, at = (m0 + i) * channels + n;
      if (c->f32) {
        float v = load_f32(pc);
        if (c->bias != NULL) v += c->bias[n];
        ((float*)output)[at] = v < c->lo ? c->lo : v > c->hi ? c->hi : v;
      } else {
        const int32_t v = wrap32((uint32_t)load_i32(pc) + (uint32_t)c->table[n]);
        int64_t r = (int64_t)kit_requantize(v, c->table[channels + n], c->table[2 * channels + n]) + c->output_zp;
        r = r < c->act_min ? c->act_min : r > c->act_max ? c->act_max : r;
        ((int8_t*)output)[at] = (int8_t)r;
      }
    }
  }
  dev.counters.dma_out_calls += 1;
  dev.counters.dma_out_bytes += rows * cols * (c->f32 ? 4 : 1);
  count_transfer(src.bytes);
  return CHOCOLATE_OK;
}

/* Typed entries: the data type must be the configured layer's. */
static chocolate_status check_type(const char* entry, int f32) {
  if (dev.ready && dev.configured && dev.conf.f32 != f32)
    return fail(CHOCOLATE_EINVAL, entry, "the layer is configured for %s", dev.conf.f32 ? "float32" : "int8");
  return CHOCOLATE_OK;
}

#define TYPED(NAME, F32, CALL) \
  do {                         \
    CHECK(check_type(NAME, F32)); \
    return CALL;               \
  } while (0)

chocolate_status chocolate_dma_im2col_s8(int32_t a, int8_t* input, int32_t m0, int32_t k0) {
  TYPED(__func__, 0, chocolate_dma_im2col(a, input, m0, k0));
}
chocolate_status chocolate_dma_weights_s8(int32_t b, int8_t* weights, int32_t k0, int32_t n0) {
  TYPED(__func__, 0, chocolate_dma_weights(b, weights, k0, n0));
}
chocolate_status chocolate_store_s8(int8_t* output, int32_t acc, int32_t m0, int32_t n0) {
  TYPED(__func__, 0, chocolate_store(output, acc, m0, n0));
}
chocolate_status chocolate_dma_im2col_f32(int32_t a, float* input, int32_t m0, int32_t k0) {
  TYPED(__func__, 1, chocolate_dma_im2col(a, input, m0, k0));
}
chocolate_status chocolate_dma_weights_f32(int32_t b, float* weights, int32_t k0, int32_t n0) {
  TYPED(__func__, 1, chocolate_dma_weights(b, weights, k0, n0));
}
chocolate_status chocolate_store_f32(float* output, int32_t acc, int32_t m0, int32_t n0) {
  TYPED(__func__, 1, chocolate_store(output, acc, m0, n0));
}
