/* The kit's float32 Conv2D engine (kit_conv_f32.h), in portable C99 tuned for one CPU core: the
 * host mock of a conv engine that backends share (Vanilla's C API, Strawberry's scratchpad model).
 *
 * Every output is one chain of multiply-adds over its reduction index k = (c, ky, kx) in that
 * order (the flat order of a weight row; depthwise: (ky, kx)), starting from +0 and adding a zero
 * product for a tap in the padding; only then comes the output stage.  However the work below is
 * tiled, blocked or chunked (partial sums parked in `result` and reloaded are the same floats),
 * that chain is the same, so NCHW and NHWC give the same bits, and so do builds with other
 * register blocks.  MADD is fmaf() where the target has a fast one (FP_FAST_FMAF: e.g.
 * -march=native on x86-64) and a multiply then an add otherwise: an FMA build's bits differ from
 * a plain one's, but both layouts use the same, so they agree under any flags.
 *
 * Dense convolutions run on one register-blocked kernel, gemm(): MR rows x NR lanes of
 * accumulators, per reduction step MR broadcasts times NR contiguous lanes.  Two engines feed it:
 *  - conv_rows (NCHW, when output rows fill the lanes): lanes are output pixels of a row, read
 *    from a zero-padded panel of input rows; rows are output channels, weights read in place;
 *  - conv_pixels (NHWC, and NCHW with narrow rows): lanes are output channels of weights
 *    transposed into a small buffer; rows are output pixels, read in place when no window leaves
 *    the image, else from a zero-padded channel-innermost panel of the tile's input window.
 * Depthwise convolutions have their own kernel, over zero-padded panels too: NCHW vectorises
 * along output columns (MR output rows x NR columns), NHWC across channels (MR pixels x NR
 * channels, input rows through a ring so each is copied once).
 * The output stage (bias, residual, PReLU, clamp) runs on each register block as it leaves the
 * kernel (close_block()), while it is in L1, not in a pass of its own over the result.
 *
 * The loops are written so that gcc vectorises them at -O2 (SSE2 on x86-64) and better with
 * -march=native (AVX2/AVX-512 registers and FMA): the kernels' loops over rows and lanes are
 * unrolled completely, which makes their accumulators scalars that the SLP vectoriser packs into
 * SIMD registers; everything else is short loops of fixed length.  No intrinsics; any C99
 * compiler builds it (other compilers ignore the GNU pragmas and attributes).
 *
 * The engines' working memory (input panels, transposed weights, offsets, a tile) is the caller's
 * scratch, laid out by carve(): no function keeps a large array on its stack (a microcontroller's
 * stack stays small; kit_conv_f32_get_buffer_size says how much).
 *
 * The entries validate their arguments first (one status code per kind of problem, see the
 * header); past that, no index arithmetic can overflow and no pointer is formed outside a tensor
 * (rows outside the image are zero-filled without a source pointer). */
#include "kit_conv_f32.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__)
#define NOINLINE __attribute__((noinline))
#define ALWAYS_INLINE inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 64")
#define NOUNROLL _Pragma("GCC unroll 1")
#else
#define NOINLINE
#define ALWAYS_INLINE inline
#define UNROLL
#define NOUNROLL
#endif

/* The kernels' reduction loop must stay a loop: gcc's loop vectoriser (on at -O2 for loops of
 * known trip count, at -O3 for all) would vectorise it across k with lane shuffles, several
 * times slower than the SLP code.  Turning it off for them alone leaves it on elsewhere. */
#if defined(__GNUC__) && !defined(__clang__)
#define KERNEL NOINLINE __attribute__((optimize("no-tree-loop-vectorize")))
#else
#define KERNEL NOINLINE
#endif

/* The output stage's PReLU multiplies only negative values: vectorised, that multiply would run on
 * every lane and could raise a floating-point exception the source does not, so under the default
 * -ftrapping-math gcc leaves the loop scalar (but with AVX-512's masks).  Nothing here reads the
 * exception flags: the stage's functions are compiled without that constraint (the same IEEE
 * results). */
#if defined(__GNUC__) && !defined(__clang__)
#define STAGE __attribute__((optimize("no-trapping-math")))
#else
#define STAGE
#endif

#if defined(FP_FAST_FMAF)
#define MADD(a, b, c) fmaf((a), (b), (c))
#else
#define MADD(a, b, c) ((c) + (a) * (b))
#endif

/* Register block: MR rows x NR lanes.  32 vector registers (AVX-512) hold 8 x 16 floats of
 * accumulators; 16 (SSE, AVX2) hold 4 x 16.  -DKIT_CONV_F32_MR / -DKIT_CONV_F32_NR override
 * them (e.g. -DKIT_CONV_F32_NR=32 with -mprefer-vector-width=512). */
#ifndef KIT_CONV_F32_MR
#if defined(__AVX512F__)
#define KIT_CONV_F32_MR 8
#else
#define KIT_CONV_F32_MR 4
#endif
#endif
#ifndef KIT_CONV_F32_NR
#define KIT_CONV_F32_NR 16
#endif

enum {
  MR = KIT_CONV_F32_MR,
  NR = KIT_CONV_F32_NR,
  NH = NR / 2,     /* lanes of the half-width kernel (channel tails) */
  KMAX = 256,      /* reduction steps per kernel call (longer reductions go in chunks) */
  TP = 64,         /* conv_rows: output pixels per panel tile */
  PTILE = 256,     /* conv_pixels: about this many output pixels per tile */
  MAX_TAPS = KIT_CONV_F32_MAX_TAPS, /* depthwise: kh*kw limit */
  CAP0 = 2 * MR * KMAX > MAX_TAPS * (NR + 1) ? 2 * MR * KMAX : MAX_TAPS * (NR + 1),
  CAP = CAP0 > 4096 ? CAP0 : 4096 /* floats in a panel (16 KB or more): the smallest tiles fit */
};
typedef char kit_conv_f32_block_is_valid[(MR >= 1 && MR <= 16 && NR >= 2 && NR <= 64 && NR % 2 == 0) ? 1 : -1];

static int imin(int a, int b) { return a < b ? a : b; }
static int imax(int a, int b) { return a > b ? a : b; }
static int round_up(int n, int m) { return (n + m - 1) / m * m; }

/* ---------------------------------------------------------------------------------------------
 * The output stage */

/* Per output element of channel o: v = conv + bias[o] + residual; v = v < 0 ? slope[o] * v : v;
 * result = clamp(v, lo, hi).  A part left out (NULL) is skipped. */
typedef struct {
  const float *bias, *residual, *slope;
  float lo, hi; /* +-INFINITY for no bound */
  int clamp;
} stage_t;

enum { BY_ROW, BY_LANE, ONE }; /* a block's channel: ch + row, ch + lane, or ch throughout */

/* ---------------------------------------------------------------------------------------------
 * Kernels: MR x L accumulators (L = NR or NH lanes) at out[i*ld + x], which is `result` itself for a
 * whole block whose lanes are contiguous there, else a small tile.  (The output stage is not
 * applied here: gcc 12's SLP vectoriser cannot vectorise its clamp, and would then leave the
 * whole kernel scalar; close_block() runs it as loops that vectorise.) */

