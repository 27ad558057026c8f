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
 * or, to read each input row once instead of once per window that covers it: the input rows
 * the tiles need brought in once (chocolate_dma_patch_s8(p, input, iy0, rows): the whole input,
 * or the band of rows of a panel of output pixels), and each A tile gathered on chip from them
 * (chocolate_im2col_patch(a, p, m0, k0): no host byte moves).
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
 * callback fires.  The compiler sees neither.
 *
 * The API a hardware team implements is the one below: the layer's configuration takes `const`
 * structs ((h, w) order; the int8 requantization per channel as CMSIS-NN's).  The generated C
 * cannot build a struct, so it calls the `static inline` packing functions at the end of this
 * header (chocolate_configure_s8_call, chocolate_configure_f32_call): each fills the structs on
 * its stack from plain integers and calls the entry. */
#ifndef CHOCOLATE_H_
#define CHOCOLATE_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  CHOCOLATE_OK = 0,
  CHOCOLATE_ENOTREADY = 1,      /* no chocolate_begin yet */
  CHOCOLATE_ECONFIG = 2,        /* bad configuration, or not the one the device powered up with */
  CHOCOLATE_ENOMEM = 3,         /* the scratchpad model cannot be allocated */
  CHOCOLATE_EINVAL = 4,         /* NULL host pointer or parameters struct, unknown data type */
  CHOCOLATE_ELAYER = 5,         /* bad layer shape, geometry or clamp in configure */
  CHOCOLATE_ENOTCONFIGURED = 6, /* a transfer or core call before this layer's configure */
  CHOCOLATE_EBOUNDS = 7,        /* a tile origin outside the layer's matrices */
  CHOCOLATE_EADDR = 8,          /* a scratchpad region outside the scratchpad or misaligned */
  CHOCOLATE_EOVERLAP = 9,       /* the accumulator tile overlaps an operand tile */
  CHOCOLATE_EUNWRITTEN = 10,    /* reads scratchpad bytes nothing has written since begin */
  CHOCOLATE_EPATCH = 11         /* an on-chip im2col without the input patch its windows read */
} chocolate_status;

#define CHOCOLATE_MAX_SPAD_BYTES (1 << 30)
#define CHOCOLATE_MAX_TILE 256

/* Power-up (first call) or check that the code was compiled for this device (later calls:
 * CHOCOLATE_ECONFIG if any value differs); then a new layer begins: every written flag is
 * cleared and the layer must be configured again.  spad_bytes a multiple of 4 in
 * [4, CHOCOLATE_MAX_SPAD_BYTES], tile sizes in [1, CHOCOLATE_MAX_TILE], rates >= 1, setup >= 0. */
chocolate_status chocolate_begin(int32_t spad_bytes, int32_t tile_m, int32_t tile_n, int32_t tile_k,
                                 int32_t dma_bytes_per_cycle, int32_t dma_setup_cycles);

typedef struct {
  int32_t h, w;
} chocolate_hw;

typedef struct {
  int32_t h, w, c;
} chocolate_dims;

/* The layer: a GEMM of rows x channels x depth where rows = oh * ow output pixels,
 * depth = kh * kw * ic, over an NHWC input [ih][iw][ic] (batch 1) with the given window,
 * strides and top/left padding (the im2col element (m, k) with m = y * ow + x and
 * k = (ky * kw + kx) * ic + c reads input[y * stride.h - padding.h + ky][x * stride.w - padding.w + kx][c],
 * the padding value where that lies outside the image). */
typedef struct {
  int32_t rows, channels, depth;
  chocolate_dims input;
  chocolate_hw kernel, stride;
  chocolate_hw padding; /* top, left: 0 <= padding < kernel */
  int32_t ow;           /* output width: rows / ow output rows */
} chocolate_conv_params;

/* int8: zero points and the output's clamp, -128 <= act_min <= act_max <= 127. */
typedef struct {
  int32_t input_zp, output_zp;
  int32_t act_min, act_max;
} chocolate_quant_params;

/* int8, per output channel (CMSIS-NN's per-channel quantization, with the bias): each [channels]. */
typedef struct {
  const int32_t* bias;
  const int32_t* multiplier;
  const int32_t* shift;
} chocolate_per_channel_quant_params;

/* float: the output stage's bias ([channels], or NULL: no bias) and clamp (lo <= hi, neither NaN). */
typedef struct {
  const float* bias;
  float lo, hi;
} chocolate_f32_params;

/* The layer, int8.  The per-channel arrays are read here (configuration registers); the output
 * stage of channel n is
 *   clamp(output_zp + requant(acc + bias[n], multiplier[n], shift[n]), act_min, act_max)
 * with TVM's qnn.requantize rounding (kit_requantize, kit_requantize.h); the padding value is
 * input_zp.  Checked in this order: powered up, no NULL struct or array, the layer. */
