/* QVanilla's internal declarations, shared by its C files (not part of the API: qvanilla.h).
 *
 * The host mock of the QVanilla int8 Conv2D engine, written for one CPU core in portable C99 so
 * that compilers vectorise it at -O2 (gcc 12's "very cheap" vectoriser: loops whose trip
 * counts are multiples of the vector length, no run-time alias checks; SSE2 on x86-64).
 *
 * Dense convs are a matrix product over windows:
 *  - the windows of a tile of output pixels (any rows, in output order) are gathered into a
 *    scratch buffer as int16 rows [ky][kx][c] of KP = K rounded up to 8 entries: the raw input,
 *    input_zp where the window leaves the image, zeros in the tail (1x1 kernels widen runs of
 *    contiguous pixels);
 *  - the weights are int16 rows of KP entries per output channel, w - weight_zp, with the
 *    input zero point's contribution folded into the bias (bias - input_zp * sum(w - weight_zp)),
 *    so the inner loop multiplies raw inputs by weights: packed at compile time for the packed
 *    entry, four channels at a time into a scratch buffer for the plain one;
 *  - dot2x4() computes 2 pixels x 4 channels: eight int16 x int16 dot products into 32-bit
 *    sums, a reduction gcc turns into pmaddwd (8 multiply-adds per instruction, SSE2), into a
 *    tile of accumulators; short reductions (1x1 convs of few channels) get unrolled copies.
 * Depthwise convs accumulate 16 channels at a time (vectors over the channel axis of NHWC):
 * 16 int8 inputs widened and multiplied by 16 int16 weights into 32-bit sums per tap, or, for
 * weights in [-128, 127], two taps at a time summed exactly in 16-bit lanes.
 * The output stage (requantization, zero point, clamp) runs on rows of accumulators, 16 channels
 * at a time, vectorised and exact in either rounding (TVM's or TFLite's): see requant_rows();
 * channels it cannot take exactly that way take finish() (finish_tflite()), exact 64-bit integer
 * arithmetic per output.
 * gcc -O2 -fopt-info-vec reports the loops of dot2x4(), dw_taps(), dw_pairs(), requant_lanes(),
 * pack_row(), widen() and fill() vectorised.
 *
 * Integer sums wrap as unsigned 32-bit values (as the hardware's adders), so results do not
 * depend on the summation order and are bit-exact.  The entries validate every argument
 * first (see the header's status codes); past that no signed arithmetic can overflow. */
#ifndef QVANILLA_INTERNAL_H_
#define QVANILLA_INTERNAL_H_

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kit_requantize.h" /* the requantizations (qvanilla_requantize*), and their helpers */
#include "qvanilla.h"

/* The shifts this library accepts are those the kit's requantizations are exact in (C99 check). */
typedef char qvanilla_shifts_are_the_kits[QVANILLA_SHIFT_MIN == KIT_REQUANTIZE_SHIFT_MIN &&
                                          QVANILLA_SHIFT_MAX == KIT_REQUANTIZE_SHIFT_MAX ? 1 : -1];

/* Microcontrollers (Arm M profile: 13 general registers, no 64-bit or float vectors): the output
 * stage one channel at a time in 32-bit words (requant_columns()) instead of the vector lanes'
 * float set-up; with the DSP extension (Cortex-M4, M7, M33, M55), dense dot products two int16
 * multiply-adds per instruction (SMLAD, the Arm C Language Extensions' __smlad) in register blocks
 * of 2 pixels x 2 channels (dot2x2()).  Elsewhere: plain C. */
#if defined(__ARM_ARCH_PROFILE) && __ARM_ARCH_PROFILE == 'M'
#define QVANILLA_MCU 1
#if defined(__ARM_FEATURE_SIMD32) && !defined(QVANILLA_PORTABLE) /* QVANILLA_PORTABLE: plain C only */
#include <arm_acle.h>
#define QVANILLA_SMLAD 1
#endif
/* Helium (MVE, Armv8.1-M: Cortex-M55, M85): 128-bit vectors of integers, eight int16 multiply-adds
 * summed into a 32-bit register per VMLADAVA (dense dot products), lane-wise products (depthwise)
 * and the output stage four channels at a time (requant_vectors()).  QVANILLA_NO_MVE: the DSP
 * variant on such a core. */
