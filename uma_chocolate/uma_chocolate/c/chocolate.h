/* Chocolate: a small matrix core (tile_m x tile_n x tile_k, int8 with int32 accumulators, or
 * float32) behind a scratchpad of its own, fed by a DMA engine.  The compiler decomposes each
 * layer into a GEMM (rows = output pixels, channels = output channels, depth = kh*kw*ic, the
 * im2col view of an NHWC conv) and calls the core once per tile; the loops around the calls
 * are the compiler's.
 *
 * Per layer:
 *
 *   chocolate_begin(config)                      power-up / check configuration; scratchpad forgotten
 *   chocolate_configure_s8(...) or _f32(...)     the layer's shape, im2col geometry, output stage
 *   for each output tile (m0, n0):
 *     chocolate_zero(acc)
 *     for each depth tile k0:
 *       chocolate_dma_im2col_s8(a, input, m0, k0)   a tile_m x tile_k tile of the im2col matrix
 *       chocolate_dma_weights_s8(b, weights, k0, n0)  a tile_k x tile_n tile of the weights
 *       chocolate_matmul(a, b, acc)              acc += a . b, start, wait for completion
 *     chocolate_store_s8(output, acc, m0, n0)    output stage on the way out to host memory
 *
 * (the _f32 entries for a float layer; the untyped chocolate_dma_im2col/_weights/_store behind
 * them take either)
 *
 * Scratchpad addresses are byte offsets.  A tiles are row-major [tile_m][tile_k], B tiles
 * [tile_k][tile_n], accumulators [tile_m][tile_n] (int32 or float, 4 bytes each); operands are
 * int8 (1 byte) or float (4 bytes) as configured.  Every scratchpad byte has a "written" flag,
 * cleared by chocolate_begin: the core and chocolate_store refuse to read bytes nothing has
 * written since (CHOCOLATE_EUNWRITTEN), so a missing transfer cannot pass silently.
 *
 * Completion: chocolate_matmul starts the core and waits, by polling the status register
 * (default) or, built with -DCHOCOLATE_COMPLETION_INTERRUPT, by sleeping until the completion
 * callback fires.  The compiler sees neither. */
#ifndef CHOCOLATE_H_
#define CHOCOLATE_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CHOCOLATE_OK 0
#define CHOCOLATE_ENOTREADY 1      /* no chocolate_begin yet */
#define CHOCOLATE_ECONFIG 2        /* bad configuration, or not the one the device powered up with */
#define CHOCOLATE_ENOMEM 3         /* the scratchpad model cannot be allocated */
#define CHOCOLATE_EINVAL 4         /* NULL host pointer, unknown data type */
#define CHOCOLATE_ELAYER 5         /* bad layer shape, geometry or clamp in configure */
#define CHOCOLATE_ENOTCONFIGURED 6 /* a transfer or core call before this layer's configure */
#define CHOCOLATE_EBOUNDS 7        /* a tile origin outside the layer's matrices */
#define CHOCOLATE_EADDR 8          /* a scratchpad region outside the scratchpad or misaligned */
#define CHOCOLATE_EOVERLAP 9       /* the accumulator tile overlaps an operand tile */
#define CHOCOLATE_EUNWRITTEN 10    /* reads scratchpad bytes nothing has written since begin */

#define CHOCOLATE_MAX_SPAD_BYTES (1 << 30)
#define CHOCOLATE_MAX_TILE 256

/* Power-up (first call) or check that the code was compiled for this device (later calls:
 * CHOCOLATE_ECONFIG if any value differs); then a new layer begins: every written flag is
 * cleared and the layer must be configured again.  spad_bytes a multiple of 4 in
 * [4, CHOCOLATE_MAX_SPAD_BYTES], tile sizes in [1, CHOCOLATE_MAX_TILE], rates >= 1, setup >= 0. */
int32_t chocolate_begin(int32_t spad_bytes, int32_t tile_m, int32_t tile_n, int32_t tile_k,
                        int32_t dma_bytes_per_cycle, int32_t dma_setup_cycles);

/* The layer, int8: a GEMM of rows x channels x depth where rows = oh * ow output pixels,
 * depth = kh * kw * ic, over an NHWC input [ih][iw][ic] (batch 1) with the given window,
 * strides and top/left padding (the im2col element (m, k) with m = y * ow + x and
 * k = (ky * kw + kx) * ic + c reads input[y * stride_h - pad_top + ky][x * stride_w - pad_left + kx][c],
 * input_zp where that lies outside the image).  channel_table is read here (configuration
 * registers): int32 [3][channels] rows of bias, multiplier, shift; the output stage of
 * channel n is
 *   clamp(output_zp + requant(acc + bias[n], multiplier[n], shift[n]), act_min, act_max)
 * with TVM's qnn.requantize rounding (kit_requantize, kit_requantize.h).  -128 <= act_min <= act_max <= 127. */