chocolate_status chocolate_configure_s8(const chocolate_conv_params* conv, const chocolate_quant_params* quant,
                                        const chocolate_per_channel_quant_params* per_channel);

/* The layer, float: as above with float operands, padding value 0, and the output stage
 * clamp(acc + bias[n], lo, hi). */
chocolate_status chocolate_configure_f32(const chocolate_conv_params* conv, const chocolate_f32_params* stage);

/* DMA, host -> scratchpad: the tile_m x tile_k tile of the im2col matrix at (m0, k0), gathered
 * from the host input (int8 or float as configured), row-major at `a`.  Elements past rows or
 * depth and elements in the padding get the padding value (input_zp, or 0). m0 in [0, rows),
 * k0 in [0, depth), else CHOCOLATE_EBOUNDS. */
chocolate_status chocolate_dma_im2col(int32_t a, const void* input, int32_t m0, int32_t k0);

/* DMA, host -> scratchpad: the input rows [iy0, iy0 + rows), every column and channel, row-major
 * [rows][iw][ic] at `p` (int8 or float as configured): the input patch.  The device keeps where
 * it is (p, iy0, rows) for chocolate_im2col_patch, until the next patch, configure or begin.
 * 0 <= iy0, rows >= 1, iy0 + rows <= ih, else CHOCOLATE_EBOUNDS. */
chocolate_status chocolate_dma_patch(int32_t p, const void* input, int32_t iy0, int32_t rows);

/* On chip, scratchpad -> scratchpad (no host byte moves): the tile_m x tile_k tile of the
 * im2col matrix at (m0, k0), as chocolate_dma_im2col makes it, gathered from the input patch at
 * `p`, row-major at `a`.  CHOCOLATE_EPATCH: the last patch is not at p, or an element of the tile
 * lies in an input row outside it; the tile must not overlap the patch (CHOCOLATE_EOVERLAP). */
chocolate_status chocolate_im2col_patch(int32_t a, int32_t p, int32_t m0, int32_t k0);

/* DMA, host -> scratchpad: the tile_k x tile_n tile at (k0, n0) of the host weights
 * [depth][channels] (row-major), at `b`; elements past depth or channels are 0. */
chocolate_status chocolate_dma_weights(int32_t b, const void* weights, int32_t k0, int32_t n0);

/* The core: accumulators at `acc` (tile_m x tile_n) set to 0. */
chocolate_status chocolate_zero(int32_t acc);

/* The core: acc += a . b over a full tile (int8 x int8 -> int32, or float); start, then wait
 * for completion. */
chocolate_status chocolate_matmul(int32_t a, int32_t b, int32_t acc);

/* DMA, scratchpad -> host, through the output stage: the accumulator tile at `acc` for output
 * tile (m0, n0) written to the host output [rows][channels] (int8 or float), the part inside
 * rows x channels only. */
chocolate_status chocolate_store(void* output, int32_t acc, int32_t m0, int32_t n0);

/* The three entries with a host tensor, typed, for compiled code (TVM's C code generator
 * declares every extern it calls with the exact pointer types it passes; it calls them through
 * their packing functions below).  Each refuses a layer configured for the other data type
 * (CHOCOLATE_EINVAL). */
chocolate_status chocolate_dma_im2col_s8(int32_t a, int8_t* input, int32_t m0, int32_t k0);
chocolate_status chocolate_dma_weights_s8(int32_t b, int8_t* weights, int32_t k0, int32_t n0);
chocolate_status chocolate_store_s8(int8_t* output, int32_t acc, int32_t m0, int32_t n0);
chocolate_status chocolate_dma_im2col_f32(int32_t a, float* input, int32_t m0, int32_t k0);
chocolate_status chocolate_dma_weights_f32(int32_t b, float* weights, int32_t k0, int32_t n0);
chocolate_status chocolate_store_f32(float* output, int32_t acc, int32_t m0, int32_t n0);
chocolate_status chocolate_dma_patch_s8(int32_t p, int8_t* input, int32_t iy0, int32_t rows);
chocolate_status chocolate_dma_patch_f32(int32_t p, float* input, int32_t iy0, int32_t rows);

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
  int64_t dma_local_calls; /* on-chip gathers (chocolate_im2col_patch; their cycles in dma_cycles) */
} chocolate_counters;

void chocolate_get_counters(chocolate_counters* out); /* zeros before power-up; NULL ignored */
void chocolate_report(void);                          /* "chocolate.KEY: VALUE" lines on stderr */
const char* chocolate_last_error(void);               /* "" if none */
void chocolate_shutdown(void);                        /* frees the model; the next begin powers up */