/* out[i*ld + x] (+)= sum_k a[i][aoff[k]] * b[boff[k] + x] for i < MR, x < L, k < nk, in k order. */
static ALWAYS_INLINE void gemm_body(int L, int nk, const float* const* a, const ptrdiff_t* aoff, const float* b,
                                    const ptrdiff_t* boff, float* out, size_t ld, int accumulate) {
  float acc[MR][NR];
  const float* ap[MR];
  UNROLL for (int i = 0; i < MR; ++i) {
    ap[i] = a[i];
    UNROLL for (int x = 0; x < L; ++x) acc[i][x] = accumulate ? out[i * ld + x] : 0.0f;
  }
  for (int k = 0; k < nk; ++k) {
    const float* bk = b + boff[k];
    const ptrdiff_t o = aoff[k];
    UNROLL for (int i = 0; i < MR; ++i) {
      const float v = ap[i][o];
      UNROLL for (int x = 0; x < L; ++x) acc[i][x] = MADD(v, bk[x], acc[i][x]);
    }
  }
  UNROLL for (int i = 0; i < MR; ++i) UNROLL for (int x = 0; x < L; ++x) out[i * ld + x] = acc[i][x];
}

KERNEL static void gemm(int nk, const float* const* a, const ptrdiff_t* aoff, const float* b, const ptrdiff_t* boff,
                        float* out, size_t ld, int accumulate) {
  gemm_body(NR, nk, a, aoff, b, boff, out, ld, accumulate);
}

KERNEL static void gemm_half(int nk, const float* const* a, const ptrdiff_t* aoff, const float* b,
                             const ptrdiff_t* boff, float* out, size_t ld, int accumulate) {
  gemm_body(NH, nk, a, aoff, b, boff, out, ld, accumulate);
}

/* Depthwise: out[i*ld + x] = sum_j w_j[x] * p[i][toff[j] + x] for i < MR, x < NR, in j order, where
 * w_j[x] is w[j*ws + x] (a weight per lane: NHWC's channels) or w[j] (one per tap: NCHW). */
static ALWAYS_INLINE void dw_body(int per_lane, int taps, const float* w, size_t ws, const float* const* p,
                                  const ptrdiff_t* toff, float* out, size_t ld) {
  float acc[MR][NR];
  const float* pp[MR];
  UNROLL for (int i = 0; i < MR; ++i) {
    pp[i] = p[i];
    UNROLL for (int x = 0; x < NR; ++x) acc[i][x] = 0.0f;
  }
  for (int j = 0; j < taps; ++j) {
    const ptrdiff_t o = toff[j];
    float wj[NR]; /* (loaded before the rows: gcc 12 -O3 keeps the rows' sums in SIMD registers then) */
    UNROLL for (int x = 0; x < NR; ++x) wj[x] = per_lane ? w[j * ws + x] : w[j];
    UNROLL for (int i = 0; i < MR; ++i) {
      const float* pi = pp[i] + o;
      UNROLL for (int x = 0; x < NR; ++x) acc[i][x] = MADD(wj[x], pi[x], acc[i][x]);
    }
  }
  UNROLL for (int i = 0; i < MR; ++i) UNROLL for (int x = 0; x < NR; ++x) out[i * ld + x] = acc[i][x];
}

KERNEL static void dw_lanes(int taps, const float* w, size_t ws, const float* const* p, const ptrdiff_t* toff,
                            float* out, size_t ld) {
  dw_body(1, taps, w, ws, p, toff, out, ld);
}

KERNEL static void dw_taps(int taps, const float* w, const float* const* p, const ptrdiff_t* toff, float* out,
                           size_t ld) {
  dw_body(0, taps, w, 0, p, toff, out, ld);
}

/* ---------------------------------------------------------------------------------------------
 * The way out of a register block */

static inline void copy_run(float* restrict d, const float* restrict s, int n, int step);

/* The stage's bias and slope for the lanes of a block of channels ch .. ch+n-1 (BY_LANE): NR
 * values each (NULL when the stage has none), zero past the channels.  Made once per block of
 * channels, used by all its register blocks. */
typedef struct {
  const float *bias, *slope;
  float b[NR], s[NR];
} lanes_t;

static const lanes_t* lanes_of(lanes_t* l, const stage_t* st, int ch, int n) {
  if (st == NULL) return NULL;
  l->bias = l->slope = NULL;
  if (st->bias != NULL) {
    for (int x = 0; x < NR; ++x) l->b[x] = x < n ? st->bias[ch + x] : 0.0f;
    l->bias = l->b;
  }
  if (st->slope != NULL) {
    for (int x = 0; x < NR; ++x) l->s[x] = x < n ? st->slope[ch + x] : 0.0f;
    l->slope = l->s;
  }
  return l;
}

/* A register block: its rows x n outputs (i, x) are result[base + i*rs + x*ls] of channel ch + i
 * (BY_ROW), ch + x (BY_LANE: lanes holds their bias and slope) or ch (ONE). */
typedef struct {
  float* result;
  size_t base, rs, ls;
  int rows, n, by, ch;
  const lanes_t* lanes;
} block_t;

static block_t block(float* result, size_t base, size_t rs, size_t ls, int rows, int n, int by, int ch,
                     const lanes_t* lanes) {
  block_t b = {result, base, rs, ls, rows, n, by, ch, lanes};
  return b;
}

/* Where the kernel puts the block (row stride *ld): in place when it is whole (MR rows, NR
 * contiguous lanes), else a zeroed [MR][NR] tile (holding the partial sums so far if accumulate). */
static float* open_block(const block_t* b, float* tile, size_t* ld, int accumulate) {
  if (b->rows == MR && b->n == NR && b->ls == 1) {
    *ld = b->rs;
    return b->result + b->base;
  }
  *ld = NR;
  memset(tile, 0, MR * NR * sizeof(float));
  if (accumulate)
    for (int i = 0; i < b->rows; ++i)
      for (int x = 0; x < b->n; ++x) tile[i * NR + x] = b->result[b->base + i * b->rs + x * b->ls];
  return tile;
}

/* One row of a block, NR lanes: loops of fixed length that gcc vectorises at -O2 and above
 * (kept loops: unrolled first, -O3 would leave their clamp scalar).  A clamp to -INFINITY ..
 * INFINITY changes nothing, not even a NaN. */
STAGE static inline float clampf(float v, float lo, float hi) {
  const float a = v < lo ? lo : v; /* maxps, then minps: no branches; a NaN stays a NaN */
  return a > hi ? hi : a;
}

STAGE static void row_add(float* restrict o, const float* restrict v) {
  NOUNROLL for (int x = 0; x < NR; ++x) o[x] += v[x];
}
STAGE static void row_add1(float* restrict o, float c) {
  NOUNROLL for (int x = 0; x < NR; ++x) o[x] += c;
}
STAGE static void row_prelu(float* restrict o, const float* restrict s) {
  NOUNROLL for (int x = 0; x < NR; ++x) {
    const float v = o[x], t = s[x];
    o[x] = v < 0.0f ? v * t : v;
  }
}
STAGE static void row_prelu1(float* restrict o, float s) {
  NOUNROLL for (int x = 0; x < NR; ++x) o[x] = o[x] < 0.0f ? o[x] * s : o[x];
}
STAGE static void row_clamp(float* restrict o, float lo, float hi) {
  NOUNROLL for (int x = 0; x < NR; ++x) o[x] = clampf(o[x], lo, hi);
}

/* v = clamp(prelu(v + b)), bias and slope per lane (b, s) or per row (b1, s1), each NULL if none:
 * the stage without a residual, in one pass. */
