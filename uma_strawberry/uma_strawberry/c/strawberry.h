/* Strawberry accelerator: C API of a host model of the hardware.
 *
 * Strawberry is Vanilla's Conv2D engine (the kit's, kit_conv_f32.h) behind a scratchpad of its
 * own: the engine reads and writes only the scratchpad, and a DMA engine moves tiles between
 * host memory and it.  A compiled layer therefore looks like
 *
 *     strawberry_begin(configuration);                    once per layer
 *     strawberry_dma_in(weights); strawberry_dma_in(ifmap tile);
 *     strawberry_conv2d_nchw(&addrs, &params);            compute on scratchpad addresses
 *     strawberry_dma_out(ofmap tile);                      (repeated per tile)
 *
 * Scratchpad addresses are byte offsets from the scratchpad's start (int32_t, multiples of 4:
 * every element is a float32).  The model keeps, per scratchpad element, whether a transfer or
 * a computation has written it since the layer began: reading anything else is an error, so a
 * compiler that forgets a transfer is caught instead of computing on stale data.
 *
 * Every entry returns STRAWBERRY_OK or one of the codes below; on an error it changed nothing
 * (no scratchpad or host byte, no counter) and printed one line on stderr:
 *     strawberry: <entry>: <what is wrong> (STRAWBERRY_E...)
 * (also kept for strawberry_last_error()).  When several things are wrong, the code listed
 * first here comes back.
 *
 * The API a hardware team implements is the one below: the transfers and the engine take
 * `const` structs (a tile; the operands' addresses and the layer's sizes, (h, w) order).  The
 * generated C cannot build a struct, so it calls the `static inline` packing functions at the
 * end of this header (strawberry_dma_in_call, strawberry_conv2d_nchw_call, ...): each fills the
 * structs on its stack from plain integers and calls the entry. */
#ifndef STRAWBERRY_H_
#define STRAWBERRY_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  STRAWBERRY_OK = 0,
  STRAWBERRY_ENOTREADY = 1,   /* a transfer or computation before strawberry_init/strawberry_begin */
  STRAWBERRY_ECONFIG = 2,     /* a bad configuration (scratchpad size not a positive multiple of 4 or above
                               * STRAWBERRY_MAX_SPAD_BYTES, a rate below 1), or strawberry_begin with another
                               * configuration than the device has: the code was compiled for another chip */
  STRAWBERRY_ENOMEM = 3,      /* the host could not allocate the scratchpad model */
  STRAWBERRY_EINVAL = 4,      /* a NULL host pointer, tile, address or parameters struct */
  STRAWBERRY_ESIZE = 5,       /* a tile, tensor, channel, kernel or output extent below 1; a depthwise conv's
                               * input and output channels differ */
  STRAWBERRY_ESTRIDE = 6,     /* a negative host stride (DMA) or a convolution stride below 1 */
  STRAWBERRY_EWINDOW = 7,     /* the window does not fit the input tile: (oh-1)*stride_h + kh > ih, or the same in w */
  STRAWBERRY_ECLAMP = 8,      /* lo > hi, or a NaN bound */
  STRAWBERRY_EHOST = 9,       /* dma_out: the tile is not inside the host tensor; or a host tensor too large to index */
  STRAWBERRY_EADDR = 10,      /* a scratchpad region outside the scratchpad, or an address not a multiple of 4 */
  STRAWBERRY_EUNWRITTEN = 11, /* reads scratchpad elements nothing has written since the layer began */
  STRAWBERRY_EOVERLAP = 12,   /* a computation's output region overlaps one of its input regions */
  STRAWBERRY_EENGINE = 13,    /* the conv engine refused the layer (the kit engine's status in the message) */
  STRAWBERRY_EPARTIAL = 14    /* partial sums misused: an accumulate value other than the flags below, or set on
                               * a depthwise conv; STRAWBERRY_ACC_ADD onto an ofmap region not holding partial
                               * sums; partial sums read as data (dma_out, or an input of a computation) */
} strawberry_status;