#if defined(__ARM_FEATURE_MVE) && !defined(QVANILLA_PORTABLE) && !defined(QVANILLA_NO_MVE)
#include <arm_mve.h>
#define QVANILLA_MVE 1
#endif
#endif

/* x86-64 with gcc or clang: AVX2 variants chosen at run time where the CPU has AVX2
 * (qvanilla_avx2.c); QVANILLA_NO_AVX2: the SSE2 C only. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(QVANILLA_PORTABLE) && !defined(QVANILLA_NO_AVX2)
#define QVANILLA_AVX2 1
#endif

/* Inline assembly only where the compiler allocates registers well enough for it: at -O0 gcc keeps
 * every variable in memory and has too few registers left for the asm blocks' operands (the C
 * paths run there instead, with the same results). */
#if defined(__GNUC__) && defined(__OPTIMIZE__)
#define QVANILLA_ASM 1
#endif

#if defined(__GNUC__)
#define NOINLINE __attribute__((noinline))
#define ALWAYS_INLINE inline __attribute__((always_inline))
#define UNROLL4 _Pragma("GCC unroll 4") /* C99's _Pragma; gcc 8+ and clang know this one */
#else
#define NOINLINE
#define ALWAYS_INLINE inline
#define UNROLL4
#endif

enum { /* uma_qvanilla/scratch.py mirrors those that size the scratch */
  OB = QVANILLA_OC_BLOCK, /* output channels per register block (dot2x4) */
  KA = QVANILLA_K_ALIGN,  /* the reduction is padded to a multiple of this */
  WIN = 8192,             /* int16 entries of the window buffer (16 KB) */
  KMAX = WIN / 2,         /* longest (padded) reduction of the fast path: two windows fit */
  TILE = 64,              /* output pixels per tile at most */
  QCH = 64,               /* dense: output channels per chunk (a multiple of OB and QL) */
  CB = 16,                /* depthwise: channels per vector step */
  DW_BLOCK = 128,         /* depthwise: channels per block (a multiple of QL) */
  DW_TAPS = 64,           /* depthwise: taps per group (input pointers in the scratch) */
  DW_WBUF = 4096,         /* depthwise plain entry: int16 weights of a block, [tap][channel] */
  DW_ACC = 2048,          /* depthwise: accumulators of the pixels awaiting their output stage */
  MAX_OC = 1024           /* plain conv entry beyond KMAX: output channels per pass */
};

/* One convolution as the engine reads it: the entries' structs, checked and flattened (a
 * depthwise conv has ic = oc = its channels; packed entries have weight_zp = 0). */
typedef struct {
  int32_t ih, iw, ic;            /* input, NHWC with batch 1 */
  int32_t oh, ow, oc;            /* output, NHWC with batch 1 */
  int32_t kh, kw;                /* kernel */
  int32_t stride_h, stride_w;
  int32_t pad_top, pad_left;
  int32_t input_zp, weight_zp, output_zp;
  int32_t act_min, act_max;
  int32_t rounding;
  int32_t avx2;                  /* x86-64: the AVX2 variants run (the CPU has AVX2), decided once per call */
} qvanilla_conv;

/* Per output channel: bias (the input zero point folded in if packed), multiplier, shift. */
typedef struct {
  const int32_t* bias; /* NULL: zeros */
  const int32_t* multiplier;
  const int32_t* shift;
} qvanilla_channels;

/* Channel o's bias as the sums take it; a NULL bias is zeros (as CMSIS-NN allows). */
static inline uint32_t qvanilla_bias(const qvanilla_channels* q, size_t o) {
  return q->bias != NULL ? (uint32_t)q->bias[o] : 0u;
}

/* dst[j] = the bias of channel o0 + j, j < n: the NULL test once, not per channel. */
static inline void qvanilla_biases(uint32_t* dst, const qvanilla_channels* q, size_t o0, size_t n) {
  if (q->bias == NULL) {
    for (size_t j = 0; j < n; ++j) dst[j] = 0;
  } else {
    for (size_t j = 0; j < n; ++j) dst[j] = (uint32_t)q->bias[o0 + j];
  }
}