STAGE static void row_stage(float* restrict o, const float* restrict b, const float* restrict s, float lo, float hi) {
  if (b != NULL && s != NULL) {
    NOUNROLL for (int x = 0; x < NR; ++x) {
      const float v = o[x] + b[x], t = s[x], p = v < 0.0f ? v * t : v;
      o[x] = clampf(p, lo, hi);
    }
  } else if (b != NULL) {
    NOUNROLL for (int x = 0; x < NR; ++x) {
      const float v = o[x] + b[x];
      o[x] = clampf(v, lo, hi);
    }
  } else if (s != NULL) {
    NOUNROLL for (int x = 0; x < NR; ++x) {
      const float v = o[x], t = s[x], p = v < 0.0f ? v * t : v;
      o[x] = clampf(p, lo, hi);
    }
  } else {
    row_clamp(o, lo, hi);
  }
}
STAGE static void row_stage1(float* restrict o, const float* b1, const float* s1, float lo, float hi) {
  if (b1 != NULL && s1 != NULL) {
    const float b = *b1, s = *s1;
    NOUNROLL for (int x = 0; x < NR; ++x) {
      const float v = o[x] + b, p = v < 0.0f ? v * s : v;
      o[x] = clampf(p, lo, hi);
    }
  } else if (b1 != NULL) {
    const float b = *b1;
    NOUNROLL for (int x = 0; x < NR; ++x) {
      const float v = o[x] + b;
      o[x] = clampf(v, lo, hi);
    }
  } else if (s1 != NULL) {
    const float s = *s1;
    NOUNROLL for (int x = 0; x < NR; ++x) {
      const float p = o[x] < 0.0f ? o[x] * s : o[x];
      o[x] = clampf(p, lo, hi);
    }
  } else {
    row_clamp(o, lo, hi);
  }
}

/* The output stage (st != NULL) over the block the kernel left at out (row stride ld, from
 * open_block), row by row while it is in L1, then a tile's valid part to result.  In a tile the
 * lanes past the block hold values nothing stores. */
STAGE static void close_block(const block_t* b, float* out, size_t ld, const stage_t* st) {
  const int inplace = out == b->result + b->base && b->rows == MR && b->n == NR && b->ls == 1;
  if (st != NULL) {
    const int lane = b->by == BY_LANE;
    const float* bias = lane ? b->lanes->bias : st->bias; /* per lane: NR values; else per channel */
    const float* slope = lane ? b->lanes->slope : st->slope;
    for (int i = 0; i < b->rows; ++i) {
      float* o = out + i * ld;
      const int ch = b->ch + (b->by == BY_ROW ? i : 0);
      if (st->residual == NULL) { /* one pass */
        if (lane) row_stage(o, bias, slope, st->lo, st->hi);
        else row_stage1(o, bias != NULL ? bias + ch : NULL, slope != NULL ? slope + ch : NULL, st->lo, st->hi);
        continue;
      }
      if (bias != NULL) {
        if (lane) row_add(o, bias); else row_add1(o, bias[ch]);
      }
      const float* r = st->residual + b->base + i * b->rs;
      if (inplace) row_add(o, r);
      else for (int x = 0; x < b->n; ++x) o[x] += r[x * b->ls];
      if (slope != NULL) {
        if (lane) row_prelu(o, slope); else row_prelu1(o, slope[ch]);
      }
      if (st->clamp) row_clamp(o, st->lo, st->hi);
    }
  }
  if (!inplace)
    for (int i = 0; i < b->rows; ++i) {
      float* r = b->result + b->base + i * b->rs;
      if (b->ls == 1) copy_run(r, out + i * ld, b->n, 1);
      else for (int x = 0; x < b->n; ++x) r[x * b->ls] = out[i * ld + x];
    }
}

/* ---------------------------------------------------------------------------------------------
 * Geometry and validation */

/* Where the engine's DMA finds element (channel c, pixel p) of a feature map with `channels`
 * channels and `plane` pixels: NCHW keeps each channel's plane contiguous, NHWC each pixel's channels. */
typedef struct {
  size_t channel, pixel; /* strides */
} layout_t;

static layout_t layout_of(int nhwc, size_t channels, size_t plane) {
  layout_t l = {nhwc ? 1 : plane, nhwc ? channels : 1};
  return l;
}

/* One convolution: sizes, window and the feature maps' layout (weights are always [oc][ic][kh][kw]). */
typedef struct {
  int oc, ic, ih, iw, oh, ow, kh, kw;
  int sh, sw, pt, pl; /* strides; zero rows above and columns left of the input (the rest is implied by oh, ow) */
  int nhwc;
} conv_t;

/* acc *= n unless the product of floats would exceed PTRDIFF_MAX bytes (then 0); n >= 1. */
static int fits(size_t* acc, int n) {
  if (*acc > (size_t)PTRDIFF_MAX / sizeof(float) / (size_t)n) return 0;
  *acc *= (size_t)n;
  return 1;
}

/* Whether (out-1)*stride + kernel, how far the windows reach from the first padded row or column,
 * stays within INT_MAX/2: then y*stride + ky - pad and the engine's tile arithmetic fit an int. */
static int extent_ok(int out, int stride, int kernel) {
  return (int64_t)(out - 1) * stride + kernel <= INT_MAX / 2;
}

enum { CONV, DEPTHWISE }; /* kinds of entry for check() */

/* The entries' validation: a status code of the header, in the header's order. */
static int32_t check(const float* ifmap, const float* weights, const float* result, const conv_t* g, float lo,
                     float hi, int kind) {
  if (ifmap == NULL || weights == NULL || result == NULL) return KIT_CONV_F32_EINVAL;
  if (g->oc <= 0 || g->ic <= 0 || g->ih <= 0 || g->iw <= 0 || g->oh <= 0 || g->ow <= 0 || g->kh <= 0 || g->kw <= 0 ||
      (kind == DEPTHWISE && g->ic != g->oc))
    return KIT_CONV_F32_ESIZE;
  if (g->sh <= 0 || g->sw <= 0) return KIT_CONV_F32_ESTRIDE;
  if (g->pt < 0 || g->pl < 0) return KIT_CONV_F32_EPAD;
  if (!(lo <= hi)) return KIT_CONV_F32_ECLAMP;
  if (kind == DEPTHWISE && (g->kh > MAX_TAPS || g->kw > MAX_TAPS || g->kh * g->kw > MAX_TAPS)) return KIT_CONV_F32_ETAPS;
  size_t in = 1, out = 1, w = 1;
  if (!fits(&in, g->ic) || !fits(&in, g->ih) || !fits(&in, g->iw) || !fits(&out, g->oc) || !fits(&out, g->oh) ||
      !fits(&out, g->ow) || !fits(&w, g->oc) || (kind != DEPTHWISE && !fits(&w, g->ic)) || !fits(&w, g->kh) ||
      !fits(&w, g->kw) || (int64_t)g->kh * g->kw > INT_MAX || !extent_ok(g->oh, g->sh, g->kh) ||
      !extent_ok(g->ow, g->sw, g->kw))
    return KIT_CONV_F32_ERANGE;
  return KIT_CONV_F32_OK;
}

/* The columns q in [lo, hi) of a run of W whose column q is col0 + q*step, that are inside 0 .. iw-1.
 * col0 = x*stride + kx - pad >= -INT_MAX: -col0 fits an int, iw - 1 - col0 (< 2*INT_MAX) an unsigned. */
typedef struct {
  int lo, hi;
} span_t;

