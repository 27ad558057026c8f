/* Host mock of the Vanilla accelerator's Conv2D engine.
 *
 * Direct convolution, blocked for one CPU core in portable C99:
 *  - For each output row y and tile of up to TX output columns, the input rows the tile needs
 *    are copied into a zero-padded stack panel (one panel row per reduction row j = c*kh + ky),
 *    so the padding costs no branches and every row is contiguous and L1-resident.
 *  - A register block computes OB output channels x XS output pixels.  Its accumulators are
 *    written out per element (macros) so gcc's SLP vectoriser keeps them in SIMD registers,
 *    even at -O2: per reduction step it loads XS inputs, broadcasts OB weights, does OB*XS MACs.
 *  - If the panel cannot hold all reduction rows (or kernel columns) at once, they are processed
 *    in chunks and the partial sums go through `result`.
 * Every output's summation order depends only on the shape, so results are bit-for-bit
 * reproducible run to run.
 * The entries validate their arguments first (one status code per kind of problem, see the
 * header); past that, no index arithmetic can overflow and no pointer is formed outside a tensor
 * (rows outside the image are zero-filled without a source pointer). */
#include "vanilla_accelerator.h"

#include <float.h>
#include <math.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* At -O3 gcc's loop vectoriser vectorises block()'s reduction loop across j with lane shuffles,
 * ~5x slower than the SLP code below.  Turning that pass off changes nothing at -O2 (gcc 12);
 * other compilers ignore this. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-tree-loop-vectorize")
#endif

/* block() must stay out of line: inlined into the loop nest below, gcc 12 no longer keeps its
 * accumulators in SIMD registers (~3x slower at -O2). */
#if defined(__GNUC__)
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE
#endif

enum {
  OB = 4,     /* output channels per register block */
  XS = 8,     /* output pixels per register block (the macros below are written for 4 x 8) */
  TX = 64,    /* output pixels per panel tile */
  CAP = 2048  /* floats in the stack panel (8 KB) */
};

static int imin(int a, int b) { return a < b ? a : b; }
static int imax(int a, int b) { return a > b ? a : b; }

/* acc[o][0..7] += wv * r[0..7], spelled out so the accumulators stay in registers. */
#define MAC(o, wv) { const float w_ = (wv); \
  acc[o][0] += w_ * r[0]; acc[o][1] += w_ * r[1]; acc[o][2] += w_ * r[2]; acc[o][3] += w_ * r[3]; \
  acc[o][4] += w_ * r[4]; acc[o][5] += w_ * r[5]; acc[o][6] += w_ * r[6]; acc[o][7] += w_ * r[7]; }
#define ROW(o, S) S(o, 0) S(o, 1) S(o, 2) S(o, 3) S(o, 4) S(o, 5) S(o, 6) S(o, 7)
#define ALL(S) ROW(0, S) ROW(1, S) ROW(2, S) ROW(3, S)
#define LOAD(o, x) acc[o][x] = out[o * os + x];
#define ZERO(o, x) acc[o][x] = 0.0f;
#define STORE(o, x) out[o * os + x] = acc[o][x];

/* out[o*os + x] (+)= sum_kx sum_j w_o[j*kw + kx] * panel[j*W + kx + x] for o < 4, x < 8. */
NOINLINE static void block(const float* restrict panel, int nj, int W, int nkx, int kw,
                           const float* restrict w0, const float* restrict w1, const float* restrict w2,
                           const float* restrict w3, float* restrict out, size_t os, int accumulate) {
  float acc[OB][XS];
  if (accumulate) { ALL(LOAD) } else { ALL(ZERO) }
  for (int kx = 0; kx < nkx; ++kx) {
    for (int j = 0; j < nj; ++j) { /* j innermost: consecutive steps read different panel rows */
      const float* r = panel + (size_t)j * W + kx;
      const size_t k = (size_t)j * kw + kx;
      MAC(0, w0[k]) MAC(1, w1[k]) MAC(2, w2[k]) MAC(3, w3[k])
    }
  }
  ALL(STORE)
}

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

enum { MAX_TAPS = 64 }; /* depthwise: kh*kw limit (NHWC's window buffer) */

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

enum { CONV, DEPTHWISE, SAME }; /* kinds of entry for check() */

