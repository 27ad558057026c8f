/* What the files of Chocolate's hardware model share (not part of the API): the one device and
 * its configured layer, the error line, scratchpad words and the checks of scratchpad tiles. */
#ifndef CHOCOLATE_INTERNAL_H_
#define CHOCOLATE_INTERNAL_H_

#include <stdint.h>
#include <string.h>

#include "chocolate.h"

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
  int patch_set;                       /* the input patch (chocolate_dma_patch) and where it is */
  int32_t patch_addr, patch_iy0, patch_rows;
  chocolate_counters counters;
} device;

extern device chocolate_dev; /* the model's one device (chocolate_device.c) */

/* Records and prints "chocolate: ENTRY: MESSAGE (CHOCOLATE_CODE)"; returns code. */
chocolate_status chocolate_fail(chocolate_status code, const char* entry, const char* format, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Returns the status of a failed check from the calling entry. */
#define CHECK(check) do { const chocolate_status status_ = (check); if (status_ != CHOCOLATE_OK) return status_; } while (0)

static inline int64_t mul_sat(int64_t a, int64_t b) { return a == 0 || b == 0 ? 0 : a > SATURATED / b ? SATURATED : a * b; }

static inline int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* The int32 a two's-complement adder holds as u (no implementation-defined conversion). */
static inline int32_t wrap32(uint32_t u) { return u <= INT32_MAX ? (int32_t)u : -(int32_t)~u - 1; }

/* Scratchpad words, by memcpy: no alignment or aliasing assumptions. */
static inline float load_f32(const unsigned char* p) { float v; memcpy(&v, p, 4); return v; }
static inline int32_t load_i32(const unsigned char* p) { int32_t v; memcpy(&v, p, 4); return v; }
static inline int32_t load_s8(const unsigned char* p) { int8_t v; memcpy(&v, p, 1); return v; }
static inline void store_f32(unsigned char* p, float v) { memcpy(p, &v, 4); }
static inline void store_s8(unsigned char* p, int32_t v) { const int8_t b = (int8_t)v; memcpy(p, &b, 1); } /* v fits */
static inline void store_i32(unsigned char* p, int32_t v) { memcpy(p, &v, 4); }

/* A tile in the scratchpad: "a", "b" or "accumulator"; aligned: 4-byte words (float operands, accumulators). */
typedef struct { const char* what; int64_t addr, bytes; int aligned; } region;

static inline region operand(const char* what, int32_t addr, int64_t rows, int64_t cols) {
  return (region){what, addr, rows * cols * (chocolate_dev.conf.f32 ? 4 : 1), chocolate_dev.conf.f32};
}

static inline region accumulator(int32_t addr) {
  return (region){"accumulator", addr, 4 * (int64_t)chocolate_dev.tile_m * chocolate_dev.tile_n, 1};
}

/* Powered up, the host pointer set (entries with one: host_name), configured, and (entries with
 * a tile origin: matrix) the origin (r0, c0) inside the rows x cols matrix. */
chocolate_status chocolate_check_call(const char* entry, const char* host_name, const void* host, const char* matrix,
                                      int32_t r0, int32_t c0, int32_t rows, int32_t cols);
chocolate_status chocolate_check_inside(const char* entry, region r);
chocolate_status chocolate_check_apart(const char* entry, region acc, region r);
chocolate_status chocolate_check_written(const char* entry, region r);
void chocolate_mark_written(region r);
void chocolate_count_transfer(int64_t bytes); /* bytes moved in the scratchpad */
/* Typed entries: the data type must be the configured layer's. */
chocolate_status chocolate_check_type(const char* entry, int f32);
void chocolate_free_layer(void);
/* Built with -DCHOCOLATE_RTL (python -m tvm_extension.mlf run --device rtl): the core's RTL runs
 * beside the model, every scratchpad write mirrored into it, every int8 core call run on it and
 * compared (uma_chocolate/rtl/chocolate_rtl.cpp). */
#ifdef CHOCOLATE_RTL
#include <stdio.h>
void chocolate_rtl_power_up(void);
void chocolate_rtl_layer(void); /* a layer begins (chocolate_begin) */
void chocolate_rtl_write(int64_t addr, int64_t bytes);
void chocolate_rtl_zero(int32_t acc);
void chocolate_rtl_matmul(int32_t a, int32_t b, int32_t acc);
void chocolate_rtl_store(int32_t acc, int32_t m0, int32_t n0, const int8_t* output);
void chocolate_rtl_report(FILE* out);
#endif
/* The core's completion at power-up and power-down (chocolate_core.c). */
void chocolate_core_power_up(void);
void chocolate_core_power_down(void);

#endif /* CHOCOLATE_INTERNAL_H_ */