static span_t span(int W, int col0, int step, int iw) {
  span_t s = {W, W};
  if (col0 < iw) {
    if (step == 1) { /* (no divisions) */
      s.lo = col0 >= 0 ? 0 : -col0 < W ? -col0 : W;
      s.hi = (unsigned)iw - (unsigned)col0 < (unsigned)W ? iw - col0 : W;
    } else {
      const int first = col0 >= 0 ? 0 : (-col0 - 1) / step + 1; /* the first q at a column >= 0 */
      const unsigned end = ((unsigned)iw - 1u - (unsigned)col0) / (unsigned)step + 1u; /* the first q right of it */
      s.lo = first < W ? first : W;
      s.hi = end < (unsigned)W ? (int)end : W;
    }
    if (s.hi < s.lo) s.hi = s.lo;
  }
  return s;
}

/* d[q] = s[q*step] for q < n: short contiguous runs without a call (blocks of 8 are vectorised
 * even at -O2), long ones with memcpy. */
static inline void copy_run(float* restrict d, const float* restrict s, int n, int step) {
  if (step == 1 && n >= 64) {
    memcpy(d, s, (size_t)n * sizeof(float));
  } else if (step == 1 && n >= 8) { /* the last block of 8 overlaps the one before: no scalar tail */
    for (int q = 0; q < n - 8; q += 8)
      for (int t = 0; t < 8; ++t) d[q + t] = s[q + t];
    for (int t = 0; t < 8; ++t) d[n - 8 + t] = s[n - 8 + t];
  } else if (step == 1) {
    for (int q = 0; q < n; ++q) d[q] = s[q];
  } else if (step == 2) {
    for (int q = 0; q < n; ++q) d[q] = s[2 * q];
  } else {
    for (int q = 0; q < n; ++q) d[q] = s[(size_t)q * step];
  }
}

/* even[q] = s[2q], odd[q] = s[2q+1] for q < n: a stride-2 row split into its two phases in one
 * pass (vectorised with shuffles). */
static void split2(float* restrict even, float* restrict odd, const float* restrict s, int n) {
  int q = 0;
  for (; q + 8 <= n; q += 8)
    for (int t = 0; t < 8; ++t) {
      even[q + t] = s[2 * (q + t)];
      odd[q + t] = s[2 * (q + t) + 1];
    }
  for (; q < n; ++q) {
    even[q] = s[2 * q];
    odd[q] = s[2 * q + 1];
  }
}

/* d[q] = 0 for q < n, without a call for a few. */
static void zero_run(float* d, int n) {
  if (n > 8) {
    memset(d, 0, (size_t)n * sizeof(float));
  } else {
    for (int t = 0; t < 8; ++t)
      if (t < n) d[t] = 0.0f;
  }
}

/* panel[q] = src[col0 + q*step] for q < W, zero where that column is outside 0 .. iw-1 (or
 * everywhere, for a row outside the image: src == NULL, never offset). */
static void fill_row(float* restrict panel, int W, const float* src, int col0, int step, int iw) {
  const span_t s = src == NULL ? span(W, iw, 1, iw) : span(W, col0, step, iw);
  zero_run(panel, s.lo);
  if (s.lo < s.hi) copy_run(panel + s.lo, src + ((ptrdiff_t)col0 + (ptrdiff_t)s.lo * step), s.hi - s.lo, step);
  zero_run(panel + s.hi, W - s.hi);
}

/* ---------------------------------------------------------------------------------------------
 * Scratch: the engines' working memory, from the caller (kit_conv_f32_context) */

enum { ROWS, PIXELS, GENERIC, DW_ROWS, DW_PIXELS }; /* the engines below */
enum { ALIGN = 64, SLOT = 8 };                    /* regions start on cache lines; offsets take 8 bytes */
typedef char kit_conv_f32_offsets_fit[sizeof(ptrdiff_t) <= SLOT && sizeof(span_t) <= SLOT ? 1 : -1];

/* An engine's arrays: offsets (off, off2), spans per phase (run), the input panel, transposed
 * weights (wt) and a register block's tile; a NULL pointer for what it does not use. */
typedef struct {
  ptrdiff_t *off, *off2;
  span_t* run;
  float *panel, *wt, *tile;
} scratch_t;

static void* take(unsigned char* base, size_t* at, size_t count, size_t size) {
  void* p = base == NULL || count == 0 ? NULL : base + *at;
  *at += (count * size + ALIGN - 1) / ALIGN * ALIGN;
  return p;
}

/* Lays the engine's arrays out from base (or only measures them: base NULL); their bytes. */
static size_t carve(scratch_t* s, unsigned char* base, int engine) {
  const int dense = engine == ROWS || engine == PIXELS;
  const size_t offs = engine == GENERIC ? 0 : dense ? KMAX : MAX_TAPS;
  const size_t wt = engine == PIXELS ? (size_t)KMAX * NR : engine == DW_PIXELS ? (size_t)CAP + MAX_TAPS * NR : 0;
  size_t at = 0;
  s->off = (ptrdiff_t*)take(base, &at, offs, SLOT);
  s->off2 = (ptrdiff_t*)take(base, &at, dense ? KMAX : 0, SLOT);
  s->run = (span_t*)take(base, &at, engine == DW_ROWS ? MAX_TAPS : 0, SLOT);
  s->panel = (float*)take(base, &at, engine == GENERIC ? 0 : CAP, sizeof(float));
  s->wt = (float*)take(base, &at, wt, sizeof(float));
  s->tile = (float*)take(base, &at, (size_t)MR * NR, sizeof(float));
  return at;
}

/* ---------------------------------------------------------------------------------------------
 * Dense convolution */

/* NCHW, lanes along output rows.  Per tile of up to TP output pixels of row y, the input rows it
 * needs are copied into a zero-padded panel: at stride 1 one panel row per (c, ky), the kernel's
 * columns sliding along it; wider strides one row per (c, ky, kx) holding every sw-th column.
 * Rows are MR output channels, their weights read in place.  Reductions longer than a panel or
 * KMAX steps go in chunks of whole panel rows. */