/* One output channel's output stage, ready to apply: see finish() and finish_tflite(). */
typedef struct {
  uint32_t bias;   /* the bias (input zero point folded in) */
  int32_t right;   /* upward: 31 - shift, in [1, 62]; TFLite: 31 + max(-shift, 0), in [31, 62] */
  int32_t left;    /* TFLite: max(shift, 0), in [0, 30]; upward: 0 */
  int64_t multiplier, round;
  int64_t fix;     /* TFLite: what a negative high product takes off round (see finish_tflite) */
} qchan;

/* The output stage of one accumulator: clamp(output_zp + requant(sum + bias)), with lo/hi the
 * clamp less output_zp.  For shift in [-31, 30], kit_requantize() equals
 * floor((acc * multiplier + 2^(30 - shift)) / 2^(31 - shift)) (dividing its left-shifted form by
 * 2^shift changes neither the quotient nor the rounding); clamping that to [lo, hi], inside
 * int32, equals saturating it to int32 first.  |acc * multiplier| <= 2^62, round <= 2^61. */
static inline int8_t finish(uint32_t sum, const qchan* q, int64_t lo, int64_t hi, int32_t zp) {
  int64_t r = kit_floor_shift((int64_t)kit_wrapped(sum + q->bias) * q->multiplier + q->round, q->right);
  r = r < lo ? lo : r; /* two selects (cmov), no branch: a ReLU clamps about half the outputs */
  r = r > hi ? hi : r;
  return (int8_t)(r + zp);
}

/* finish() in TFLite's rounding: clamp(output_zp + qvanilla_requantize_tflite(sum + bias)), lo/hi
 * the clamp less output_zp.  With x = (sum + bias) * 2^left wrapped to int32, ab = x * M and
 * n = right - 31 = max(-shift, 0):
 *  - the high multiply is floor((ab + 2^30) / 2^31) (for ab < 0, truncating ab + 1 - 2^30 < 0
 *    rounds it up: ceil(y / 2^31) = floor((y + 2^31 - 1) / 2^31)), negative iff ab < -2^30;
 *  - dividing an integer h by 2^n (n >= 1) rounding half away from zero is
 *    floor((h + 2^(n-1) - [h < 0]) / 2^n), and floor((floor(a / 2^31) + c) / 2^n) =
 *    floor((a + c * 2^31) / 2^(31+n)); so the result is
 *        floor((ab + 2^30 + 2^(30+n) - [ab < -2^30] * 2^31) / 2^(31+n))   (n >= 1),
 *        floor((ab + 2^30) / 2^31)                                          (n = 0),
 *    round = 2^30 + 2^(30+n) and fix = 2^31 (2^30 and 0 if n = 0).
 * The high multiply's saturation (x = M = INT32_MIN: ab = 2^62, h = INT32_MAX) comes out the same
 * for n >= 1, and 2^31 instead of INT32_MAX for n = 0: both beyond the clamp.  |ab| <= 2^62,
 * round <= 2^30 + 2^61: no overflow. */
static inline int8_t finish_tflite(uint32_t sum, const qchan* q, int64_t lo, int64_t hi, int32_t zp) {
  const int64_t ab = (int64_t)kit_wrapped((sum + q->bias) << q->left) * q->multiplier;
  int64_t r = kit_floor_shift(ab + q->round - (ab < -((int64_t)1 << 30) ? q->fix : 0), q->right);
  r = r < lo ? lo : r;
  r = r > hi ? hi : r;
  return (int8_t)(r + zp);
}

/* The output stage of one accumulator in the rounding of p (see finish(), finish_tflite()). */
static inline int8_t finish_any(uint32_t sum, const qchan* q, int64_t lo, int64_t hi, const qvanilla_conv* p) {
  return p->rounding == QVANILLA_ROUNDING_TFLITE ? finish_tflite(sum, q, lo, hi, p->output_zp)
                                                 : finish(sum, q, lo, hi, p->output_zp);
}

enum { QL = 16 }; /* channels per block (one vector of int8 outputs; = CB) */

