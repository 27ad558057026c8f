/* What the files of Strawberry's hardware model share (not part of the API): the one device,
 * its error line, saturating arithmetic and the scratchpad's written flags. */
#ifndef STRAWBERRY_INTERNAL_H_
#define STRAWBERRY_INTERNAL_H_

#include <stdint.h>

#include "strawberry.h"

/* Products of extents saturate here: far above any scratchpad, far below INT64_MAX. */
#define SATURATED ((int64_t)1 << 40)

typedef struct {
  int ready;
  int32_t spad_bytes, dma_bytes_per_cycle, dma_setup_cycles, macs_per_cycle;
  float* mem;              /* spad_bytes / 4 elements */
  unsigned char* written;  /* one state per element: UNWRITTEN, WRITTEN or PARTIAL (below) */
  void* engine_buf;        /* the conv engine's working memory (its own, not the scratchpad's) */
  int32_t engine_bytes;
  float* sums;             /* a chunk's sums before they are added to the partial sums (model memory) */
  int64_t sums_elems;
  int64_t layer_bytes;     /* scratchpad bytes written since the layer began */
  strawberry_counters counters;
} device;

extern device strawberry_dev; /* the model's one device (strawberry_device.c) */

/* Records and prints "strawberry: ENTRY: MESSAGE (CODE)"; returns code. */
strawberry_status strawberry_fail(strawberry_status code, const char* entry, const char* format, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static inline int64_t mul_sat(int64_t a, int64_t b) { /* a, b >= 0 */
  if (a == 0 || b == 0) return 0;
  return a > SATURATED / b ? SATURATED : a * b;
}

static inline int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* A scratchpad region an entry reads or writes. */
typedef struct {
  const char* what;
  int64_t addr, bytes; /* bytes == 0: no region (STRAWBERRY_NONE) */
} region;

/* What a scratchpad element holds since the layer began. */
enum { UNWRITTEN = 0, WRITTEN = 1, PARTIAL = 2 /* partial sums of a conv split along its input channels */ };

/* STRAWBERRY_EADDR unless [addr, addr + bytes) lies in the scratchpad and addr is a multiple of 4. */
strawberry_status strawberry_check_inside(const char* entry, region r);
/* STRAWBERRY_EUNWRITTEN unless every element of the region is written. */
strawberry_status strawberry_check_written(const char* entry, region r);
/* STRAWBERRY_EPARTIAL if an element of the region holds partial sums (read as data). */
strawberry_status strawberry_check_no_partial(const char* entry, region r);
/* STRAWBERRY_EPARTIAL unless every element of the region holds partial sums. */
strawberry_status strawberry_check_partial(const char* entry, region r);
/* The region's elements written (and the counters of scratchpad use updated). */
void strawberry_mark_written(region r);
/* The same, the elements holding partial sums. */
void strawberry_mark_partial(region r);
int strawberry_overlaps(region a, region b);

#endif /* STRAWBERRY_INTERNAL_H_ */