static void conv_rows(const float* ifmap, const float* weights, float* result, const conv_t* g, const stage_t* st,
                      const scratch_t* s) {
  const int taps = g->kh * g->kw;
  const size_t K = (size_t)g->ic * (size_t)taps;
  const int slide = g->sw == 1 && g->kw <= KMAX, kslide = slide ? g->kw : 1;
  const int per_c = slide ? g->kh : taps; /* panel rows per input channel */
  const size_t nrows = (size_t)g->ic * (size_t)per_c;
  const int tmax = imin(TP / NR * NR, round_up(g->ow, NR)), W = tmax + kslide - 1; /* <= TP + KMAX - 1 < CAP */
  const int rows_fit = imin(CAP / W, KMAX / kslide);
  const size_t nchunks = (nrows + (size_t)rows_fit - 1) / (size_t)rows_fit;
  const size_t rows_per = (nrows + nchunks - 1) / nchunks; /* balanced chunks, <= rows_fit */
  const size_t iplane = (size_t)g->ih * g->iw, oplane = (size_t)g->oh * g->ow;
  float *const panel = s->panel, *const tile = s->tile;
  ptrdiff_t *const ident = s->off, *const boff = s->off2;
  for (int k = 0; k < KMAX; ++k) ident[k] = k;

  for (int y = 0; y < g->oh; ++y) {
    for (int x0 = 0; x0 < g->ow; x0 += tmax) {
      const int n = imin(tmax, g->ow - x0), nr = round_up(n, NR), Wt = nr + kslide - 1;
      for (size_t r0 = 0; r0 < nrows; r0 += rows_per) {
        const int nrw = (int)(nrows - r0 < rows_per ? nrows - r0 : rows_per), nk = nrw * kslide;
        const int first = r0 == 0, last = r0 + (size_t)nrw == nrows;
        size_t c = r0 / (size_t)per_c;
        int rr = (int)(r0 % (size_t)per_c); /* position within channel c: ky (slide) or ky*kw + kx */
        for (int j = 0; j < nrw; ++j) {
          const int ky = slide ? rr : rr / g->kw, kx = slide ? 0 : rr % g->kw, iy = y * g->sh + ky - g->pt;
          const float* src = iy < 0 || iy >= g->ih ? NULL : ifmap + c * iplane + (size_t)iy * g->iw;
          fill_row(panel + (size_t)j * Wt, Wt, src, x0 * g->sw + kx - g->pl, g->sw, g->iw);
          if (++rr == per_c) { rr = 0; ++c; }
        }
        for (int k = 0; k < nk; ++k) boff[k] = (ptrdiff_t)(k / kslide) * Wt + k % kslide;
        for (int ob = 0; ob < g->oc; ob += MR) {
          const int no = imin(MR, g->oc - ob);
          const float* a[MR]; /* missing channels of a partial block reuse the last one */
          for (int i = 0; i < MR; ++i) a[i] = weights + (size_t)(ob + imin(i, no - 1)) * K + r0 * (size_t)kslide;
          for (int xs = 0; xs < nr; xs += NR) { /* a row's tail of NH pixels or fewer: the half-width kernel */
            const block_t b = block(result, (size_t)ob * oplane + (size_t)y * g->ow + (size_t)(x0 + xs), oplane, 1, no,
                                    imin(NR, n - xs), BY_ROW, ob, NULL);
            size_t ld;
            float* out = open_block(&b, tile, &ld, !first);
            (n - xs <= NH ? gemm_half : gemm)(nk, a, ident, panel + xs, boff, out, ld, !first);
            close_block(&b, out, ld, last ? st : NULL);
          }
        }
      }
    }
  }
}

/* Lanes across output channels (any layout; kh*kw <= KMAX).  The weights of a chunk of input
 * channels and NR output channels are transposed into wt[k][lane] once per tile (once in all
 * when the input is read in place).  Rows are MR
 * output pixels: read in place when no window leaves the image, otherwise from a panel holding
 * the tile's input window, zero-padded and channel-innermost ([row][column][channel]), so every
 * pixel finds tap (c, ky, kx) at the same offset from its own start. */
static void conv_pixels(const float* ifmap, const float* weights, float* result, const conv_t* g,
                        const stage_t* st, const scratch_t* s) {
  const int taps = g->kh * g->kw;
  const size_t K = (size_t)g->ic * (size_t)taps, iplane = (size_t)g->ih * g->iw, oplane = (size_t)g->oh * g->ow;
  const layout_t in = layout_of(g->nhwc, (size_t)g->ic, iplane);
  /* Panel columns: each output pixel's window starts cs = min(sw, kw) columns after the previous
   * one's (at sw > kw each keeps its own kw columns); rows likewise, qs = min(sh, kh). */
  const int cs = imin(g->sw, g->kw), qs = imin(g->sh, g->kh);
  const int direct = g->pt == 0 && g->pl == 0 && (int64_t)(g->oh - 1) * g->sh + g->kh <= g->ih &&
                     (int64_t)(g->ow - 1) * g->sw + g->kw <= g->iw;
  int nc = imin(g->ic, KMAX / taps), R = 1, T = g->ow;
  if (!direct) { /* keep at least min(ow, 2*MR) pixels per tile: kh*wmin <= 2*MR*KMAX <= CAP */
    const size_t wmin = (size_t)(imin(g->ow, 2 * MR) - 1) * (size_t)cs + (size_t)g->kw;
    if ((size_t)g->kh * wmin * (size_t)nc > CAP) nc = imax(1, (int)(CAP / ((size_t)g->kh * wmin)));
  }
  { const int nchunks = (g->ic + nc - 1) / nc; nc = (g->ic + nchunks - 1) / nchunks; } /* balanced */
  if (!direct) {
    const size_t wfull = (size_t)(g->ow - 1) * (size_t)cs + (size_t)g->kw;
    if ((size_t)g->kh * wfull * (size_t)nc <= CAP) { /* whole rows, as many as fit (up to ~PTILE pixels) */
      const int fit = (int)(CAP / (wfull * (size_t)nc) - (size_t)g->kh) / qs + 1;
      R = imin(imin(fit, g->oh), imax(1, (PTILE + g->ow - 1) / g->ow));
    } else { /* part of a row */
      T = imin(g->ow, (int)((CAP / ((size_t)g->kh * (size_t)nc) - (size_t)g->kw) / (size_t)cs) + 1);
    }
  }
  float *const panel = s->panel, *const wt = s->wt, *const tile = s->tile;
  ptrdiff_t *const aoff = s->off, *const boff = s->off2;
  int y0 = 0, x0 = 0;
  size_t p0 = 0;
  while (p0 < oplane) {
    /* This tile: output pixels p0 .. p0+cnt-1, and for the panel, rows y0 .. y0+rows-1 and
     * columns x0 .. x0+tw-1 (whole rows, or a part of one row). */
    const int rows = direct ? 0 : imin(R, g->oh - y0), tw = direct ? 0 : imin(T, g->ow - x0);
    const size_t cnt = direct ? oplane : (size_t)rows * (size_t)tw; /* (direct: one tile, weights packed once) */
    const int Q = (rows - 1) * qs + g->kh, Wc = (tw - 1) * cs + g->kw;
    for (int c0 = 0; c0 < g->ic; c0 += nc) {
      const int ncur = imin(nc, g->ic - c0), nk = ncur * taps, first = c0 == 0, last = c0 + ncur == g->ic;
      if (!direct) { /* the window of input channels c0 .. c0+ncur-1 */
        for (int q = 0; q < Q; ++q) {
          const int iy = g->sh <= g->kh ? y0 * g->sh - g->pt + q : (y0 + q / g->kh) * g->sh - g->pt + q % g->kh;
          for (int col = 0; col < Wc; ++col) {
            const int ix = g->sw <= g->kw ? x0 * g->sw - g->pl + col : (x0 + col / g->kw) * g->sw - g->pl + col % g->kw;
            float* dst = panel + ((size_t)q * Wc + col) * ncur;
            if (iy < 0 || iy >= g->ih || ix < 0 || ix >= g->iw) {
              zero_run(dst, ncur);
            } else {
              const float* src = ifmap + (size_t)c0 * in.channel + ((size_t)iy * g->iw + ix) * in.pixel;
              if (in.channel == 1) copy_run(dst, src, ncur, 1);
              else for (int c = 0; c < ncur; ++c) dst[c] = src[c * in.channel];
            }
          }
        }
      }
      for (int k = 0, c = 0, ky = 0, kx = 0; k < nk; ++k) { /* tap (c, ky, kx) relative to a pixel's start */
        aoff[k] = direct ? (ptrdiff_t)c * (ptrdiff_t)in.channel + ((ptrdiff_t)ky * g->iw + kx) * (ptrdiff_t)in.pixel
                         : ((ptrdiff_t)ky * Wc + kx) * ncur + c;
        if (++kx == g->kw) { kx = 0; if (++ky == g->kh) { ky = 0; ++c; } }
      }
      for (int o0 = 0; o0 < g->oc; o0 += NR) {
        const int nb = imin(NR, g->oc - o0), L = nb <= NH ? NH : NR;
        for (int x = 0; x < L; ++x) { /* wt[k][x] = weights[o0 + x][c0*taps + k], zero past oc */
          if (x < nb) {
            const float* w = weights + (size_t)(o0 + x) * K + (size_t)c0 * taps;
            for (int k = 0; k < nk; ++k) wt[k * L + x] = w[k];
          } else {
            for (int k = 0; k < nk; ++k) wt[k * L + x] = 0.0f;
          }
        }
        for (int k = 0; k < nk; ++k) boff[k] = (ptrdiff_t)k * L;
        lanes_t lane;
        const lanes_t* lanes = last ? lanes_of(&lane, st, o0, nb) : NULL;
        /* the block's first pixel: output row y, column x (direct), or tile row r, column x (panel) */
        int y = direct ? (int)(p0 / (size_t)g->ow) : 0, x = direct ? (int)(p0 % (size_t)g->ow) : 0;
        const int wrap = direct ? g->ow : tw;
        for (size_t p = 0; p < cnt; p += MR) {
          const int np = (int)(cnt - p < MR ? cnt - p : MR);
          const float* a[MR]; /* missing pixels of a partial block reuse the last one */
          for (int i = 0, yi = y, xi = x; i < MR; ++i) {
            a[i] = direct ? ifmap + (size_t)c0 * in.channel + ((size_t)yi * g->sh * g->iw + (size_t)xi * g->sw) * in.pixel
                          : panel + ((size_t)yi * qs * Wc + (size_t)xi * cs) * ncur;
            if (i + 1 < np && ++xi == wrap) { xi = 0; ++yi; }
          }
          for (int i = 0; i < np; ++i) /* the next block's first pixel */
            if (++x == wrap) { x = 0; ++y; }
          const size_t pix = p0 + p;
          const block_t b = g->nhwc ? block(result, pix * g->oc + o0, (size_t)g->oc, 1, np, nb, BY_LANE, o0, lanes)
                                    : block(result, (size_t)o0 * oplane + pix, 1, oplane, np, nb, BY_LANE, o0, lanes);
          size_t ld;
          float* out = open_block(&b, tile, &ld, !first);
          (L == NR ? gemm : gemm_half)(nk, a, aoff, wt, boff, out, ld, !first);
          close_block(&b, out, ld, last ? st : NULL);
        }
      }
    }
    p0 += cnt;
    if (!direct) {
      x0 += tw;
      if (x0 == g->ow) { x0 = 0; y0 += rows; }
    }
  }
}