/* Largest scratchpad the model simulates (1 GiB). */
#define STRAWBERRY_MAX_SPAD_BYTES (1 << 30)

/* No tensor: pass as the bias, residual or slope address of a computation to leave it out. */
#define STRAWBERRY_NONE (-1)

/* (Re)initialise the device: a scratchpad of spad_bytes bytes (its contents unwritten), the
 * DMA's rate (bytes per cycle) and set-up cost (cycles per transfer), the engine's MACs per
 * cycle (used by the counters' cycle estimates); all counters cleared.  If the environment
 * variable STRAWBERRY_REPORT is set at the first initialisation, the counters are printed at
 * exit: on stderr for "1", else appended to the file it names. */
strawberry_status strawberry_init(int32_t spad_bytes, int32_t dma_bytes_per_cycle, int32_t dma_setup_cycles,
                                  int32_t macs_per_cycle);

/* What every compiled layer calls first.  On a device not yet initialised: strawberry_init with
 * this configuration (the mock's power-on).  On an initialised one: STRAWBERRY_ECONFIG unless the
 * configuration is the same.  Then the whole scratchpad counts as unwritten: nothing a previous
 * layer left there may be read.  Counters go on counting (layers counts the calls). */
strawberry_status strawberry_begin(int32_t spad_bytes, int32_t dma_bytes_per_cycle, int32_t dma_setup_cycles,
                                   int32_t macs_per_cycle);

/* A 3-D tile of a host tensor of float32, dimensions outermost first (NCHW: c, h, w; NHWC:
 * h, w, c).  The host tensor has extents extent[0..2], element (i0, i1, i2) at
 * host[i0*stride[0] + i1*stride[1] + i2*stride[2]] (strides in elements, >= 0).  The tile is the
 * size[0] x size[1] x size[2] box starting at start[0..2] of that tensor; it may reach outside
 * (starts may be negative): those elements are zeros (padding), no host byte is read for them.
 * In the scratchpad it is dense: element (j0, j1, j2) at spad_addr + 4*((j0*size[1] + j1)*size[2] + j2). */
typedef struct {
  int32_t extent[3];
  int32_t stride[3];
  int32_t start[3];
  int32_t size[3];
} strawberry_tile;

/* Host memory -> scratchpad: the tile at spad_addr. */
strawberry_status strawberry_dma_in(int32_t spad_addr, const float* host, const strawberry_tile* tile);

/* Scratchpad -> host memory: the tile lying inside the host tensor (STRAWBERRY_EHOST otherwise),
 * the scratchpad region entirely written (STRAWBERRY_EUNWRITTEN), with no partial sums
 * (STRAWBERRY_EPARTIAL). */
strawberry_status strawberry_dma_out(float* host, int32_t spad_addr, const strawberry_tile* tile);

typedef struct {
  int32_t h, w;
} strawberry_hw;

/* A feature-map tile in the scratchpad (the engine has no batch). */
typedef struct {
  int32_t h, w, c;
} strawberry_dims;

/* Scratchpad byte addresses of a computation's operands; bias, residual and slope may be
 * STRAWBERRY_NONE. */
typedef struct {
  int32_t ifmap, weights, bias, residual, slope, ofmap;
} strawberry_conv_addrs;

/* strawberry_conv_params.accumulate: a dense conv whose input channels do not fit the scratchpad
 * at once is computed one chunk of input channels per call, the partial sums kept in the ofmap
 * region (float32).  0: the whole reduction, then the output stage (one call, the usual case). */
#define STRAWBERRY_ACC_ADD 1     /* add this chunk's sums to the partial sums the ofmap region holds */
#define STRAWBERRY_ACC_PARTIAL 2 /* more chunks follow: leave partial sums there, no output stage */
/* So: first chunk STRAWBERRY_ACC_PARTIAL, middle ones STRAWBERRY_ACC_ADD | STRAWBERRY_ACC_PARTIAL, last
 * STRAWBERRY_ACC_ADD (which applies the output stage to the total).  Partial sums are not data: only a
 * later STRAWBERRY_ACC_ADD may read them (STRAWBERRY_EPARTIAL otherwise). */