/* The entries' validation: a status code of the header, in the header's order. */
static int32_t check(const float* ifmap, const float* weights, const float* result, const conv_t* g, float lo,
                     float hi, int kind) {
  if (ifmap == NULL || weights == NULL || result == NULL) return VANILLA_EINVAL;
  if (g->oc <= 0 || g->ic <= 0 || g->ih <= 0 || g->iw <= 0 || g->oh <= 0 || g->ow <= 0 || g->kh <= 0 || g->kw <= 0)
    return VANILLA_ESIZE;
  if (g->sh <= 0 || g->sw <= 0) return VANILLA_ESTRIDE;
  if (g->pt < 0 || g->pl < 0) return VANILLA_EPAD;
  if (!(lo <= hi)) return VANILLA_ECLAMP;
  if (kind == SAME && (g->kh % 2 == 0 || g->kw % 2 == 0)) return VANILLA_EEVEN;
  if (kind == DEPTHWISE && (g->kh > MAX_TAPS || g->kw > MAX_TAPS || g->kh * g->kw > MAX_TAPS)) return VANILLA_ETAPS;
  size_t in = 1, out = 1, w = 1;
  if (!fits(&in, g->ic) || !fits(&in, g->ih) || !fits(&in, g->iw) || !fits(&out, g->oc) || !fits(&out, g->oh) ||
      !fits(&out, g->ow) || !fits(&w, g->oc) || (kind != DEPTHWISE && !fits(&w, g->ic)) || !fits(&w, g->kh) ||
      !fits(&w, g->kw) || (int64_t)g->kh * g->kw > INT_MAX || !extent_ok(g->oh, g->sh, g->kh) ||
      !extent_ok(g->ow, g->sw, g->kw))
    return VANILLA_ERANGE;
  return VANILLA_OK;
}

/* panel[q] = src[(col0 + q*step) * pixel] for q < W, zero where that column is outside 0 .. iw-1
 * (or everywhere, for a row outside the image: src == NULL, never offset).  The q in [lo, hi) read
 * the image; the others, however far the padding reaches, are zeros within panel[0 .. W-1].
 * col0 = x*stride + kx - pad >= -INT_MAX: -col0 fits an int, iw - 1 - col0 (< 2*INT_MAX) an unsigned. */
static void fill_row(float* restrict panel, int W, const float* src, int col0, int step, int iw, size_t pixel) {
  int lo = W, hi = W;
  if (src != NULL && col0 < iw) {
    const int first = col0 >= 0 ? 0 : (-col0 - 1) / step + 1; /* the first q at a column >= 0 */
    const unsigned end = ((unsigned)iw - 1u - (unsigned)col0) / (unsigned)step + 1u; /* the first q right of it */
    lo = first < W ? first : W;
    hi = end < (unsigned)W ? (int)end : W;
    if (hi < lo) hi = lo;
  }
  for (int q = 0; q < lo; ++q) panel[q] = 0.0f;
  if (lo < hi) { /* 0 <= col0 + lo*step < iw */
    const float* s = src + ((ptrdiff_t)col0 + (ptrdiff_t)lo * step) * (ptrdiff_t)pixel;
    if (pixel == 1 && step == 1) {
      memcpy(panel + lo, s, (size_t)(hi - lo) * sizeof(float));
    } else {
      const size_t stride = (size_t)step * pixel;
      for (int q = lo; q < hi; ++q, s += stride) panel[q] = *s;
    }
  }
  for (int q = hi; q < W; ++q) panel[q] = 0.0f;
}

/* NHWC 1x1 convolution: a matrix product result[p][o] = sum_c ifmap[p][c] * weights[o][c] over
 * the plane's pixels p.  block() runs with its roles swapped: the panel holds the weights,
 * transposed to [c][o], once per tile of output channels (not per pixel row), the register
 * block's four "weight rows" are four pixels' channel vectors, and its eight contiguous lanes
 * are output channels, which NHWC keeps contiguous, so nothing is gathered or scattered.
 * Each output sums c = 0 .. ic-1 in order, as the NCHW path does: the same bits. */
