/* The header's _call functions are static inline: the C the Relay engine generates includes
 * chocolate.h and calls them there.  Code that only links to the library, as the Relax engine's
 * LLVM code does, needs symbols: these are the same calls, with the same arguments, under a name
 * ending in _linked. */
#include "chocolate.h"

#define CHOCOLATE_LINKED(ENTRY, PARAMS, ARGS) \
  __typeof__(ENTRY##_call) ENTRY##_call_linked;  \
  int32_t ENTRY##_call_linked PARAMS { return ENTRY##_call ARGS; }
CHOCOLATE_LINKED(chocolate_begin, (int32_t spad_bytes, int32_t tile_m, int32_t tile_n, int32_t tile_k,
                                   int32_t dma_bytes_per_cycle, int32_t dma_setup_cycles),
                 (spad_bytes, tile_m, tile_n, tile_k, dma_bytes_per_cycle, dma_setup_cycles))
CHOCOLATE_LINKED(chocolate_zero, (int32_t acc), (acc))
CHOCOLATE_LINKED(chocolate_matmul, (int32_t a, int32_t b, int32_t acc), (a, b, acc))
CHOCOLATE_LINKED(chocolate_dma_im2col_s8, (int32_t a, int8_t* input, int32_t m0, int32_t k0), (a, input, m0, k0))
CHOCOLATE_LINKED(chocolate_dma_weights_s8, (int32_t b, int8_t* weights, int32_t k0, int32_t n0), (b, weights, k0, n0))
CHOCOLATE_LINKED(chocolate_store_s8, (int8_t* output, int32_t acc, int32_t m0, int32_t n0), (output, acc, m0, n0))
CHOCOLATE_LINKED(chocolate_dma_im2col_f32, (int32_t a, float* input, int32_t m0, int32_t k0), (a, input, m0, k0))
CHOCOLATE_LINKED(chocolate_dma_weights_f32, (int32_t b, float* weights, int32_t k0, int32_t n0), (b, weights, k0, n0))
CHOCOLATE_LINKED(chocolate_store_f32, (float* output, int32_t acc, int32_t m0, int32_t n0), (output, acc, m0, n0))
CHOCOLATE_LINKED(chocolate_dma_patch_s8, (int32_t p, int8_t* input, int32_t iy0, int32_t rows), (p, input, iy0, rows))
CHOCOLATE_LINKED(chocolate_dma_patch_f32, (int32_t p, float* input, int32_t iy0, int32_t rows), (p, input, iy0, rows))
CHOCOLATE_LINKED(chocolate_im2col_patch, (int32_t a, int32_t p, int32_t m0, int32_t k0), (a, p, m0, k0))
CHOCOLATE_LINKED(chocolate_configure_s8,
                 (int32_t rows, int32_t channels, int32_t depth, int32_t ih, int32_t iw, int32_t ic, int32_t kh,
                  int32_t kw, int32_t stride_h, int32_t stride_w, int32_t pad_top, int32_t pad_left, int32_t ow,
                  int32_t input_zp, int32_t* channel_table, int32_t output_zp, int32_t act_min, int32_t act_max),
                 (rows, channels, depth, ih, iw, ic, kh, kw, stride_h, stride_w, pad_top, pad_left, ow, input_zp,
                  channel_table, output_zp, act_min, act_max))
CHOCOLATE_LINKED(chocolate_configure_f32,
                 (int32_t rows, int32_t channels, int32_t depth, int32_t ih, int32_t iw, int32_t ic, int32_t kh,
                  int32_t kw, int32_t stride_h, int32_t stride_w, int32_t pad_top, int32_t pad_left, int32_t ow,
                  float* bias, float lo, float hi),
                 (rows, channels, depth, ih, iw, ic, kh, kw, stride_h, stride_w, pad_top, pad_left, ow, bias, lo, hi))
#undef CHOCOLATE_LINKED
