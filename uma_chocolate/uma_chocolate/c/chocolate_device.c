/* Chocolate's hardware model: the device (power-up, counters, report, error line) and the
 * checks every entry makes.  Strict where hardware would silently compute garbage: every
 * scratchpad byte has a "written" flag (cleared when a layer begins) and reading an unwritten
 * byte fails.  Every entry checks all its arguments first, in the order of the header's codes, so
 * an error changes nothing (no scratchpad or host byte, no counter) and the lowest applicable code
 * comes back.  Past the checks nothing overflows: indices are 64-bit, products of sizes saturate
 * at 2^62 (far above anything indexable).  The layer's configuration: chocolate_configure.c; the
 * DMA: chocolate_dma.c; the matrix core: chocolate_core.c. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chocolate_internal.h"

device chocolate_dev;
static char last_error[320];
static int report_registered;

static const char* code_name(chocolate_status code) {
  static const char* const names[] = {"OK",     "ENOTREADY",      "ECONFIG", "ENOMEM", "EINVAL",   "ELAYER",
                                      "ENOTCONFIGURED", "EBOUNDS", "EADDR",  "EOVERLAP", "EUNWRITTEN", "EPATCH"};
  return (size_t)code < sizeof names / sizeof names[0] ? names[code] : "E?";
}

chocolate_status chocolate_fail(chocolate_status code, const char* entry, const char* format, ...) {
  char message[224];
  va_list args;
  va_start(args, format);
  vsnprintf(message, sizeof message, format, args);
  va_end(args);
  snprintf(last_error, sizeof last_error, "chocolate: %s: %s (CHOCOLATE_%s)", entry, message, code_name(code));
  fprintf(stderr, "%s\n", last_error);
  return code;
}

static void report_to(FILE* out) {
  static const char* const keys[] = {
      "spad_bytes", "tile_m", "tile_n", "tile_k", "dma_bytes_per_cycle", "dma_setup_cycles", "layers",
      "configure_calls", "core_calls", "zero_calls", "macs_issued", "macs_useful", "dma_in_calls", "dma_out_calls",
      "dma_in_bytes", "dma_out_bytes", "dma_cycles", "core_cycles", "spad_peak_bytes", "dma_local_calls"};
  const chocolate_counters* c = &chocolate_dev.counters;
  const int64_t values[] = {
      chocolate_dev.spad_bytes, chocolate_dev.tile_m, chocolate_dev.tile_n, chocolate_dev.tile_k, chocolate_dev.dma_bytes_per_cycle, chocolate_dev.dma_setup_cycles, c->layers,
      c->configure_calls, c->core_calls, c->zero_calls, c->macs_issued, c->macs_useful, c->dma_in_calls,
      c->dma_out_calls, c->dma_in_bytes, c->dma_out_bytes, c->dma_cycles, c->core_cycles, c->spad_peak_bytes,
      c->dma_local_calls};
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; ++i)
    fprintf(out, "chocolate.%s: %lld\n", keys[i], (long long)values[i]);
#ifdef CHOCOLATE_RTL
  chocolate_rtl_report(out);
#endif
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

void chocolate_free_layer(void) {
  free(chocolate_dev.conf.table);
  free(chocolate_dev.conf.bias);
  memset(&chocolate_dev.conf, 0, sizeof chocolate_dev.conf);
  chocolate_dev.configured = 0;
  chocolate_dev.patch_set = 0;
}

chocolate_status chocolate_begin(int32_t spad_bytes, int32_t tile_m, int32_t tile_n, int32_t tile_k,
                                 int32_t dma_bytes_per_cycle, int32_t dma_setup_cycles) {
  if (spad_bytes < 4 || spad_bytes % 4 != 0 || spad_bytes > CHOCOLATE_MAX_SPAD_BYTES)
    return chocolate_fail(CHOCOLATE_ECONFIG, __func__, "scratchpad size %ld is not a multiple of 4 in [4, %ld]", (long)spad_bytes,
                (long)CHOCOLATE_MAX_SPAD_BYTES);
  if (tile_m < 1 || tile_n < 1 || tile_k < 1 || tile_m > CHOCOLATE_MAX_TILE || tile_n > CHOCOLATE_MAX_TILE ||
      tile_k > CHOCOLATE_MAX_TILE)
    return chocolate_fail(CHOCOLATE_ECONFIG, __func__, "tile sizes %ldx%ldx%ld are not in [1, %d]", (long)tile_m, (long)tile_n,
                (long)tile_k, CHOCOLATE_MAX_TILE);
  if (dma_bytes_per_cycle < 1 || dma_setup_cycles < 0)
    return chocolate_fail(CHOCOLATE_ECONFIG, __func__, "DMA bytes per cycle %ld, DMA setup cycles %ld (need >= 1, >= 0)",
                (long)dma_bytes_per_cycle, (long)dma_setup_cycles);
  if (chocolate_dev.ready && (spad_bytes != chocolate_dev.spad_bytes || tile_m != chocolate_dev.tile_m || tile_n != chocolate_dev.tile_n ||
                    tile_k != chocolate_dev.tile_k || dma_bytes_per_cycle != chocolate_dev.dma_bytes_per_cycle ||
                    dma_setup_cycles != chocolate_dev.dma_setup_cycles))
    return chocolate_fail(CHOCOLATE_ECONFIG, __func__,
                "code compiled for a %ld-byte scratchpad, %ldx%ldx%ld tiles, %ld B/cycle DMA, %ld setup cycles; "
                "the device has %ld, %ldx%ldx%ld, %ld, %ld", (long)spad_bytes, (long)tile_m, (long)tile_n,
                (long)tile_k, (long)dma_bytes_per_cycle, (long)dma_setup_cycles, (long)chocolate_dev.spad_bytes,
                (long)chocolate_dev.tile_m, (long)chocolate_dev.tile_n, (long)chocolate_dev.tile_k, (long)chocolate_dev.dma_bytes_per_cycle,
                (long)chocolate_dev.dma_setup_cycles);
  if (!chocolate_dev.ready) { /* power-up */
    unsigned char* mem = (unsigned char*)calloc(2 * (size_t)spad_bytes, 1);
    if (mem == NULL)
      return chocolate_fail(CHOCOLATE_ENOMEM, __func__, "cannot allocate a %ld-byte scratchpad model", (long)spad_bytes);
    const device powered = {.ready = 1, .spad_bytes = spad_bytes, .tile_m = tile_m, .tile_n = tile_n,
                            .tile_k = tile_k, .dma_bytes_per_cycle = dma_bytes_per_cycle,
                            .dma_setup_cycles = dma_setup_cycles, .mem = mem, .written = mem + spad_bytes};
    chocolate_dev = powered;
    chocolate_core_power_up();