/* Any window (kh*kw above KMAX, NHWC): output by output, the same chain of multiply-adds. */
static void conv_generic(const float* ifmap, const float* weights, float* result, const conv_t* g,
                         const stage_t* st, const scratch_t* s) {
  const int taps = g->kh * g->kw;
  const size_t K = (size_t)g->ic * (size_t)taps, iplane = (size_t)g->ih * g->iw, oplane = (size_t)g->oh * g->ow;
  const layout_t in = layout_of(g->nhwc, (size_t)g->ic, iplane);
  float* const tile = s->tile;
  for (int y = 0; y < g->oh; ++y)
    for (int x = 0; x < g->ow; ++x) {
      const size_t pix = (size_t)y * g->ow + x;
      for (int o0 = 0; o0 < g->oc; o0 += NR) {
        const int nb = imin(NR, g->oc - o0);
        lanes_t lane;
        const lanes_t* lanes = lanes_of(&lane, st, o0, nb);
        const block_t b = g->nhwc ? block(result, pix * g->oc + o0, 0, 1, 1, nb, BY_LANE, o0, lanes)
                                  : block(result, (size_t)o0 * oplane + pix, 0, oplane, 1, nb, BY_LANE, o0, lanes);
        size_t ld;
        float* out = open_block(&b, tile, &ld, 0);
        for (int o = 0; o < nb; ++o) {
          const float* w = weights + (size_t)(o0 + o) * K;
          float acc = 0.0f;
          for (int c = 0; c < g->ic; ++c)
            for (int ky = 0; ky < g->kh; ++ky) {
              const int iy = y * g->sh + ky - g->pt;
              for (int kx = 0; kx < g->kw; ++kx, ++w) {
                const int ix = x * g->sw + kx - g->pl;
                const float v = iy < 0 || iy >= g->ih || ix < 0 || ix >= g->iw
                                    ? 0.0f : ifmap[(size_t)c * in.channel + ((size_t)iy * g->iw + ix) * in.pixel];
                acc = MADD(v, *w, acc);
              }
            }
          out[o] = acc;
        }
        close_block(&b, out, ld, st);
      }
    }
}

/* Inlined into each entry (through run()) with its layout known, so that a program calling only
 * one layout's entries links only that layout's engines (-ffunction-sections, --gc-sections). */
/* NCHW: lanes along output rows (conv_rows) when rows are wide, or output channels too few to
 * fill lanes across them (conv_pixels, which also stores through a tile).  Measured: rows of 46
 * and more, or 4 channels, go faster along rows; rows of 24 and less with 10 channels and more
 * across channels. */
static int along_rows(const conv_t* g) {
  return g->ow >= 2 * NR || 2 * g->oc <= NH;
}

/* One column (audio as TFLite lays it out) is the same memory read as one row. */
static conv_t column_as_row(conv_t g) {
  if (g.iw == 1 && g.ow == 1 && g.kw == 1 && g.pl == 0) {
    conv_t t = g;
    t.ih = t.oh = 1, t.iw = g.ih, t.ow = g.oh, t.kh = 1, t.kw = g.kh, t.sh = 1, t.sw = g.sh, t.pt = 0, t.pl = g.pt;
    return t;
  }
  return g;
}

/* The geometry as the engine computes it (a dense 1x1: the whole plane as one long row). */
static ALWAYS_INLINE conv_t prepared(conv_t g, int kind) {
  g = column_as_row(g); /* (depthwise weights [c][kh][1] are [c][1][kh]) */
  if (kind != DEPTHWISE && g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.pt == 0 && g.pl == 0 &&
      g.oh == g.ih && g.ow == g.iw && (size_t)g.ih * g.iw <= INT_MAX / 2) {
    g.iw = g.ow = g.ih * g.iw;
    g.ih = g.oh = 1;
  }
  return g;
}

/* The engine that computes a prepared geometry. */
static ALWAYS_INLINE int engine_of(const conv_t* g, int kind) {
  if (kind == DEPTHWISE) return g->nhwc ? DW_PIXELS : DW_ROWS;
  const int taps_fit = g->kh * g->kw <= KMAX;
  if (g->nhwc) return taps_fit ? PIXELS : GENERIC;
  return !taps_fit || along_rows(g) ? ROWS : PIXELS;
}

/* ---------------------------------------------------------------------------------------------
 * Depthwise convolution: output channel c reads input channel c only; weights [c][kh][kw]. */

/* NCHW: MR output rows x NR output columns of one channel per block.  A block of output rows
 * reads its input rows from a zero-padded panel: per input row, one run of columns per phase
 * kx % sw (at stride 1 one run, the kernel's columns sliding along it), so that tap (ky, kx) of
 * every output row is at one offset from the row's start and the lanes read contiguous floats.
 * The columns outside the image are the same for every row of a tile: zeroed once. */