static void pointwise_nhwc(const float* ifmap, const float* weights, float* result, int oc, int ic, size_t pixels) {
  const int fit = (CAP / ic) / XS * XS; /* output channels per tile that keep all of c in one panel */
  const int to = imin(imax(fit, XS), (oc + XS - 1) / XS * XS);
  float panel[CAP];
  for (int o0 = 0; o0 < oc; o0 += to) {
    const int no = imin(to, oc - o0), nr = (no + XS - 1) / XS * XS, jstep = CAP / nr;
    for (int c0 = 0; c0 < ic; c0 += jstep) {
      const int nj = imin(jstep, ic - c0), first = c0 == 0;
      for (int j = 0; j < nj; ++j)
        for (int q = 0; q < nr; ++q) panel[j * nr + q] = q < no ? weights[(size_t)(o0 + q) * ic + c0 + j] : 0.0f;
      for (size_t p0 = 0; p0 < pixels; p0 += OB) {
        const int np = (int)(pixels - p0 < OB ? pixels - p0 : OB);
        const float* px[OB]; /* missing pixels of a partial block reuse the last one */
        for (int o = 0; o < OB; ++o) px[o] = ifmap + (p0 + (size_t)(o < np ? o : np - 1)) * ic + c0;
        for (int xs = 0; xs < nr; xs += XS) {
          float* dst = result + p0 * oc + o0 + xs;
          const int nx = imin(XS, no - xs), direct = np == OB && nx == XS;
          float tile[OB * XS];
          if (!direct && !first) {
            memset(tile, 0, sizeof tile);
            for (int o = 0; o < np; ++o)
              for (int x = 0; x < nx; ++x) tile[o * XS + x] = dst[(size_t)o * oc + x];
          }
          block(panel + xs, nj, nr, 1, 1, px[0], px[1], px[2], px[3], direct ? dst : tile,
                direct ? (size_t)oc : XS, !first);
          if (!direct)
            for (int o = 0; o < np; ++o)
              for (int x = 0; x < nx; ++x) dst[(size_t)o * oc + x] = tile[o * XS + x];
        }
      }
    }
  }
}

