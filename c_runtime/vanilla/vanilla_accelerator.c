/* Host mock of the Vanilla accelerator's Conv2D engine.
 *
 * Direct convolution, blocked for one CPU core in portable C11:
 *  - For each output row y and tile of up to TX output columns, the input rows the tile needs
 *    are copied into a zero-padded stack panel (one panel row per reduction row j = c*kh + ky),
 *    so the padding costs no branches and every row is contiguous and L1-resident.
 *  - A register block computes OB output channels x XS output pixels.  Its accumulators are
 *    written out per element (macros) so gcc's SLP vectoriser keeps them in SIMD registers,
 *    even at -O2: per reduction step it loads XS inputs, broadcasts OB weights, does OB*XS MACs.
 *  - If the panel cannot hold all reduction rows (or kernel columns) at once, they are processed
 *    in chunks and the partial sums go through `result`.
 * Every output's summation order depends only on the shape, so results are bit-for-bit
 * reproducible run to run. */
#include "vanilla_accelerator.h"

#include <limits.h>
#include <stddef.h>
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

static int valid_sizes(const float* ifmap, const float* weights, const float* result, int oc, int iw, int ih,
                       int ic, int kh, int kw) {
  if (ifmap == NULL || weights == NULL || result == NULL) return 0;
  if (oc <= 0 || iw <= 0 || ih <= 0 || ic <= 0 || kh <= 0 || kw <= 0) return 0;
  return kh % 2 == 1 && kw % 2 == 1;
}