/* A layer's tile: sizes, window, strides, the output stage's clamp, the partial sums. */
typedef struct {
  strawberry_dims input;  /* the input tile as the DMA padded it (c: this call's input channels) */
  strawberry_dims output; /* c: the output channels */
  strawberry_hw kernel;
  strawberry_hw stride;
  float lo, hi;
  int32_t accumulate;     /* 0, or STRAWBERRY_ACC_* flags (above) */
} strawberry_conv_params;

/* The conv engine on scratchpad tiles (the kit's, see kit_conv_f32.h): a "valid"
 * convolution of an input tile that the DMA has already padded, then the output stage
 *     v = conv + bias[o] + residual;  v = v < 0 ? slope[o] * v : v;  out = clamp(v, lo, hi).
 *   nchw: ifmap [ic][ih][iw], residual and ofmap [oc][oh][ow];
 *   nhwc: ifmap [ih][iw][ic], residual and ofmap [oh][ow][oc];
 *   weights [oc][ic][kh][kw], bias and slope [oc]; all float32 at the given scratchpad addresses.
 * Output (y, x) reads input rows y*stride.h + 0..kernel.h-1, columns x*stride.w + 0..kernel.w-1.
 * With params->accumulate (STRAWBERRY_ACC_*), the convolution of this chunk of input channels is
 * added to the ofmap's partial sums and/or the output stage left for a later call.
 * Every input region must be written since the layer began (and hold no partial sums), and the
 * ofmap region may not overlap any of them (inputs may overlap each other).  Checked in this
 * order: the device is ready, no NULL struct, sizes (oc, iw, ih, ic, kh, kw, ow, oh), strides,
 * window, clamp, accumulate, regions inside the scratchpad, written, partial sums, not overlapping. */
strawberry_status strawberry_conv2d_nchw(const strawberry_conv_addrs* addrs, const strawberry_conv_params* params);
strawberry_status strawberry_conv2d_nhwc(const strawberry_conv_addrs* addrs, const strawberry_conv_params* params);

/* Depthwise (output channel c reads input channel c only): input.c == output.c, weights
 * [channels][kh][kw]; otherwise as above. */
strawberry_status strawberry_depthwise_conv2d_nchw(const strawberry_conv_addrs* addrs,
                                                   const strawberry_conv_params* params);
strawberry_status strawberry_depthwise_conv2d_nhwc(const strawberry_conv_addrs* addrs,
                                                   const strawberry_conv_params* params);

/* What the device has done since strawberry_init. */
typedef struct {
  int64_t layers;          /* strawberry_begin calls */
  int64_t dma_in_calls, dma_out_calls;
  int64_t dma_in_bytes;    /* host bytes read (padding excluded) */
  int64_t dma_pad_bytes;   /* scratchpad bytes zero-filled as padding */
  int64_t dma_out_bytes;   /* host bytes written */
  int64_t dma_cycles;      /* per transfer: setup + ceil(scratchpad bytes / bytes per cycle) */
  int64_t compute_calls;
  int64_t macs;
  int64_t compute_cycles;  /* per computation: ceil(macs / macs per cycle) */
  int64_t spad_high_water; /* highest scratchpad byte address written, plus one */
  int64_t spad_peak_bytes; /* most scratchpad bytes one layer has written (its occupancy) */
} strawberry_counters;

/* Copies the counters into *out (zeros before the first initialisation); NULL is ignored. */
void strawberry_get_counters(strawberry_counters* out);

/* Prints the counters and the configuration, one "key: value" per line, to stderr. */
void strawberry_report(void);

