/* Strawberry's hardware model: the device (configuration, counters, report, error line) and the
 * scratchpad's written flags.  The model is strict where real hardware would silently compute
 * garbage: every scratchpad element has a "written" flag, set by a transfer into it or a
 * computation writing it and cleared when a layer begins; reading an element whose flag is clear
 * fails (STRAWBERRY_EUNWRITTEN) with a message on stderr.  The DMA: strawberry_dma.c; the conv
 * engine: strawberry_conv.c. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strawberry_internal.h"

device strawberry_dev;
static char last_error[320];
static int report_registered;

static const char* code_name(strawberry_status code) {
  static const char* const names[] = {
      "STRAWBERRY_OK",     "STRAWBERRY_ENOTREADY", "STRAWBERRY_ECONFIG",    "STRAWBERRY_ENOMEM",
      "STRAWBERRY_EINVAL", "STRAWBERRY_ESIZE",     "STRAWBERRY_ESTRIDE",    "STRAWBERRY_EWINDOW",
      "STRAWBERRY_ECLAMP", "STRAWBERRY_EHOST",     "STRAWBERRY_EADDR",      "STRAWBERRY_EUNWRITTEN",
      "STRAWBERRY_EOVERLAP", "STRAWBERRY_EENGINE", "STRAWBERRY_EPARTIAL"};
  return (size_t)code < sizeof names / sizeof names[0] ? names[code] : "STRAWBERRY_E?";
}

strawberry_status strawberry_fail(strawberry_status code, const char* entry, const char* format, ...) {
  char message[224];
  va_list args;
  va_start(args, format);
  vsnprintf(message, sizeof message, format, args);
  va_end(args);
  snprintf(last_error, sizeof last_error, "strawberry: %s: %s (%s)", entry, message, code_name(code));
  fprintf(stderr, "%s\n", last_error);
  return code;
}


/* ------------------------------------------------------------------------------------------ */
/* Configuration */

static strawberry_status check_config(const char* entry, int32_t spad_bytes, int32_t bpc, int32_t setup, int32_t macs) {
  if (spad_bytes < 4 || spad_bytes % 4 != 0 || spad_bytes > STRAWBERRY_MAX_SPAD_BYTES)
    return strawberry_fail(STRAWBERRY_ECONFIG, entry, "scratchpad size %ld is not a multiple of 4 in [4, %ld]",
                (long)spad_bytes, (long)STRAWBERRY_MAX_SPAD_BYTES);
  if (bpc < 1 || setup < 0 || macs < 1)
    return strawberry_fail(STRAWBERRY_ECONFIG, entry,
                "DMA bytes per cycle %ld, DMA setup cycles %ld, MACs per cycle %ld (need >= 1, >= 0, >= 1)",
                (long)bpc, (long)setup, (long)macs);
  return STRAWBERRY_OK;
}

static void report_to(FILE* out) {
  const strawberry_counters* c = &strawberry_dev.counters;
  fprintf(out, "strawberry.spad_bytes: %ld\n", (long)strawberry_dev.spad_bytes);
  fprintf(out, "strawberry.dma_bytes_per_cycle: %ld\n", (long)strawberry_dev.dma_bytes_per_cycle);
  fprintf(out, "strawberry.dma_setup_cycles: %ld\n", (long)strawberry_dev.dma_setup_cycles);
  fprintf(out, "strawberry.macs_per_cycle: %ld\n", (long)strawberry_dev.macs_per_cycle);
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
    return strawberry_fail(STRAWBERRY_ENOMEM, "strawberry_init", "cannot allocate a %ld-byte scratchpad model", (long)spad_bytes);
  }
  strawberry_shutdown();
  strawberry_dev.ready = 1;
  strawberry_dev.spad_bytes = spad_bytes;
  strawberry_dev.dma_bytes_per_cycle = dma_bytes_per_cycle;
  strawberry_dev.dma_setup_cycles = dma_setup_cycles;
  strawberry_dev.macs_per_cycle = macs_per_cycle;
  strawberry_dev.mem = mem;
  strawberry_dev.written = written;
  if (!report_registered && getenv("STRAWBERRY_REPORT") != NULL) {
    report_registered = 1;
    atexit(report_at_exit);
  }
  return STRAWBERRY_OK;
}

strawberry_status strawberry_begin(int32_t spad_bytes, int32_t dma_bytes_per_cycle, int32_t dma_setup_cycles,
                                   int32_t macs_per_cycle) {
  if (!strawberry_dev.ready) {
    const strawberry_status status = strawberry_init(spad_bytes, dma_bytes_per_cycle, dma_setup_cycles, macs_per_cycle);
    if (status != STRAWBERRY_OK) return status;
  } else {
    const strawberry_status status =
        check_config("strawberry_begin", spad_bytes, dma_bytes_per_cycle, dma_setup_cycles, macs_per_cycle);
    if (status != STRAWBERRY_OK) return status;
    if (spad_bytes != strawberry_dev.spad_bytes || dma_bytes_per_cycle != strawberry_dev.dma_bytes_per_cycle ||
        dma_setup_cycles != strawberry_dev.dma_setup_cycles || macs_per_cycle != strawberry_dev.macs_per_cycle)
      return strawberry_fail(STRAWBERRY_ECONFIG, "strawberry_begin",
                  "code compiled for a %ld-byte scratchpad, %ld B/cycle DMA, %ld setup cycles, %ld MACs/cycle; "
                  "the device has %ld, %ld, %ld, %ld",
                  (long)spad_bytes, (long)dma_bytes_per_cycle, (long)dma_setup_cycles, (long)macs_per_cycle,
                  (long)strawberry_dev.spad_bytes, (long)strawberry_dev.dma_bytes_per_cycle, (long)strawberry_dev.dma_setup_cycles,
                  (long)strawberry_dev.macs_per_cycle);
  }
  memset(strawberry_dev.written, 0, (size_t)strawberry_dev.spad_bytes / 4);
  strawberry_dev.layer_bytes = 0;
  strawberry_dev.counters.layers += 1;
  return STRAWBERRY_OK;
}