/* The convolution engine. */
static void conv2d(const float* ifmap, const float* weights, float* result, conv_t g) {
  const layout_t in = layout_of(g.nhwc, (size_t)g.ic, (size_t)g.ih * g.iw);
  const layout_t out = layout_of(g.nhwc, (size_t)g.oc, (size_t)g.oh * g.ow);
  const size_t plane = (size_t)g.ih * g.iw;
  if (g.iw == 1 && g.ow == 1 && g.kw == 1 && g.pl == 0) { /* one column (audio as TFLite lays it out): */
    conv_t t = g; /* the same memory read as one row, so the kernel's rows slide along the panel */
    t.ih = t.oh = 1, t.iw = g.ih, t.ow = g.oh, t.kh = 1, t.kw = g.kh, t.sh = 1, t.sw = g.sh, t.pt = 0, t.pl = g.pt;
    g = t;
  }
  if (g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.pt == 0 && g.pl == 0 && g.oh == g.ih && g.ow == g.iw &&
      plane <= INT_MAX / 2) { /* 1x1: the whole plane as one long row */
    g.iw = g.ow = (int)plane;
    g.ih = g.oh = 1;
  }
  /* Stride 1: a panel row is one input row (c, ky) and the kernel's columns slide along it.
   * Wider strides: one panel row per (c, ky, kx) holding every sw-th column, so the columns the
   * block reads stay contiguous; the weights' flat [ic][kh][kw] order is that row order. */
  const int slide = g.sw == 1;
  const int kslide = slide ? g.kw : 1, per_c = slide ? g.kh : g.kh * g.kw; /* panel rows per channel */
  const size_t nrows = (size_t)g.ic * per_c; /* reduction rows; weights w_o[j*kslide + kx] */
  int tx = imin(TX, (g.ow + XS - 1) / XS * XS);
  { /* Partial sums cost a pass through the result (NHWC: a gather and a scatter per block): narrow
     * the tile if that lets one panel hold the whole reduction (nrows x tile + kslide-1 columns).
     * Both layouts tile alike, so they sum in the same order and give the same bits. */
    const size_t per_row = CAP / nrows;
    const int fit = per_row > (size_t)(kslide - 1 + XS) ? (int)(per_row - (size_t)(kslide - 1)) / XS * XS : 0;
    if (fit > 0) tx = imin(tx, fit);
  }
  const int kxs = imin(kslide, CAP - TX + 1); /* kernel columns per panel; < kw only for huge kw */
  float panel[CAP];

  for (int y = 0; y < g.oh; ++y) {
    for (int x0 = 0; x0 < g.ow; x0 += tx) {
      const int n = imin(tx, g.ow - x0), nr = (n + XS - 1) / XS * XS;
      for (int kx0 = 0; kx0 < kslide; kx0 += kxs) {
        const int nkx = imin(kxs, kslide - kx0), W = nr + nkx - 1, jstep = CAP / W;
        for (size_t j0 = 0; j0 < nrows; j0 += (size_t)jstep) {
          const int nj = (int)(nrows - j0 < (size_t)jstep ? nrows - j0 : (size_t)jstep);
          const int first = (j0 == 0 && kx0 == 0);
          size_t c = j0 / per_c;
          int r = (int)(j0 % per_c); /* position within channel c: ky (slide) or ky*kw + kx */
          for (int j = 0; j < nj; ++j) {
            const int ky = slide ? r : r / g.kw, kx = slide ? kx0 : r % g.kw;
            const int iy = y * g.sh + ky - g.pt;
            const float* src = iy < 0 || iy >= g.ih ? NULL : ifmap + c * in.channel + (size_t)iy * g.iw * in.pixel;
            fill_row(panel + (size_t)j * W, W, src, x0 * g.sw + kx - g.pl, g.sw, g.iw, in.pixel);
            if (++r == per_c) { r = 0; ++c; }
          }
          for (int ob = 0; ob < g.oc; ob += OB) {
            const int no = imin(OB, g.oc - ob);
            const float* w[OB]; /* missing channels of a partial block reuse the last one */
            for (int o = 0; o < OB; ++o)
              w[o] = weights + (size_t)(o < no ? ob + o : g.oc - 1) * nrows * kslide + j0 * kslide + kx0;
            for (int xs = 0; xs < nr; xs += XS) {
              float* dst = result + (size_t)ob * out.channel + ((size_t)y * g.ow + x0 + xs) * out.pixel;
              /* A block of contiguous pixels is written in place; a partial block (channel or
               * column tail) or an NHWC block goes through a small [OB][XS] tile. */
              const int nx = imin(XS, n - xs), direct = (no == OB && nx == XS && out.pixel == 1);
              float tile[OB * XS];
              if (!direct && !first) { /* zero it, then load the valid partial sums */
                memset(tile, 0, sizeof tile);
                for (int o = 0; o < no; ++o)
                  for (int x = 0; x < nx; ++x) tile[o * XS + x] = dst[o * out.channel + x * out.pixel];
              }
              block(panel + xs, nj, W, nkx, kslide, w[0], w[1], w[2], w[3], direct ? dst : tile,
                    direct ? out.channel : XS, !first);
              if (!direct)
                for (int o = 0; o < no; ++o)
                  for (int x = 0; x < nx; ++x) dst[o * out.channel + x * out.pixel] = tile[o * XS + x];
            }
          }
        }
      }
    }
  }
}

/* Depthwise convolution: output channel c reads input channel c only; weights [c][kh][kw].
 * Every output sums its taps in (ky, kx) order from 0 (a tap outside the input adds zero or is
 * skipped), in both layouts, so NCHW and NHWC give the same bits (for finite values). */
#define LANES(S) S(0) S(1) S(2) S(3) S(4) S(5) S(6) S(7)

