/* QVanilla's packed entries, one call per layer, for the per-layer benchmark and the kernel tests on
 * the boards (uma_qvanilla/layers.py writes the layers and reads what this prints).
 *
 *     program LAYERS OUT
 *
 * LAYERS holds records of int32 little-endian words: the header below (KIND: 0 the packed entry, 1
 * the depthwise one, 2 the packed8 one), then the input (int8), the packed weights (int16; int8 for
 * packed8) and the table (int32: folded bias, multiplier, shift rows of oc), each
 * padded to 4 bytes.  Each layer is called twice through what generated code calls, with its scratch
 * painted with two patterns first: the outputs must not depend on what the scratch held.  The first
 * call's output goes to OUT and a line "layer: STATUS TICKS USED SAME" to stdout: TICKS the
 * SysTick ticks around the first call (instructions under QEMU's -icount), USED the scratch bytes
 * either call wrote (the last byte found changed), SAME 1 if both outputs are equal.
 * On the boards the files are the host's (semihosting); built for the host, the same program runs
 * the portable C (TICKS: nanoseconds of the first call). */
#define _POSIX_C_SOURCE 199309L /* clock_gettime, on the host */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qvanilla_calls.h"

#if defined(__arm__)
uint64_t board_ticks(void); /* tvm_extension.mlf.board's start-up code (c_runtime/board/startup.c) */
#else
#include <time.h>
static uint64_t board_ticks(void) { /* on the host: nanoseconds */
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}
#endif

enum { KIND, IH, IW, IC, OH, OW, OC, KH, KW, SH, SW, PT, PL, IZP, OZP, AMIN, AMAX, ROUNDING, SCRATCH, WEIGHTS,
       HEADER };

/* -DLAYERS_WEIGHTS_OFFSET=2: every weights block 2 bytes past a word boundary (int16 alignment, all
 * the API asks for), as a caller's own buffer may be; the compiler's constants are 16-byte aligned. */
#ifndef LAYERS_WEIGHTS_OFFSET
#define LAYERS_WEIGHTS_OFFSET 0
#endif

static size_t padded(size_t bytes) { return (bytes + 3) / 4 * 4; }

/* The next block of the file, `offset` bytes into a new allocation (free the allocation: *base). */
static void* read_block(FILE* f, size_t bytes, size_t offset, void** base) {
  unsigned char* p = malloc(padded(bytes) + 4 + offset); /* never 0 bytes */
  if (p == NULL || fread(p, 1, padded(bytes), f) != padded(bytes)) {
    fprintf(stderr, "error: the layers file ends early or memory ran out\n");
    exit(2);
  }
  /* moved by bytes: newlib's memcpy (which fread uses) takes unaligned words on parts that trap them */
  volatile unsigned char* moved = p + offset;
  for (size_t i = padded(bytes); offset > 0 && i-- > 0;) moved[i] = p[i];
  *base = p;
  return p + offset;
}

static int32_t call(const int32_t* h, int8_t* in, void* w, int32_t* table, int8_t* out, int8_t* scratch) {
  if (h[KIND] == 2) {
    return qvanilla_conv2d_nhwc_packed8_s8(in, w, table, out, scratch, h[SCRATCH], h[IH], h[IW], h[IC], h[OH], h[OW],
                                           h[OC], h[KH], h[KW], h[SH], h[SW], h[PT], h[PL], h[IZP], h[OZP], h[AMIN],
                                           h[AMAX], h[ROUNDING]);
  }
  if (h[KIND] == 1) {
    return qvanilla_depthwise_conv2d_nhwc_packed_s8(in, w, table, out, scratch, h[SCRATCH], h[IH], h[IW], h[IC],
                                                    h[OH], h[OW], h[KH], h[KW], h[SH], h[SW], h[PT], h[PL], h[IZP],
                                                    h[OZP], h[AMIN], h[AMAX], h[ROUNDING]);
  }
  return qvanilla_conv2d_nhwc_packed_s8(in, w, table, out, scratch, h[SCRATCH], h[IH], h[IW], h[IC], h[OH], h[OW],
                                        h[OC], h[KH], h[KW], h[SH], h[SW], h[PT], h[PL], h[IZP], h[OZP], h[AMIN],
                                        h[AMAX], h[ROUNDING]);
}

/* The bytes of scratch[0 .. size) up to the last one that is not `paint`. */
static size_t written(const unsigned char* scratch, size_t size, unsigned char paint) {
  while (size > 0 && scratch[size - 1] == paint) --size;
  return size;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: program LAYERS OUT\n");
    return 2;
  }
  FILE* f = fopen(argv[1], "rb");
  FILE* o = fopen(argv[2], "wb");
  if (f == NULL || o == NULL) {
    fprintf(stderr, "error: cannot open %s or %s\n", argv[1], argv[2]);
    return 2;
  }
  int32_t h[HEADER];
  while (fread(h, sizeof(int32_t), HEADER, f) == HEADER) {
    const size_t in_bytes = (size_t)h[IH] * h[IW] * h[IC], out_bytes = (size_t)h[OH] * h[OW] * h[OC];
    const size_t scratch_bytes = (size_t)h[SCRATCH];
    void *in_base, *w_base, *table_base;
    int8_t* in = read_block(f, in_bytes, 0, &in_base);
    void* w = read_block(f, (size_t)h[WEIGHTS] * (h[KIND] == 2 ? 1 : sizeof(int16_t)), LAYERS_WEIGHTS_OFFSET, &w_base);
    int32_t* table = read_block(f, 3 * (size_t)h[OC] * sizeof(int32_t), 0, &table_base);
    int8_t* out[2] = {malloc(out_bytes + 1), malloc(out_bytes + 1)};
    unsigned char* scratch = malloc(scratch_bytes + 8); /* malloc's alignment: 8 bytes on both */
    if (out[0] == NULL || out[1] == NULL || scratch == NULL) {
      fprintf(stderr, "error: out of memory\n");
      return 2;
    }
    const unsigned char paint[2] = {0xA5, 0x5A};
    int32_t status[2];
    uint64_t ticks = 0;
    size_t used = 0;
    for (int i = 0; i < 2; ++i) {
      memset(scratch, paint[i], scratch_bytes);
      memset(out[i], 0, out_bytes);
      const uint64_t before = board_ticks();
      status[i] = call(h, in, w, table, out[i], (int8_t*)scratch);
      if (i == 0) ticks = board_ticks() - before;
      const size_t n = written(scratch, scratch_bytes, paint[i]);
      used = n > used ? n : used;
    }
    const int same = status[0] == status[1] && memcmp(out[0], out[1], out_bytes) == 0;
    printf("layer: %ld %llu %lu %d\n", (long)status[0], (unsigned long long)ticks, (unsigned long)used, same);
    if (fwrite(out[0], 1, out_bytes, o) != out_bytes) {
      fprintf(stderr, "error: cannot write %s\n", argv[2]);
      return 2;
    }
    free(in_base);
    free(w_base);
    free(table_base);
    free(out[0]);
    free(out[1]);
    free(scratch);
  }
  fclose(f);
  fclose(o);
  return 0;
}