int32_t chocolate_configure_s8(int32_t rows, int32_t channels, int32_t depth, int32_t ih, int32_t iw, int32_t ic,
                               int32_t kh, int32_t kw, int32_t stride_h, int32_t stride_w, int32_t pad_top,
                               int32_t pad_left, int32_t ow, int32_t input_zp, int32_t* channel_table,
                               int32_t output_zp, int32_t act_min, int32_t act_max);

/* The layer, float: as above with float operands, padding 0, and the output stage
 * clamp(acc + bias[n], lo, hi); bias may be NULL (no bias).  lo <= hi, neither NaN. */
int32_t chocolate_configure_f32(int32_t rows, int32_t channels, int32_t depth, int32_t ih, int32_t iw, int32_t ic,
                                int32_t kh, int32_t kw, int32_t stride_h, int32_t stride_w, int32_t pad_top,
                                int32_t pad_left, int32_t ow, float* bias, float lo, float hi);

/* DMA, host -> scratchpad: the tile_m x tile_k tile of the im2col matrix at (m0, k0), gathered
 * from the host input (int8 or float as configured), row-major at `a`.  Elements past rows or
 * depth and elements in the padding get the padding value (input_zp, or 0). m0 in [0, rows),
 * k0 in [0, depth), else CHOCOLATE_EBOUNDS. */
int32_t chocolate_dma_im2col(int32_t a, const void* input, int32_t m0, int32_t k0);

/* DMA, host -> scratchpad: the tile_k x tile_n tile at (k0, n0) of the host weights
 * [depth][channels] (row-major), at `b`; elements past depth or channels are 0. */
int32_t chocolate_dma_weights(int32_t b, const void* weights, int32_t k0, int32_t n0);

/* The core: accumulators at `acc` (tile_m x tile_n) set to 0. */
int32_t chocolate_zero(int32_t acc);

/* The core: acc += a . b over a full tile (int8 x int8 -> int32, or float); start, then wait
 * for completion. */
int32_t chocolate_matmul(int32_t a, int32_t b, int32_t acc);

/* DMA, scratchpad -> host, through the output stage: the accumulator tile at `acc` for output
 * tile (m0, n0) written to the host output [rows][channels] (int8 or float), the part inside
 * rows x channels only. */
int32_t chocolate_store(void* output, int32_t acc, int32_t m0, int32_t n0);

/* The entries compiled code calls: the three with a host tensor, typed (TVM's C code generator
 * declares every extern it calls with the exact pointer types it passes).  Each refuses a
 * layer configured for the other data type (CHOCOLATE_EINVAL). */
int32_t chocolate_dma_im2col_s8(int32_t a, int8_t* input, int32_t m0, int32_t k0);
int32_t chocolate_dma_weights_s8(int32_t b, int8_t* weights, int32_t k0, int32_t n0);
int32_t chocolate_store_s8(int8_t* output, int32_t acc, int32_t m0, int32_t n0);
int32_t chocolate_dma_im2col_f32(int32_t a, float* input, int32_t m0, int32_t k0);
int32_t chocolate_dma_weights_f32(int32_t b, float* weights, int32_t k0, int32_t n0);
int32_t chocolate_store_f32(float* output, int32_t acc, int32_t m0, int32_t n0);

/* What the device has done since power-up. */
typedef struct {
  int64_t layers;          /* chocolate_begin calls */
  int64_t configure_calls;
  int64_t core_calls;      /* chocolate_matmul calls */
  int64_t zero_calls;
  int64_t macs_issued;     /* tile_m * tile_n * tile_k per core call */
  int64_t macs_useful;     /* rows * channels * depth per configured layer */
  int64_t dma_in_calls, dma_out_calls;
  int64_t dma_in_bytes;    /* host bytes read (padding and tile fill excluded) */
  int64_t dma_out_bytes;   /* host bytes written */
  int64_t dma_cycles;      /* per transfer: setup + ceil(scratchpad bytes moved / bytes per cycle) */
  int64_t core_cycles;     /* per core call: tile_k (one row of MACs per cycle, a systolic array) */
  int64_t spad_peak_bytes; /* most scratchpad bytes one layer has written */
} chocolate_counters;

void chocolate_get_counters(chocolate_counters* out); /* zeros before power-up; NULL ignored */
void chocolate_report(void);                          /* "chocolate.KEY: VALUE" lines on stderr */
const char* chocolate_last_error(void);               /* "" if none */
void chocolate_shutdown(void);                        /* frees the model; the next begin powers up */

#ifdef __cplusplus
}
#endif

#endif /* CHOCOLATE_H_ */