static void depthwise_rows(const float* ifmap, const float* weights, float* result, const conv_t* g,
                           const stage_t* st, const scratch_t* s) {
  const int taps = g->kh * g->kw, qs = imin(g->sh, g->kh), P = imin(g->sw, g->kw), dcol = (g->kw - 1) / g->sw;
  const size_t iplane = (size_t)g->ih * g->iw, oplane = (size_t)g->oh * g->ow;
  int tw = imin(round_up(g->ow, NR), 8 * NR); /* output columns per tile: kh rows of it fit (CAP) */
  while (tw > NR && (size_t)g->kh * (size_t)P * (size_t)(tw + dcol) > CAP) tw -= NR;
  float *const panel = s->panel, *const tile = s->tile;
  ptrdiff_t* const toff = s->off;
  span_t* const run = s->run; /* per phase */
  const float* p[MR];
  for (int x0 = 0; x0 < g->ow; x0 += tw) {
    const int n = imin(tw, g->ow - x0), nr = round_up(n, NR), width = nr + dcol, rowlen = P * width;
    int rb = imin(g->oh, (CAP / rowlen - g->kh) / qs + 1); /* output rows per panel, whole blocks if it can */
    if (rb < g->oh && rb > MR) rb = rb / MR * MR;
    for (int j = 0; j < taps; ++j) {
      const int ky = j / g->kw, kx = j % g->kw;
      toff[j] = (ptrdiff_t)ky * rowlen + (ptrdiff_t)(kx % g->sw) * width + kx / g->sw;
    }
    for (int ph = 0; ph < P; ++ph) run[ph] = span(width, x0 * g->sw + ph - g->pl, g->sw, g->iw);
    memset(panel, 0, CAP * sizeof(float));
    for (int c = 0; c < g->oc; ++c) {
      const float* w = weights + (size_t)c * taps;
      for (int y0 = 0; y0 < g->oh; y0 += rb) {
        const int nrow = imin(rb, g->oh - y0), Q = (nrow - 1) * qs + g->kh;
        for (int q = 0; q < Q; ++q) { /* panel row q: input row (y0 + r)*sh - pt + ky for q = r*qs + ky */
          const int iy = g->sh <= g->kh ? y0 * g->sh - g->pt + q : (y0 + q / g->kh) * g->sh - g->pt + q % g->kh;
          float* row = panel + (size_t)q * rowlen;
          if (iy < 0 || iy >= g->ih) {
            memset(row, 0, (size_t)rowlen * sizeof(float));
            continue;
          }
          const float* src = ifmap + (size_t)c * iplane + (size_t)iy * g->iw;
          const ptrdiff_t col0 = (ptrdiff_t)x0 * g->sw - g->pl; /* input column of phase 0's first element */
          if (P == 2 && g->sw == 2) { /* the input columns cl .. ch-1 the two phases read, in one pass */
            const ptrdiff_t cl = col0 > 0 ? col0 : 0, end = col0 + 2 * (ptrdiff_t)width;
            const ptrdiff_t ch = end < g->iw ? end : g->iw, d = cl - col0; /* column c: phase (c-col0)&1, (c-col0)>>1 */
            if (cl < ch) {
              float* even = row + (d & 1) * width + (d >> 1);          /* columns cl, cl+2, ... */
              float* odd = row + ((d + 1) & 1) * width + ((d + 1) >> 1); /* columns cl+1, cl+3, ... */
              split2(even, odd, src + cl, (int)((ch - cl) / 2));
              if ((ch - cl) & 1) even[(ch - cl) / 2] = src[ch - 1];
            }
          } else {
            for (int ph = 0; ph < P; ++ph)
              if (run[ph].lo < run[ph].hi)
                copy_run(row + ph * width + run[ph].lo, src + (col0 + ph + (ptrdiff_t)run[ph].lo * g->sw),
                         run[ph].hi - run[ph].lo, g->sw);
          }
        }
        for (int r0 = 0; r0 < nrow; r0 += MR) {
          const int nb = imin(MR, nrow - r0);
          for (int xs = 0; xs < nr; xs += NR) {
            for (int i = 0; i < MR; ++i) /* rows past the block's reuse its last */
              p[i] = panel + (size_t)(r0 + imin(i, nb - 1)) * qs * rowlen + xs;
            const block_t b = block(result, (size_t)c * oplane + (size_t)(y0 + r0) * g->ow + (size_t)(x0 + xs),
                                    (size_t)g->ow, 1, nb, imin(NR, n - xs), ONE, c, NULL);
            size_t ld;
            float* out = open_block(&b, tile, &ld, 0);
            dw_taps(taps, w, p, toff, out, ld);
            close_block(&b, out, ld, st);
          }
        }
      }
    }
  }
}

/* NHWC: MR output pixels of a row x NR channels per block.  Per group of channels (all of them
 * unless that is too many), input rows go through a ring of zero-padded panel rows ([column]
 * [channel], laid out like the input, so a row inside the image is one copy), each copied once
 * however many output rows read it.  Pixel x's window starts cs = min(sw, kw) columns after
 * pixel x-1's, so tap (ky, kx) is at one offset from every pixel's start.  When NR does not
 * divide the channels, the last block of lanes overlaps the one before (recomputing the same
 * values), so blocks stay whole; with fewer channels than NR, a block reads on into the next
 * column (or the panel's slack), values its zero weights ignore. */