static void depthwise_nchw(const float* ifmap, const float* weights, float* result, const conv_t* g) {
  /* As in conv2d(): at stride 1 a panel row is an input row (ky) and the kernel's columns slide
   * along it; wider strides take one row per tap (ky, kx) holding every sw-th column. */
  const int slide = g->sw == 1, kslide = slide ? g->kw : 1, rows = slide ? g->kh : g->kh * g->kw;
  const int tw = imin((CAP / rows - (kslide - 1)) / XS * XS, (g->ow + XS - 1) / XS * XS); /* pixels per panel */
  const size_t iplane = (size_t)g->ih * g->iw, oplane = (size_t)g->oh * g->ow;
  float panel[CAP];
  for (int c = 0; c < g->oc; ++c) {
    const float* w = weights + (size_t)c * g->kh * g->kw; /* [ky][kx] = [row j][kx] in both modes */
    for (int y = 0; y < g->oh; ++y) {
      for (int x0 = 0; x0 < g->ow; x0 += tw) {
        const int n = imin(tw, g->ow - x0), nr = (n + XS - 1) / XS * XS, W = nr + kslide - 1;
        for (int j = 0; j < rows; ++j) {
          const int ky = slide ? j : j / g->kw, kx = slide ? 0 : j % g->kw, iy = y * g->sh + ky - g->pt;
          const float* src = iy < 0 || iy >= g->ih ? NULL : ifmap + c * iplane + (size_t)iy * g->iw;
          fill_row(panel + (size_t)j * W, W, src, x0 * g->sw + kx - g->pl, g->sw, g->iw, 1);
        }
        float* out = result + c * oplane + (size_t)y * g->ow + x0;
        for (int xs = 0; xs < nr; xs += XS) {
          float acc[XS] = {0};
          for (int j = 0; j < rows; ++j) {
            for (int kx = 0; kx < kslide; ++kx) { /* taps in (ky, kx) order, as the NHWC path */
              const float wj = w[j * kslide + kx], *r = panel + (size_t)j * W + xs + kx;
#define DW_MAC(i) acc[i] += wj * r[i];
              LANES(DW_MAC)
            }
          }
          for (int x = 0; x < imin(XS, n - xs); ++x) out[xs + x] = acc[x];
        }
      }
    }
  }
}

enum { CB = 64 }; /* NHWC depthwise: channels per chunk */

static void depthwise_nhwc(const float* ifmap, const float* weights, float* result, const conv_t* g) {
  const int taps = g->kh * g->kw, C = g->oc;
  float wt[MAX_TAPS * CB]; /* a chunk's weights as [tap][channel]: contiguous like the feature maps */
  for (int c0 = 0; c0 < C; c0 += CB) {
    const int nc = imin(CB, C - c0), n8 = nc / XS * XS;
    for (int j = 0; j < taps; ++j)
      for (int c = 0; c < nc; ++c) wt[j * CB + c] = weights[(size_t)(c0 + c) * taps + j];
    for (int y = 0; y < g->oh; ++y) {
      for (int x = 0; x < g->ow; ++x) {
        /* The pixel's taps inside the input, in (ky, kx) order: where they read, which weights. */
        const float* in[MAX_TAPS];
        const float* w[MAX_TAPS];
        int nt = 0;
        for (int j = 0; j < taps; ++j) {
          const int iy = y * g->sh + j / g->kw - g->pt, ix = x * g->sw + j % g->kw - g->pl;
          if (iy < 0 || iy >= g->ih || ix < 0 || ix >= g->iw) continue;
          in[nt] = ifmap + ((size_t)iy * g->iw + ix) * C + c0;
          w[nt++] = wt + j * CB;
        }
        float* out = result + ((size_t)y * g->ow + x) * C + c0;
        for (int c = 0; c < n8; c += XS) { /* 8 channels' sums stay in registers across the taps */
          float acc[XS] = {0};
          for (int t = 0; t < nt; ++t) {
            const float* restrict wc = w[t] + c, * restrict ic = in[t] + c;
#define DW_LANE(i) acc[i] += wc[i] * ic[i];
            LANES(DW_LANE)
          }
          memcpy(out + c, acc, sizeof acc);
        }
        for (int c = n8; c < nc; ++c) {
          float acc = 0.0f;
          for (int t = 0; t < nt; ++t) acc += w[t][c] * in[t][c];
          out[c] = acc;
        }
      }
    }
  }
}

/* The output stage after the convolution, one contiguous row per channel (NCHW) or pixel (NHWC):
 * v = conv + bias[o] + residual; v = v < 0 ? slope[o] * v : v (PReLU); result = clamp(v, lo, hi).
 * bias, residual and slope may each be NULL; lo = -FLT_MAX, hi = FLT_MAX clamps nothing (not even
 * an infinity).  One compact loop: a part left out adds 0 (a pointer that does not advance),
 * as does NCHW's per-row bias. */