#ifdef CHOCOLATE_RTL
    chocolate_rtl_power_up();
#endif
    if (!report_registered && getenv("CHOCOLATE_REPORT") != NULL) report_registered = atexit(report_at_exit) == 0;
  }
  memset(chocolate_dev.written, 0, (size_t)chocolate_dev.spad_bytes); /* a new layer: nothing written, not configured */
  chocolate_dev.layer_bytes = 0;
  chocolate_free_layer();
  chocolate_dev.counters.layers += 1;
#ifdef CHOCOLATE_RTL
  chocolate_rtl_layer();
#endif
  return CHOCOLATE_OK;
}

void chocolate_get_counters(chocolate_counters* out) { if (out != NULL) *out = chocolate_dev.counters; }

const char* chocolate_last_error(void) { return last_error; }

void chocolate_shutdown(void) {
  chocolate_free_layer();
  free(chocolate_dev.mem);
  memset(&chocolate_dev, 0, sizeof chocolate_dev);
  chocolate_core_power_down();
}

chocolate_status chocolate_check_call(const char* entry, const char* host_name, const void* host, const char* matrix, int32_t r0,
                          int32_t c0, int32_t rows, int32_t cols) {
  if (!chocolate_dev.ready) return chocolate_fail(CHOCOLATE_ENOTREADY, entry, "the device is not powered up (chocolate_begin first)");
  if (host_name != NULL && host == NULL) return chocolate_fail(CHOCOLATE_EINVAL, entry, "%s pointer is NULL", host_name);
  if (!chocolate_dev.configured)
    return chocolate_fail(CHOCOLATE_ENOTCONFIGURED, entry, "no chocolate_configure_s8/_f32 since this layer began");
  if (matrix != NULL && (r0 < 0 || r0 >= rows || c0 < 0 || c0 >= cols))
    return chocolate_fail(CHOCOLATE_EBOUNDS, entry, "tile origin (%ld, %ld) is outside the %ldx%ld %s matrix", (long)r0,
                (long)c0, (long)rows, (long)cols, matrix);
  return CHOCOLATE_OK;
}