void strawberry_get_counters(strawberry_counters* out) {
  if (out != NULL) *out = strawberry_dev.counters;
}

int32_t strawberry_spad_bytes(void) { return strawberry_dev.ready ? strawberry_dev.spad_bytes : 0; }

const char* strawberry_last_error(void) { return last_error; }

void strawberry_shutdown(void) {
  free(strawberry_dev.mem);
  free(strawberry_dev.written);
  free(strawberry_dev.engine_buf);
  free(strawberry_dev.sums);
  memset(&strawberry_dev, 0, sizeof strawberry_dev);
}

/* ------------------------------------------------------------------------------------------ */
/* Scratchpad regions */


strawberry_status strawberry_check_inside(const char* entry, region r) {
  if (r.addr < 0 || r.addr % 4 != 0 || r.addr + r.bytes > strawberry_dev.spad_bytes) {
    if (r.bytes >= SATURATED)
      return strawberry_fail(STRAWBERRY_EADDR, entry, "%s region is larger than the %ld-byte scratchpad", r.what,
                  (long)strawberry_dev.spad_bytes);
    return strawberry_fail(STRAWBERRY_EADDR, entry, "%s region [%lld, %lld) is not in the %ld-byte scratchpad%s", r.what,
                (long long)r.addr, (long long)(r.addr + r.bytes), (long)strawberry_dev.spad_bytes,
                r.addr >= 0 && r.addr % 4 != 0 ? " (address not a multiple of 4)" : "");
  }
  return STRAWBERRY_OK;
}

strawberry_status strawberry_check_written(const char* entry, region r) {
  const int64_t first = r.addr / 4, end = (r.addr + r.bytes) / 4;
  for (int64_t i = first; i < end; ++i) {
    if (!strawberry_dev.written[i]) {
      int64_t j = i;
      while (j < end && !strawberry_dev.written[j]) ++j;
      return strawberry_fail(STRAWBERRY_EUNWRITTEN, entry,
                  "reads %s bytes [%lld, %lld) of the scratchpad that nothing has written since the layer began "
                  "(a missing transfer?)",
                  r.what, (long long)(i * 4), (long long)(j * 4));
    }
  }
  return STRAWBERRY_OK;
}

/* The first element of [first, end) that holds partial sums (partial = 1) or does not (0), or -1. */
static int64_t first_where(int64_t first, int64_t end, int partial) {
  for (int64_t i = first; i < end; ++i)
    if ((strawberry_dev.written[i] == PARTIAL) == partial) return i;
  return -1;
}

strawberry_status strawberry_check_no_partial(const char* entry, region r) {
  const int64_t i = first_where(r.addr / 4, (r.addr + r.bytes) / 4, 1);
  if (i < 0) return STRAWBERRY_OK;
  return strawberry_fail(STRAWBERRY_EPARTIAL, entry,
                         "reads %s bytes of the scratchpad from %lld that hold partial sums (the last input-channel "
                         "chunk is not computed yet)", r.what, (long long)(i * 4));
}

strawberry_status strawberry_check_partial(const char* entry, region r) {
  const int64_t i = first_where(r.addr / 4, (r.addr + r.bytes) / 4, 0);
  if (i < 0) return STRAWBERRY_OK;
  return strawberry_fail(STRAWBERRY_EPARTIAL, entry,
                         "adds to %s bytes of the scratchpad from %lld that hold no partial sums (STRAWBERRY_ACC_ADD "
                         "without an earlier STRAWBERRY_ACC_PARTIAL)", r.what, (long long)(i * 4));
}

static void mark(region r, unsigned char state) {
  const int64_t first = r.addr / 4, end = (r.addr + r.bytes) / 4;
  for (int64_t i = first; i < end; ++i) {
    strawberry_dev.layer_bytes += strawberry_dev.written[i] ? 0 : 4;
    strawberry_dev.written[i] = state;
  }
  strawberry_dev.counters.spad_peak_bytes = max64(strawberry_dev.counters.spad_peak_bytes, strawberry_dev.layer_bytes);
  strawberry_dev.counters.spad_high_water = max64(strawberry_dev.counters.spad_high_water, r.addr + r.bytes);
}

void strawberry_mark_written(region r) { mark(r, WRITTEN); }

void strawberry_mark_partial(region r) { mark(r, PARTIAL); }

int strawberry_overlaps(region a, region b) {
  return a.bytes > 0 && b.bytes > 0 && a.addr < b.addr + b.bytes && b.addr < a.addr + a.bytes;
}