/* The convolution engine; `nhwc` selects the feature maps' layout, weights are always [oc][ic][kh][kw]. */
static void conv2d(const float* ifmap, const float* weights, float* result, int oc, int iw, int ih, int ic,
                   int kh, int kw, int nhwc) {
  const size_t plane = (size_t)ih * (size_t)iw;
  const layout_t in = layout_of(nhwc, (size_t)ic, plane), out = layout_of(nhwc, (size_t)oc, plane);
  if (kh == 1 && kw == 1 && plane <= INT_MAX / 2) { iw = (int)plane; ih = 1; } /* 1x1: one long row */
  const int ph = (kh - 1) / 2, pw = (kw - 1) / 2;
  const size_t nrows = (size_t)ic * kh; /* reduction rows j = c*kh + ky; w_o[j*kw + kx] */
  int tx = imin(TX, (iw + XS - 1) / XS * XS);
  if (nhwc) { /* NHWC partial sums cost a gather and a scatter per block: narrow the tile if that
               * lets one panel hold the whole reduction (ic*kh rows x tile + kw-1 columns). */
    const size_t per_row = CAP / nrows;
    const int fit = per_row > (size_t)(kw - 1 + XS) ? (int)(per_row - (size_t)(kw - 1)) / XS * XS : 0;
    if (fit > 0) tx = imin(tx, fit);
  }
  const int kxs = imin(kw, CAP - TX + 1); /* kernel columns per panel; < kw only for huge kw */
  float panel[CAP];

  for (int y = 0; y < ih; ++y) {
    for (int x0 = 0; x0 < iw; x0 += tx) {
      const int n = imin(tx, iw - x0), nr = (n + XS - 1) / XS * XS;
      for (int kx0 = 0; kx0 < kw; kx0 += kxs) {
        const int nkx = imin(kxs, kw - kx0), W = nr + nkx - 1, jstep = CAP / W;
        const int left = x0 - pw + kx0; /* input column of panel column 0 */
        for (size_t j0 = 0; j0 < nrows; j0 += (size_t)jstep) {
          const int nj = (int)(nrows - j0 < (size_t)jstep ? nrows - j0 : (size_t)jstep);
          const int first = (j0 == 0 && kx0 == 0);
          /* Fill the panel: row j = input row (c, y+ky-ph), columns left .. left+W-1, zero outside. */
          const int lo = imax(0, left), hi = imin(iw, left + W); /* input columns inside the image */
          size_t c = j0 / kh;
          int ky = (int)(j0 % kh);
          for (int j = 0; j < nj; ++j) {
            float* prow = panel + (size_t)j * W;
            const int iy = y + ky - ph;
            if (iy < 0 || iy >= ih || hi <= lo) {
              for (int q = 0; q < W; ++q) prow[q] = 0.0f;
            } else {
              const float* src = ifmap + c * in.channel + ((size_t)iy * iw + lo) * in.pixel;
              for (int q = 0; q < lo - left; ++q) prow[q] = 0.0f;
              if (in.pixel == 1) {
                memcpy(prow + (lo - left), src, (size_t)(hi - lo) * sizeof(float));
              } else {
                for (int q = 0; q < hi - lo; ++q) prow[lo - left + q] = src[(size_t)q * in.pixel];
              }
              for (int q = hi - left; q < W; ++q) prow[q] = 0.0f;
            }
            if (++ky == kh) { ky = 0; ++c; }
          }
          for (int ob = 0; ob < oc; ob += OB) {
            const int no = imin(OB, oc - ob);
            const float* w[OB]; /* missing channels of a partial block reuse the last one */
            for (int o = 0; o < OB; ++o)
              w[o] = weights + (size_t)(o < no ? ob + o : oc - 1) * nrows * kw + j0 * kw + kx0;
            for (int xs = 0; xs < nr; xs += XS) {
              float* dst = result + (size_t)ob * out.channel + ((size_t)y * iw + x0 + xs) * out.pixel;
              /* A block of contiguous pixels is written in place; a partial block (channel or
               * column tail) or an NHWC block goes through a small [OB][XS] tile. */
              const int nx = imin(XS, n - xs), direct = (no == OB && nx == XS && out.pixel == 1);
              float tile[OB * XS];
              if (!direct && !first) { /* zero it, then load the valid partial sums */
                memset(tile, 0, sizeof tile);
                for (int o = 0; o < no; ++o)
                  for (int x = 0; x < nx; ++x) tile[o * XS + x] = dst[o * out.channel + x * out.pixel];
              }
              block(panel + xs, nj, W, nkx, kw, w[0], w[1], w[2], w[3], direct ? dst : tile,
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

int32_t vanilla_conv2dnchw(float* ifmap, float* weights, float* result, int oc, int iw, int ih, int ic,
                           int kh, int kw) {
  if (!valid_sizes(ifmap, weights, result, oc, iw, ih, ic, kh, kw)) return VANILLA_EINVAL;
  conv2d(ifmap, weights, result, oc, iw, ih, ic, kh, kw, 0);
  return VANILLA_OK;
}

int32_t vanilla_conv2dnhwc(float* ifmap, float* weights, float* result, int oc, int iw, int ih, int ic,
                           int kh, int kw) {
  if (!valid_sizes(ifmap, weights, result, oc, iw, ih, ic, kh, kw)) return VANILLA_EINVAL;
  conv2d(ifmap, weights, result, oc, iw, ih, ic, kh, kw, 1);
  return VANILLA_OK;
}

/* The output stage: clamp(conv + bias + residual, lo, hi), one contiguous pass per channel (NCHW)
 * or pixel (NHWC); bias and residual may be NULL. */
static int32_t output_stage(float* ifmap, float* weights, const float* bias, const float* residual,
                            float* result, int oc, int iw, int ih, int ic, int kh, int kw, float lo, float hi,
                            int nhwc) {
  if (!valid_sizes(ifmap, weights, result, oc, iw, ih, ic, kh, kw) || !(lo <= hi)) return VANILLA_EINVAL;
  conv2d(ifmap, weights, result, oc, iw, ih, ic, kh, kw, nhwc);
  const size_t plane = (size_t)ih * (size_t)iw;
  const size_t rows = nhwc ? plane : (size_t)oc, row = nhwc ? (size_t)oc : plane;
  for (size_t r = 0; r < rows; ++r) {
    float* restrict out = result + r * row;
    const float* add = residual == NULL ? NULL : residual + r * row;
    for (size_t i = 0; i < row; ++i) {
      float v = out[i] + (bias == NULL ? 0.0f : bias[nhwc ? i : r]);
      if (add != NULL) v += add[i];
      out[i] = v < lo ? lo : (v > hi ? hi : v);
    }
  }
  return VANILLA_OK;
}

int32_t vanilla_conv2dnchw_bias_clamp(float* ifmap, float* weights, float* bias, float* result, int oc, int iw,
                                      int ih, int ic, int kh, int kw, float lo, float hi) {
  if (bias == NULL) return VANILLA_EINVAL;
  return output_stage(ifmap, weights, bias, NULL, result, oc, iw, ih, ic, kh, kw, lo, hi, 0);
}

int32_t vanilla_conv2dnchw_clamp(float* ifmap, float* weights, float* result, int oc, int iw, int ih, int ic,
                                 int kh, int kw, float lo, float hi) {
  return output_stage(ifmap, weights, NULL, NULL, result, oc, iw, ih, ic, kh, kw, lo, hi, 0);
}

int32_t vanilla_conv2dnhwc_bias_clamp(float* ifmap, float* weights, float* bias, float* result, int oc, int iw,
                                      int ih, int ic, int kh, int kw, float lo, float hi) {
  if (bias == NULL) return VANILLA_EINVAL;
  return output_stage(ifmap, weights, bias, NULL, result, oc, iw, ih, ic, kh, kw, lo, hi, 1);
}

int32_t vanilla_conv2dnhwc_clamp(float* ifmap, float* weights, float* result, int oc, int iw, int ih, int ic,
                                 int kh, int kw, float lo, float hi) {
  return output_stage(ifmap, weights, NULL, NULL, result, oc, iw, ih, ic, kh, kw, lo, hi, 1);
}

int32_t vanilla_conv2dnchw_bias_residual_clamp(float* ifmap, float* weights, float* bias, float* residual,
                                               float* result, int oc, int iw, int ih, int ic, int kh, int kw,
                                               float lo, float hi) {
  if (bias == NULL || residual == NULL) return VANILLA_EINVAL;
  return output_stage(ifmap, weights, bias, residual, result, oc, iw, ih, ic, kh, kw, lo, hi, 0);
}

int32_t vanilla_conv2dnhwc_bias_residual_clamp(float* ifmap, float* weights, float* bias, float* residual,
                                               float* result, int oc, int iw, int ih, int ic, int kh, int kw,
                                               float lo, float hi) {
  if (bias == NULL || residual == NULL) return VANILLA_EINVAL;
  return output_stage(ifmap, weights, bias, residual, result, oc, iw, ih, ic, kh, kw, lo, hi, 1);
}