/* The scratchpad size of the device (0 before initialisation). */
int32_t strawberry_spad_bytes(void);

/* The message of the last error ("" if none yet). */
const char* strawberry_last_error(void);

/* Frees the scratchpad model; the device is uninitialised again (counters cleared). */
void strawberry_shutdown(void);

/* ------------------------------------------------------------------------------------------ */
/* Packing functions, one per entry the generated code calls (TIR cannot build a C struct, and
 * TVM declares every function it calls as returning int32_t): plain integers in, the structs
 * filled on the stack, the entry called, its status returned as an int32_t. */

static inline int32_t strawberry_begin_call(int32_t spad_bytes, int32_t dma_bytes_per_cycle,
                                            int32_t dma_setup_cycles, int32_t macs_per_cycle) {
  return (int32_t)strawberry_begin(spad_bytes, dma_bytes_per_cycle, dma_setup_cycles, macs_per_cycle);
}

static inline int32_t strawberry_dma_in_call(int32_t spad_addr, float* host, int32_t ext0, int32_t ext1,
                                             int32_t ext2, int32_t stride0, int32_t stride1, int32_t stride2,
                                             int32_t start0, int32_t start1, int32_t start2, int32_t n0,
                                             int32_t n1, int32_t n2) {
  const strawberry_tile tile = {{ext0, ext1, ext2}, {stride0, stride1, stride2}, {start0, start1, start2},
                                {n0, n1, n2}};
  return (int32_t)strawberry_dma_in(spad_addr, host, &tile);
}

static inline int32_t strawberry_dma_out_call(float* host, int32_t spad_addr, int32_t ext0, int32_t ext1,
                                              int32_t ext2, int32_t stride0, int32_t stride1, int32_t stride2,
                                              int32_t start0, int32_t start1, int32_t start2, int32_t n0,
                                              int32_t n1, int32_t n2) {
  const strawberry_tile tile = {{ext0, ext1, ext2}, {stride0, stride1, stride2}, {start0, start1, start2},
                                {n0, n1, n2}};
  return (int32_t)strawberry_dma_out(host, spad_addr, &tile);
}

/* The engine entries' arguments: addresses (ifmap, weights, bias, residual, slope, ofmap), then
 * the input tile (h, w, c), the output tile (h, w, c), kernel (h, w), stride (h, w), clamp,
 * accumulate. */
#define STRAWBERRY_CONV_CALL(NAME, ENTRY)                                                                       \
  static inline int32_t NAME(int32_t ifmap, int32_t weights, int32_t bias, int32_t residual, int32_t slope,    \
                             int32_t ofmap, int32_t ih, int32_t iw, int32_t ic, int32_t oh, int32_t ow,         \
                             int32_t oc, int32_t kh, int32_t kw, int32_t stride_h, int32_t stride_w, float lo,   \
                             float hi, int32_t accumulate) {                                                    \
    const strawberry_conv_addrs addrs = {ifmap, weights, bias, residual, slope, ofmap};                         \
    const strawberry_conv_params params = {{ih, iw, ic}, {oh, ow, oc}, {kh, kw}, {stride_h, stride_w}, lo, hi,  \
                                           accumulate};                                                         \
    return (int32_t)ENTRY(&addrs, &params);                                                                     \
  }
STRAWBERRY_CONV_CALL(strawberry_conv2d_nchw_call, strawberry_conv2d_nchw)
STRAWBERRY_CONV_CALL(strawberry_conv2d_nhwc_call, strawberry_conv2d_nhwc)
STRAWBERRY_CONV_CALL(strawberry_depthwise_conv2d_nchw_call, strawberry_depthwise_conv2d_nchw)
STRAWBERRY_CONV_CALL(strawberry_depthwise_conv2d_nhwc_call, strawberry_depthwise_conv2d_nhwc)
#undef STRAWBERRY_CONV_CALL

#ifdef __cplusplus
}
#endif

#endif /* STRAWBERRY_H_ */