/* ------------------------------------------------------------------------------------------ */
/* Packing functions, one per entry the generated code calls (TIR cannot build a C struct, and
 * TVM declares every function it calls as returning int32_t): plain integers in, the structs
 * filled on the stack, the entry called, its status returned as an int32_t.  channel_table is
 * [3][channels]: bias, multiplier, shift. */

#define CHOCOLATE_CALL(ENTRY, PARAMS, ARGS) \
  static inline int32_t ENTRY##_call PARAMS { return (int32_t)ENTRY ARGS; }
CHOCOLATE_CALL(chocolate_begin, (int32_t spad_bytes, int32_t tile_m, int32_t tile_n, int32_t tile_k,
                                 int32_t dma_bytes_per_cycle, int32_t dma_setup_cycles),
               (spad_bytes, tile_m, tile_n, tile_k, dma_bytes_per_cycle, dma_setup_cycles))
CHOCOLATE_CALL(chocolate_zero, (int32_t acc), (acc))
CHOCOLATE_CALL(chocolate_matmul, (int32_t a, int32_t b, int32_t acc), (a, b, acc))
CHOCOLATE_CALL(chocolate_dma_im2col_s8, (int32_t a, int8_t* input, int32_t m0, int32_t k0), (a, input, m0, k0))
CHOCOLATE_CALL(chocolate_dma_weights_s8, (int32_t b, int8_t* weights, int32_t k0, int32_t n0), (b, weights, k0, n0))
CHOCOLATE_CALL(chocolate_store_s8, (int8_t* output, int32_t acc, int32_t m0, int32_t n0), (output, acc, m0, n0))
CHOCOLATE_CALL(chocolate_dma_im2col_f32, (int32_t a, float* input, int32_t m0, int32_t k0), (a, input, m0, k0))
CHOCOLATE_CALL(chocolate_dma_weights_f32, (int32_t b, float* weights, int32_t k0, int32_t n0), (b, weights, k0, n0))
CHOCOLATE_CALL(chocolate_store_f32, (float* output, int32_t acc, int32_t m0, int32_t n0), (output, acc, m0, n0))
CHOCOLATE_CALL(chocolate_dma_patch_s8, (int32_t p, int8_t* input, int32_t iy0, int32_t rows), (p, input, iy0, rows))
CHOCOLATE_CALL(chocolate_dma_patch_f32, (int32_t p, float* input, int32_t iy0, int32_t rows), (p, input, iy0, rows))
CHOCOLATE_CALL(chocolate_im2col_patch, (int32_t a, int32_t p, int32_t m0, int32_t k0), (a, p, m0, k0))
#undef CHOCOLATE_CALL

static inline int32_t chocolate_configure_s8_call(int32_t rows, int32_t channels, int32_t depth, int32_t ih,
                                                  int32_t iw, int32_t ic, int32_t kh, int32_t kw, int32_t stride_h,
                                                  int32_t stride_w, int32_t pad_top, int32_t pad_left, int32_t ow,
                                                  int32_t input_zp, int32_t* channel_table, int32_t output_zp,
                                                  int32_t act_min, int32_t act_max) {
  const chocolate_conv_params conv = {rows, channels, depth, {ih, iw, ic}, {kh, kw}, {stride_h, stride_w},
                                      {pad_top, pad_left}, ow};
  const chocolate_quant_params quant = {input_zp, output_zp, act_min, act_max};
  /* No arithmetic on a NULL table; with channels < 1 the entry refuses the layer before reading it. */
  const int32_t step = channel_table != NULL && channels > 0 ? channels : 0;
  const chocolate_per_channel_quant_params per_channel = {channel_table, channel_table + step,
                                                          channel_table + 2 * (int64_t)step};
  return (int32_t)chocolate_configure_s8(&conv, &quant, &per_channel);
}

static inline int32_t chocolate_configure_f32_call(int32_t rows, int32_t channels, int32_t depth, int32_t ih,
                                                   int32_t iw, int32_t ic, int32_t kh, int32_t kw, int32_t stride_h,
                                                   int32_t stride_w, int32_t pad_top, int32_t pad_left, int32_t ow,
                                                   float* bias, float lo, float hi) {
  const chocolate_conv_params conv = {rows, channels, depth, {ih, iw, ic}, {kh, kw}, {stride_h, stride_w},
                                      {pad_top, pad_left}, ow};
  const chocolate_f32_params stage = {bias, lo, hi};
  return (int32_t)chocolate_configure_f32(&conv, &stage);
}

#ifdef __cplusplus
}
#endif

#endif /* CHOCOLATE_H_ */