static void output_stage(float* result, const float* bias, const float* residual, const float* slope, float lo,
                         float hi, const conv_t* g) {
  static const float zero = 0.0f;
  const size_t plane = (size_t)g->oh * (size_t)g->ow;
  const size_t rows = g->nhwc ? plane : (size_t)g->oc, n = g->nhwc ? (size_t)g->oc : plane;
  const size_t bstep = bias != NULL && g->nhwc, sstep = slope != NULL && g->nhwc, astep = residual != NULL;
  if (lo <= -FLT_MAX) lo = -INFINITY;
  if (hi >= FLT_MAX) hi = INFINITY;
  if (bias == NULL && residual == NULL && slope == NULL && lo == -INFINITY && hi == INFINITY) return;
  for (size_t r = 0; r < rows; ++r) {
    const float* b = bias == NULL ? &zero : g->nhwc ? bias : bias + r;
    const float* s = slope == NULL ? &zero : g->nhwc ? slope : slope + r;
    const float* a = residual == NULL ? &zero : residual + r * n;
    float* out = result + r * n;
    for (size_t i = 0; i < n; ++i, b += bstep, s += sstep, a += astep) {
      float v = out[i] + *b + *a;
      if (slope != NULL && v < 0.0f) v *= *s; /* the only data-dependent branch, and only for PReLU */
      v = v < lo ? lo : v;                    /* maxss, minss: no branches */
      out[i] = v > hi ? hi : v;
    }
  }
}

static int32_t run(const float* ifmap, const float* weights, const float* bias, const float* residual,
                   const float* slope, float* result, conv_t g, int stage, float lo, float hi, int kind) {
  const int32_t status = check(ifmap, weights, result, &g, lo, hi, kind);
  if (status != VANILLA_OK) return status;
  /* Tested here, not in conv2d(): inlined into an entry of known layout, an NCHW model's
   * program does not link the NHWC-only code. */
  if (g.nhwc && g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.pt == 0 && g.pl == 0 && g.oh == g.ih &&
      g.ow == g.iw)
    pointwise_nhwc(ifmap, weights, result, g.oc, g.ic, (size_t)g.ih * g.iw);
  else
    conv2d(ifmap, weights, result, g);
  if (stage) output_stage(result, bias, residual, slope, lo, hi, &g);
  return VANILLA_OK;
}

static int32_t run_depthwise(const float* ifmap, const float* weights, const float* bias, const float* residual,
                             const float* slope, float* result, conv_t g, float lo, float hi) {
  const int32_t status = check(ifmap, weights, result, &g, lo, hi, DEPTHWISE);
  if (status != VANILLA_OK) return status;
  if (g.nhwc) depthwise_nhwc(ifmap, weights, result, &g); else depthwise_nchw(ifmap, weights, result, &g);
  output_stage(result, bias, residual, slope, lo, hi, &g);
  return VANILLA_OK;
}

int32_t vanilla_depthwise_conv2dnchw(float* ifmap, float* weights, float* bias, float* residual, float* slope,
                                     float* result, int channels, int iw, int ih, int kh, int kw, int ow, int oh,
                                     int stride_w, int stride_h, int pad_left, int pad_top, float lo, float hi) {
  const conv_t g = {channels, channels, ih, iw, oh, ow, kh, kw, stride_h, stride_w, pad_top, pad_left, 0};
  return run_depthwise(ifmap, weights, bias, residual, slope, result, g, lo, hi);
}

int32_t vanilla_depthwise_conv2dnhwc(float* ifmap, float* weights, float* bias, float* residual, float* slope,
                                     float* result, int channels, int iw, int ih, int kh, int kw, int ow, int oh,
                                     int stride_w, int stride_h, int pad_left, int pad_top, float lo, float hi) {
  const conv_t g = {channels, channels, ih, iw, oh, ow, kh, kw, stride_h, stride_w, pad_top, pad_left, 1};
  return run_depthwise(ifmap, weights, bias, residual, slope, result, g, lo, hi);
}

int32_t vanilla_conv2dnchw_general(float* ifmap, float* weights, float* bias,
                                   float* residual, float* slope, float* result, int oc, int iw,
                                   int ih, int ic, int kh, int kw, int ow, int oh, int stride_w, int stride_h,
                                   int pad_left, int pad_top, float lo, float hi) {
  const conv_t g = {oc, ic, ih, iw, oh, ow, kh, kw, stride_h, stride_w, pad_top, pad_left, 0};
  return run(ifmap, weights, bias, residual, slope, result, g, 1, lo, hi, CONV);
}