chocolate_status chocolate_check_inside(const char* entry, region r) {
  if (r.addr < 0 || r.addr + r.bytes > chocolate_dev.spad_bytes)
    return chocolate_fail(CHOCOLATE_EADDR, entry, "%s tile [%lld, %lld) is not in the %ld-byte scratchpad", r.what,
                (long long)r.addr, (long long)(r.addr + r.bytes), (long)chocolate_dev.spad_bytes);
  if (r.aligned && r.addr % 4 != 0)
    return chocolate_fail(CHOCOLATE_EADDR, entry, "%s tile at %lld is not 4-byte aligned", r.what, (long long)r.addr);
  return CHOCOLATE_OK;
}

chocolate_status chocolate_check_apart(const char* entry, region acc, region r) {
  if (acc.addr < r.addr + r.bytes && r.addr < acc.addr + acc.bytes)
    return chocolate_fail(CHOCOLATE_EOVERLAP, entry, "%s tile [%lld, %lld) overlaps %s tile [%lld, %lld)",
                acc.what, (long long)acc.addr, (long long)(acc.addr + acc.bytes), r.what, (long long)r.addr,
                (long long)(r.addr + r.bytes));
  return CHOCOLATE_OK;
}

chocolate_status chocolate_check_written(const char* entry, region r) {
  const int64_t end = r.addr + r.bytes;
  int64_t i = r.addr;
  while (i < end && chocolate_dev.written[i]) ++i;
  if (i == end) return CHOCOLATE_OK;
  int64_t j = i;
  while (j < end && !chocolate_dev.written[j]) ++j; /* the first unwritten run, for the message */
  return chocolate_fail(CHOCOLATE_EUNWRITTEN, entry, "reads %s bytes [%lld, %lld) of the scratchpad that nothing has written "
              "since the layer began (a missing transfer?)", r.what, (long long)i, (long long)j);
}

void chocolate_mark_written(region r) {
  for (int64_t i = r.addr; i < r.addr + r.bytes; ++i) {
    chocolate_dev.layer_bytes += !chocolate_dev.written[i];
    chocolate_dev.written[i] = 1;
  }
  chocolate_dev.counters.spad_peak_bytes = max64(chocolate_dev.counters.spad_peak_bytes, chocolate_dev.layer_bytes);
#ifdef CHOCOLATE_RTL
  chocolate_rtl_write(r.addr, r.bytes);
#endif
}

void chocolate_count_transfer(int64_t bytes) {
  chocolate_dev.counters.dma_cycles += chocolate_dev.dma_setup_cycles + (bytes + chocolate_dev.dma_bytes_per_cycle - 1) / chocolate_dev.dma_bytes_per_cycle;
}

chocolate_status chocolate_check_type(const char* entry, int f32) {
  if (chocolate_dev.ready && chocolate_dev.configured && chocolate_dev.conf.f32 != f32)
    return chocolate_fail(CHOCOLATE_EINVAL, entry, "the layer is configured for %s", chocolate_dev.conf.f32 ? "float32" : "int8");
  return CHOCOLATE_OK;
}