static void depthwise_pixels(const float* ifmap, const float* weights, float* result, const conv_t* g,
                             const stage_t* st, const scratch_t* s) {
  enum { ROOM = CAP - NR }; /* panel floats for the ring (NR of slack after it) */
  const int taps = g->kh * g->kw, C = g->oc, cs = imin(g->sw, g->kw);
  const size_t wfull = (size_t)(g->ow - 1) * (size_t)cs + (size_t)g->kw;
  /* G channels per group and T output columns per tile such that kh panel rows fit: kh*kw*NR <=
   * ROOM, so T = 1 and G = NR always do. */
  int G = C, T = g->ow;
  {
    const size_t wmin = (size_t)(imin(g->ow, MR) - 1) * (size_t)cs + (size_t)g->kw;
    if ((size_t)g->kh * wmin * (size_t)G > ROOM) G = imax(NR, (int)(ROOM / ((size_t)g->kh * wmin)) / NR * NR);
    if ((size_t)g->kh * wfull * (size_t)G > ROOM)
      T = imin(g->ow, (int)((ROOM / ((size_t)g->kh * (size_t)G) - (size_t)g->kw) / (size_t)cs) + 1);
    if (T < g->ow && T > MR) T = T / MR * MR; /* tiles of whole blocks */
  }
  float *const panel = s->panel, *const wt = s->wt, *const tile = s->tile; /* wt: taps*G <= ROOM */
  ptrdiff_t* const toff = s->off;
  const float* p[MR];
  for (int g0 = 0; g0 < C; g0 += G) {
    const int gc = imin(G, C - g0), wl = round_up(gc, NR); /* the group's channels; weight lanes */
    for (int j = 0; j < taps; ++j)
      for (int x = 0; x < wl; ++x) wt[j * wl + x] = x < gc ? weights[(size_t)(g0 + x) * taps + j] : 0.0f;
    for (int x0 = 0; x0 < g->ow; x0 += T) {
      const int tw = imin(T, g->ow - x0), Wc = (tw - 1) * cs + g->kw, rowf = Wc * gc, ring = ROOM / rowf;
      /* the columns inside the image (contiguous when cs == sw) */
      const span_t cols = cs == g->sw ? span(Wc, x0 * g->sw - g->pl, 1, g->iw) : span(0, 0, 1, 1);
      const int whole = cs == g->sw && gc == C; /* a row's columns are one run of the input */
      int have_lo = 0, have_hi = 0; /* rows m = iy + pt in [have_lo, have_hi) are in slot m % ring */
      memset(panel, 0, ((size_t)ring * rowf + NR) * sizeof(float));
      for (int y = 0; y < g->oh; ++y) {
        const int ms = y * g->sh; /* rows ms .. ms+kh-1, i.e. input rows y*sh - pt + ky */
        if (ms < have_lo || ms > have_hi) have_lo = have_hi = ms;
        for (int m = imax(have_hi, ms); m < ms + g->kh; ++m) {
          const int iy = m - g->pt;
          float* row = panel + (size_t)(m % ring) * rowf;
          if (iy < 0 || iy >= g->ih) {
            memset(row, 0, (size_t)rowf * sizeof(float));
          } else if (whole) {
            if (cols.lo < cols.hi)
              copy_run(row + (size_t)cols.lo * C,
                       ifmap + ((size_t)iy * g->iw + (size_t)(x0 * g->sw - g->pl + cols.lo)) * C,
                       (cols.hi - cols.lo) * C, 1);
          } else { /* column by column (columns outside the image stay zero) */
            for (int col = 0; col < Wc; ++col) {
              const int ix = cs == g->sw ? x0 * g->sw - g->pl + col : (x0 + col / g->kw) * g->sw - g->pl + col % g->kw;
              if (ix >= 0 && ix < g->iw)
                copy_run(row + (size_t)col * gc, ifmap + ((size_t)iy * g->iw + ix) * C + g0, gc, 1);
            }
          }
        }
        have_hi = imax(have_hi, ms + g->kh);
        if (have_hi - have_lo > ring) have_lo = have_hi - ring;
        const int s0 = ms % ring;
        for (int j = 0; j < taps; ++j)
          toff[j] = (ptrdiff_t)((ms + j / g->kw) % ring - s0) * rowf + (ptrdiff_t)(j % g->kw) * gc;
        for (int c0 = 0;; c0 += NR) {
          if (gc >= NR && c0 > gc - NR) c0 = gc - NR; /* the last block overlaps the one before: whole */
          const int nc = imin(NR, gc - c0);
          lanes_t lane;
          const lanes_t* lanes = lanes_of(&lane, st, g0 + c0, nc);
          for (int xl = 0; xl < tw; xl += MR) {
            const int np = imin(MR, tw - xl);
            for (int i = 0; i < MR; ++i) /* pixels past the block's reuse its last */
              p[i] = panel + (size_t)s0 * rowf + (size_t)(xl + imin(i, np - 1)) * cs * gc + c0;
            const block_t b = block(result, ((size_t)y * g->ow + (size_t)(x0 + xl)) * C + g0 + c0, (size_t)C, 1, np, nc,
                                    BY_LANE, g0 + c0, lanes);
            size_t ld;
            float* out = open_block(&b, tile, &ld, 0);
            dw_lanes(taps, wt + c0, (size_t)wl, p, toff, out, ld);
            close_block(&b, out, ld, st);
          }
          if (c0 + nc == gc) break;
        }
      }
    }
  }
}

/* ---------------------------------------------------------------------------------------------
 * Entries */

/* The output stage as the entries give it; NULL when it has nothing to do. */
static const stage_t* make_stage(stage_t* s, const float* bias, const float* residual, const float* slope, float lo,
                                 float hi) {
  s->bias = bias, s->residual = residual, s->slope = slope;
  s->lo = lo <= -FLT_MAX ? -INFINITY : lo; /* -FLT_MAX .. FLT_MAX clamps nothing, not even an infinity */
  s->hi = hi >= FLT_MAX ? INFINITY : hi;
  s->clamp = s->lo != -INFINITY || s->hi != INFINITY;
  return bias == NULL && residual == NULL && slope == NULL && !s->clamp ? NULL : s;
}

/* The scratch bytes the engine of a valid geometry needs: its arrays, and room to align them. */
static size_t scratch_bytes(int engine) {
  scratch_t s;
  return carve(&s, NULL, engine) + ALIGN;
}

static ALWAYS_INLINE int32_t run(const kit_conv_f32_context* ctx, const float* ifmap, const float* weights,
                                  const float* bias, const float* residual, const float* slope, float* result,
                                  conv_t g, float lo, float hi, int kind) {
  const int32_t status = check(ifmap, weights, result, &g, lo, hi, kind);
  if (status != KIT_CONV_F32_OK) return status;
  g = prepared(g, kind);
  const int engine = engine_of(&g, kind);
  if (ctx == NULL || ctx->buf == NULL || ctx->size < 0 || (size_t)ctx->size < scratch_bytes(engine))
    return KIT_CONV_F32_EBUFFER;
  scratch_t sc;
  carve(&sc, (unsigned char*)ctx->buf + (ALIGN - (uintptr_t)ctx->buf % ALIGN) % ALIGN, engine);
  stage_t s;
  const stage_t* st = make_stage(&s, bias, residual, slope, lo, hi);
  switch (engine) {
    case ROWS: conv_rows(ifmap, weights, result, &g, st, &sc); break;
    case PIXELS: conv_pixels(ifmap, weights, result, &g, st, &sc); break;
    case GENERIC: conv_generic(ifmap, weights, result, &g, st, &sc); break;
    case DW_ROWS: depthwise_rows(ifmap, weights, result, &g, st, &sc); break;
    default: depthwise_pixels(ifmap, weights, result, &g, st, &sc); break;
  }
  return KIT_CONV_F32_OK;
}

/* The geometry as the engine keeps it. */
static conv_t conv_of(const kit_conv_f32_geometry* g, int nhwc) {
  const conv_t c = {g->oc, g->ic, g->ih, g->iw, g->oh, g->ow, g->kh, g->kw, g->stride_h, g->stride_w, g->pad_top,
                    g->pad_left, nhwc};
  return c;
}

int32_t kit_conv_f32_check(const float* ifmap, const float* weights, float* result,
                           const kit_conv_f32_geometry* geometry, float lo, float hi, int32_t depthwise) {
  if (geometry == NULL) return KIT_CONV_F32_EINVAL;
  const conv_t g = conv_of(geometry, 0);
  return check(ifmap, weights, result, &g, lo, hi, depthwise ? DEPTHWISE : CONV);
}

int32_t kit_conv_f32_get_buffer_size(const kit_conv_f32_geometry* geometry, int32_t depthwise, int32_t nhwc) {
  static const float any = 0.0f; /* check() reads no tensor: a valid pointer stands for each */
  if (geometry == NULL) return 0;
  const int kind = depthwise ? DEPTHWISE : CONV;
  conv_t g = conv_of(geometry, nhwc != 0);
  if (check(&any, &any, &any, &g, 0.0f, 0.0f, kind) != KIT_CONV_F32_OK) return 0;
  g = prepared(g, kind);
  return (int32_t)scratch_bytes(engine_of(&g, kind));
}

#define ENTRY(name, nhwc, kind)                                                                                    \
  int32_t name(const kit_conv_f32_context* ctx, const float* ifmap, const float* weights, const float* bias,      \
               const float* residual, const float* slope, float* result, const kit_conv_f32_geometry* geometry,  \
               float lo, float hi) {                                                                             \
    if (geometry == NULL) return KIT_CONV_F32_EINVAL;                                                            \
    return run(ctx, ifmap, weights, bias, residual, slope, result, conv_of(geometry, nhwc), lo, hi, kind);       \
  }

ENTRY(kit_conv2d_f32_nchw, 0, CONV)
ENTRY(kit_conv2d_f32_nhwc, 1, CONV)
ENTRY(kit_depthwise_conv2d_f32_nchw, 0, DEPTHWISE)
ENTRY(kit_depthwise_conv2d_f32_nhwc, 1, DEPTHWISE)