int32_t vanilla_conv2dnhwc_general(float* ifmap, float* weights, float* bias,
                                   float* residual, float* slope, float* result, int oc, int iw,
                                   int ih, int ic, int kh, int kw, int ow, int oh, int stride_w, int stride_h,
                                   int pad_left, int pad_top, float lo, float hi) {
  const conv_t g = {oc, ic, ih, iw, oh, ow, kh, kw, stride_h, stride_w, pad_top, pad_left, 1};
  return run(ifmap, weights, bias, residual, slope, result, g, 1, lo, hi, CONV);
}

/* The "same"-padded stride-1 entries: odd kernels, output as large as the input. */
static int32_t same(const float* ifmap, const float* weights, const float* bias, const float* residual,
                    float* result, int oc, int iw, int ih, int ic, int kh, int kw, int nhwc, int stage, float lo,
                    float hi) {
  /* kh > 0 keeps kh - 1 from overflowing: check() reports a size below 1 before it looks at pads */
  const conv_t g = {oc, ic, ih, iw, ih, iw, kh, kw, 1, 1, kh > 0 ? (kh - 1) / 2 : 0, kw > 0 ? (kw - 1) / 2 : 0, nhwc};
  return run(ifmap, weights, bias, residual, NULL, result, g, stage, lo, hi, SAME);
}

int32_t vanilla_conv2dnchw(float* ifmap, float* weights, float* result, int oc, int iw, int ih, int ic,
                           int kh, int kw) {
  return same(ifmap, weights, NULL, NULL, result, oc, iw, ih, ic, kh, kw, 0, 0, 0.0f, 0.0f);
}

int32_t vanilla_conv2dnhwc(float* ifmap, float* weights, float* result, int oc, int iw, int ih, int ic,
                           int kh, int kw) {
  return same(ifmap, weights, NULL, NULL, result, oc, iw, ih, ic, kh, kw, 1, 0, 0.0f, 0.0f);
}

int32_t vanilla_conv2dnchw_clamp(float* ifmap, float* weights, float* result, int oc, int iw, int ih, int ic,
                                 int kh, int kw, float lo, float hi) {
  return same(ifmap, weights, NULL, NULL, result, oc, iw, ih, ic, kh, kw, 0, 1, lo, hi);
}

int32_t vanilla_conv2dnhwc_clamp(float* ifmap, float* weights, float* result, int oc, int iw, int ih, int ic,
                                 int kh, int kw, float lo, float hi) {
  return same(ifmap, weights, NULL, NULL, result, oc, iw, ih, ic, kh, kw, 1, 1, lo, hi);
}

int32_t vanilla_conv2dnchw_bias_clamp(float* ifmap, float* weights, float* bias, float* result, int oc, int iw,
                                      int ih, int ic, int kh, int kw, float lo, float hi) {
  if (bias == NULL) return VANILLA_EINVAL;
  return same(ifmap, weights, bias, NULL, result, oc, iw, ih, ic, kh, kw, 0, 1, lo, hi);
}

int32_t vanilla_conv2dnhwc_bias_clamp(float* ifmap, float* weights, float* bias, float* result, int oc, int iw,
                                      int ih, int ic, int kh, int kw, float lo, float hi) {
  if (bias == NULL) return VANILLA_EINVAL;
  return same(ifmap, weights, bias, NULL, result, oc, iw, ih, ic, kh, kw, 1, 1, lo, hi);
}

int32_t vanilla_conv2dnchw_bias_residual_clamp(float* ifmap, float* weights, float* bias, float* residual,
                                               float* result, int oc, int iw, int ih, int ic, int kh, int kw,
                                               float lo, float hi) {
  if (bias == NULL || residual == NULL) return VANILLA_EINVAL;
  return same(ifmap, weights, bias, residual, result, oc, iw, ih, ic, kh, kw, 0, 1, lo, hi);
}

int32_t vanilla_conv2dnhwc_bias_residual_clamp(float* ifmap, float* weights, float* bias, float* residual,
                                               float* result, int oc, int iw, int ih, int ic, int kh, int kw,
                                               float lo, float hi) {
  if (bias == NULL || residual == NULL) return VANILLA_EINVAL;
  return same(ifmap, weights, bias, residual, result, oc, iw, ih, ic, kh, kw, 1, 1, lo, hi);
}