typedef struct {
  uint32_t bias[QL];                /* the biases, input zero point folded in */
  float scale[QL], offset[QL];      /* v = clamp(s * scale + offset, bottom = 0, top) */
  float bottom[QL], top[QL];
  uint32_t m[QL];                   /* |M| */
  uint64_t c[QL];                   /* C */
  float vt[QL];                     /* TFLite: C + delta from v = vt on */
  uint64_t delta[QL];
  int32_t right;                    /* Rb, or 0: this block takes finish() (finish_tflite()) with qc */
  qchan qc[QL];                     /* in channel order */
} qblock;


/* The output stage (qvanilla_output_stage.c). */
qchan qvanilla_channel(const qvanilla_channels* q, size_t o, uint32_t bias, int32_t rounding);
void qvanilla_block_setup(qblock* b, const uint32_t* bias, const qvanilla_channels* q, size_t o0, size_t n,
                          int transposed, const qvanilla_conv* p);
void qvanilla_requant_rows(const uint32_t* acc, size_t stride, size_t rows, const qblock* blocks, const uint32_t* bias,
                           const qvanilla_channels* q, size_t o0, size_t n, int8_t* out, size_t ostride,
                           int transposed, const qvanilla_conv* p, uint32_t* o);
/* The lane of a block holding channel j of the block: j, or in the transposed order of dense
 * convs' accumulator rows, 4 * (j % 4) + j / 4 (see pack_row). */
static inline size_t lane(size_t j, int transposed) { return transposed ? 4 * (j % 4) + j / 4 : j; }

#ifdef QVANILLA_AVX2 /* qvanilla_avx2.c: whether the CPU has AVX2, and the variants it runs then */
int qvanilla_avx2(void);
void qvanilla_dot_tile_avx2(const int16_t* win, size_t n, size_t kp, const int16_t* w, uint32_t* a, size_t stride,
                            uint32_t* spare);
void qvanilla_dw_taps_avx2(uint32_t* acc, const int8_t* const* in, const int16_t* const* w, size_t at, int nt,
                           int first);
void qvanilla_dw_pairs_avx2(uint32_t* acc, const int8_t* const* in, const int16_t* const* w, size_t at, int nt,
                            int first);
void qvanilla_requant_avx2(const uint32_t* acc, size_t stride, size_t rows, const uint32_t* bias,
                           const qvanilla_channels* c, size_t o0, size_t nb, int8_t* out, size_t ostride,
                           int transposed, const qvanilla_conv* p);
#endif

/* The dense conv's windows (qvanilla_windows.c): the windows of the n output pixels from (*y, *x)
 * on, in output order, as rows of kp int16 (the input, input_zp outside the image, zeros from K
 * on), (*y, *x) moved past them; Helium: as rows of k16 int8. */
void qvanilla_gather_tile(int16_t* win, size_t kp, size_t n, const int8_t* input, const qvanilla_conv* p, int32_t* y,
                          int32_t* x);
void qvanilla_fill(int16_t* dst, int16_t value, size_t n); /* dst[0 .. n) = value */

/* Its dot products (qvanilla_dot.c), chosen once per call: the plain C, the DSP extension's asm
 * (the weights word-aligned), AVX2.  The sums of window i (rows of kp int16) and channel j < 4 (rows
 * of kp int16 at w) at a[i * stride + 4*j]; the odd last window's partner writes spare. */
enum { DOT_C, DOT_SMLAD, DOT_AVX2 };
void qvanilla_dot_tile(const int16_t* win, size_t n, size_t kp, const int16_t* w, uint32_t* a, size_t stride,
                       uint32_t* spare, int variant);
/* The same with the packed8 entry's weights (four channels in blocks of 16 int8, qvanilla.h). */
void qvanilla_dot_tile_w8(const int16_t* win, size_t n, size_t kp, const int8_t* w8, uint32_t* a, size_t stride,
                          uint32_t* spare);
#ifdef QVANILLA_MVE /* Helium's int8 path: int8 windows of k16 bytes times packed8 weights */
void qvanilla_gather_tile8(int8_t* win, size_t k16, size_t n, const int8_t* input, const qvanilla_conv* p, int32_t* y,
                           int32_t* x);
void qvanilla_dot_tile8(const int8_t* win, size_t n, size_t k16, const int8_t* wq, uint32_t* a, size_t stride,
                        uint32_t* spare);
