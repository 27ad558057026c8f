/* The header's _call functions are static inline: the C the Relay engine generates includes
 * strawberry.h and calls them there.  Code that only links to the library, as the Relax engine's
 * LLVM code does, needs symbols: these are the same calls, with the same arguments, under a name
 * ending in _linked. */
#include "strawberry.h"

__typeof__(strawberry_begin_call) strawberry_begin_call_linked;
__typeof__(strawberry_dma_in_call) strawberry_dma_in_call_linked;
__typeof__(strawberry_dma_out_call) strawberry_dma_out_call_linked;

int32_t strawberry_begin_call_linked(int32_t spad_bytes, int32_t dma_bytes_per_cycle, int32_t dma_setup_cycles,
                                     int32_t macs_per_cycle) {
  return strawberry_begin_call(spad_bytes, dma_bytes_per_cycle, dma_setup_cycles, macs_per_cycle);
}

int32_t strawberry_dma_in_call_linked(int32_t spad_addr, float* host, int32_t ext0, int32_t ext1, int32_t ext2,
                                      int32_t stride0, int32_t stride1, int32_t stride2, int32_t start0,
                                      int32_t start1, int32_t start2, int32_t n0, int32_t n1, int32_t n2) {
  return strawberry_dma_in_call(spad_addr, host, ext0, ext1, ext2, stride0, stride1, stride2, start0, start1, start2,
                                n0, n1, n2);
}

int32_t strawberry_dma_out_call_linked(float* host, int32_t spad_addr, int32_t ext0, int32_t ext1, int32_t ext2,
                                       int32_t stride0, int32_t stride1, int32_t stride2, int32_t start0,
                                       int32_t start1, int32_t start2, int32_t n0, int32_t n1, int32_t n2) {
  return strawberry_dma_out_call(host, spad_addr, ext0, ext1, ext2, stride0, stride1, stride2, start0, start1, start2,
                                 n0, n1, n2);
}

#define STRAWBERRY_CONV_LINKED(NAME)                                                                           \
  __typeof__(NAME) NAME##_linked;                                                                              \
  int32_t NAME##_linked(int32_t ifmap, int32_t weights, int32_t bias, int32_t residual, int32_t slope,          \
                        int32_t ofmap, int32_t ih, int32_t iw, int32_t ic, int32_t oh, int32_t ow, int32_t oc,  \
                        int32_t kh, int32_t kw, int32_t stride_h, int32_t stride_w, float lo, float hi,         \
                        int32_t accumulate) {                                                                   \
    return NAME(ifmap, weights, bias, residual, slope, ofmap, ih, iw, ic, oh, ow, oc, kh, kw, stride_h, stride_w, \
                lo, hi, accumulate);                                                                            \
  }
STRAWBERRY_CONV_LINKED(strawberry_conv2d_nchw_call)
STRAWBERRY_CONV_LINKED(strawberry_conv2d_nhwc_call)
STRAWBERRY_CONV_LINKED(strawberry_depthwise_conv2d_nchw_call)
STRAWBERRY_CONV_LINKED(strawberry_depthwise_conv2d_nhwc_call)
#undef STRAWBERRY_CONV_LINKED