int qvanilla_fit_int8(const int16_t* w, size_t n);                               /* all n in [-128, 127] */
void qvanilla_narrow4(int8_t* wq, const int16_t* w, size_t kp, size_t k16);      /* 4 rows as packed8's */
#endif

/* An entry's scratch for its checked conv p (packed: weights packed, either kind) within budget (see
 * "Scratch layouts" below). */
typedef size_t (*qvanilla_sizer)(const qvanilla_conv* p, int packed, size_t budget);

/* The entries' validation (qvanilla_check.c): the status of the header's list, in its order (the
 * scratch against the least `scratch` gives), and the flattened conv in *p.  kind: what the entry
 * is; weights int8 (plain, packed8), or int16 (packed). */
enum { PLAIN, PACKED, DEPTHWISE, DEPTHWISE_PACKED, PACKED8 };
enum { K16 = QVANILLA_K8_ALIGN }; /* packed8: the reduction in blocks of 16 int8 */
qvanilla_status qvanilla_check(const qvanilla_context* ctx, const qvanilla_conv_params* params,
                               const qvanilla_per_channel_quant_params* quant, const qvanilla_dims* input_dims,
                               const int8_t* input, const qvanilla_dims* filter_dims, const void* weights,
                               const int32_t* bias, const qvanilla_dims* output_dims, const int8_t* output, int kind,
                               qvanilla_sizer scratch, qvanilla_conv* p, qvanilla_channels* q);
/* Whether dims give an entry of `kind` sizes it accepts (ESIZE's checks), and its conv's sizes in *p. */
int qvanilla_sizes(const qvanilla_dims* input_dims, const qvanilla_dims* filter_dims, const qvanilla_dims* output_dims,
                   int kind, qvanilla_conv* p);

/* Scratch: the caller's buffer cut into arrays, each a multiple of QVANILLA_SCRATCH_ALIGN bytes
 * long (so each starts aligned); with base NULL only the total is counted.  Pointer arrays take 8
 * bytes an entry and blocks QVANILLA_BLOCK_BYTES, whatever the target: the compiler's mirror of
 * the sizes (uma_qvanilla/scratch.py) need not know it. */
typedef struct {
  unsigned char* base;
  size_t used;
} qvanilla_arena;

enum { QVANILLA_BLOCK_BYTES = 1360, QVANILLA_POINTER_BYTES = 8 };
typedef char qvanilla_blocks_fit[sizeof(qblock) <= QVANILLA_BLOCK_BYTES && sizeof(void*) <= QVANILLA_POINTER_BYTES &&
                                 sizeof(size_t) <= QVANILLA_POINTER_BYTES ? 1 : -1];

static inline void* qvanilla_take(qvanilla_arena* a, size_t bytes) {
  void* at = a->base != NULL ? a->base + a->used : NULL;
  a->used += (bytes + QVANILLA_SCRATCH_ALIGN - 1) / QVANILLA_SCRATCH_ALIGN * QVANILLA_SCRATCH_ALIGN;
  return at;
}

/* Scratch layouts.  Each engine cuts the scratch it is given (ctx->size bytes) in the best layout
 * that fits: the roomy one (tiles of up to TILE pixels, the lanes' output-stage blocks) if it
 * fits, else a lean one (no blocks, smaller tiles, fewer channels at a time), whose results are
 * the same.  The scratch of a layout for a budget (bytes): the roomy one's size if budget is 0 or
 * at least that, else the largest lean one within the budget, or the smallest lean one if none
 * fits (budget 1: the least the entry accepts).  p holds the checked sizes. */
enum { MIN_TILE = 8 }; /* lean layouts trade channels at a time for at least this many pixels */
size_t qvanilla_dense_scratch(const qvanilla_conv* p, int packed, size_t budget);
size_t qvanilla_depthwise_scratch(const qvanilla_conv* p, int packed, size_t budget);
/* The entries' _get_buffer_size (qvanilla_check.c): the scratch of `kind` for these dims within
 * QVANILLA_SCRATCH_BUDGET, 0 if they are rejected. */
int32_t qvanilla_buffer_size(const qvanilla_dims* input_dims, const qvanilla_dims* filter_dims, int kind,
                             qvanilla_sizer scratch);

#endif /* QVANILLA_INTERNAL_H_ */
