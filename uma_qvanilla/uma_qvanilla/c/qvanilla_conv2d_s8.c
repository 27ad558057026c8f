/* QVanilla's dense conv (plain and packed weights): windows times weights, in tiles. */
#include "qvanilla_internal.h"

static int32_t imin(int32_t a, int32_t b) { return a < b ? a : b; }

/* ---------------------------------------------------------------------------------------------
 * Dense conv: the scratch's layout, the tiles (windows: qvanilla_windows.c, dot products:
 * qvanilla_dot.c, output stage: qvanilla_output_stage.c), the direct loops beyond them, the entries. */

/* The scratch of conv_tiles(), in order (p->kh * p->kw * p->ic <= KMAX); base NULL: only the size. */
typedef struct {
  int16_t* win;   /* tile windows of kp int16 */
  uint32_t* acc;  /* tile rows of up to `chunk` accumulators */
  uint32_t* bias; /* chunk */
  uint32_t* sums; /* chunk, plain */
  qblock* blocks; /* chunk / QL, roomy */
  uint32_t* rows; /* tile * QL: qvanilla_requant_rows()', roomy */
  int16_t* quad;  /* OB rows of kp int16, plain */
  size_t tile, chunk; /* output pixels and channels at a time */
} tiles_scratch;

static size_t padded_k(const qvanilla_conv* p) { return ((size_t)p->kh * p->kw * p->ic + KA - 1) / KA * KA; }

/* The layout of `tile` pixels and `chunk` channels (a multiple of QL) at a time, with the lanes'
 * blocks (roomy) or without; its size. */
static size_t tiles_layout(const qvanilla_conv* p, int packed, size_t tile, size_t chunk, int roomy,
                           unsigned char* base, tiles_scratch* t) {
  const size_t kp = padded_k(p);
  qvanilla_arena a = {base, 0};
  t->tile = tile, t->chunk = chunk;
  t->win = qvanilla_take(&a, tile * kp * sizeof(int16_t));
  t->acc = qvanilla_take(&a, tile * chunk * sizeof(uint32_t));
  t->bias = qvanilla_take(&a, chunk * sizeof(uint32_t));
  t->sums = packed ? NULL : qvanilla_take(&a, chunk * sizeof(uint32_t));
  t->blocks = roomy ? qvanilla_take(&a, chunk / QL * QVANILLA_BLOCK_BYTES) : NULL;
  t->rows = roomy ? qvanilla_take(&a, tile * QL * sizeof(uint32_t)) : NULL;
  t->quad = packed ? NULL : qvanilla_take(&a, OB * kp * sizeof(int16_t));
  return a.used;
}

/* The roomy layout: up to TILE windows of the window buffer's WIN entries, QCH channels. */
static size_t roomy_tiles(const qvanilla_conv* p, int packed, unsigned char* base, tiles_scratch* t) {
  const size_t kp = padded_k(p), widest = ((size_t)p->oc + QL - 1) / QL * QL;
  return tiles_layout(p, packed, WIN / kp < TILE ? WIN / kp : TILE, widest < QCH ? widest : QCH, 1, base, t);
}

/* The layout that fits `size` bytes: the roomy one, else the lean one of the most channels at a time
 * that leaves MIN_TILE pixels (QL channels if none does) and as many pixels as fit; its size, 0 if
 * not even 2 pixels fit. */
static size_t tiles_fit(const qvanilla_conv* p, int packed, size_t size, unsigned char* base, tiles_scratch* t) {
  if (roomy_tiles(p, packed, NULL, t) <= size) return roomy_tiles(p, packed, base, t);
  const size_t kp = padded_k(p), most = t->tile; /* the roomy layout's */
  for (size_t chunk = t->chunk;; chunk -= QL) {
    const size_t fixed = tiles_layout(p, packed, 0, chunk, 0, NULL, t), per_pixel = kp * 2 + chunk * 4;
    size_t tile = size > fixed ? (size - fixed) / per_pixel : 0; /* the takes are multiples of 8 bytes */
    tile = tile < most ? tile : most;
    if (tile >= MIN_TILE || chunk == QL) return tile >= 2 ? tiles_layout(p, packed, tile, chunk, 0, base, t) : 0;
  }
}

/* The windows' length beyond which the direct loops take over (its product fits 64 bits). */
static int short_windows(const qvanilla_conv* p) {
  return p->kh <= KMAX && p->kw <= KMAX && p->ic <= KMAX && (uint64_t)p->kh * p->kw * p->ic <= KMAX;
}

size_t qvanilla_dense_scratch(const qvanilla_conv* p, int packed, size_t budget) {
  tiles_scratch t;
  if (short_windows(p)) {
    const size_t roomy = roomy_tiles(p, packed, NULL, &t), lean = budget > 0 ? tiles_fit(p, packed, budget, NULL, &t) : 0;
    return budget == 0 || budget >= roomy ? roomy : lean > 0 ? lean : tiles_layout(p, packed, 2, QL, 0, NULL, &t);
  }
  qvanilla_arena a = {NULL, 0};
  qvanilla_take(&a, packed ? 0 : (size_t)imin(p->oc, MAX_OC) * sizeof(uint32_t)); /* conv_plain_direct()'s row */
  return a.used;
}

/* The dense conv for K = kh*kw*ic <= KMAX.  packed: OCP rows of kp int16 and the folded bias in
 * q; packed8: the same as int8, interleaved (qvanilla.h), packed's scratch; else raw OHWI int8
 * weights (with weight_zp), packed into quad (OB*kp int16, scratch)
 * four channels at a time for each tile (their biases folded on the first).  Per chunk of up to QCH output
 * channels (their output stages prepared once) and tile of output pixels: the windows, the
 * accumulators of every pixel and channel (dot2x4, two pixels by four channels at a time, the four
 * channels' weights staying in L1 while the tile's windows stream), then the output rows.  A row
 * of accumulators holds the chunk's channels in blocks of QL, transposed (lane()). */
static qvanilla_status conv_tiles(const int8_t* input, const int16_t* packed, const int8_t* packed8, const int8_t* raw,
                                  const qvanilla_channels* q, int8_t* output, const qvanilla_conv* p, void* scratch,
                                  size_t size) {
  tiles_scratch t;
  /* size: at least the least layout's (qvanilla_check); should no tile fit even so, nothing runs */
  if (tiles_fit(p, raw == NULL, size, scratch, &t) == 0) return QVANILLA_ESCRATCH;
  int16_t *win = t.win, *quad = t.quad;
  uint32_t *acc = t.acc, *bias = t.bias, *sums = t.sums, spare[QL];
  qblock* blocks = t.blocks;
  const size_t oc = (size_t)p->oc, K = (size_t)p->kh * p->kw * p->ic, kp = (K + KA - 1) / KA * KA;
  const size_t k16 = (K + K16 - 1) / K16 * K16;
  const size_t pixels = (size_t)p->oh * p->ow;
  const size_t tile = t.tile, chunk = t.chunk; /* >= 2, a multiple of QL */
  /* SMLAD's asm loads the weights as aligned words: the compiler's (16-byte aligned) and quad (scratch) are */
  const int words = raw != NULL || (uintptr_t)packed % 4 == 0;
  const int dot = p->avx2 ? DOT_AVX2 : words ? DOT_SMLAD : DOT_C;
#ifdef QVANILLA_MVE /* the int8 path: its windows take at most half of win, the four channels' weights follow them */
  int8_t* wq = (int8_t*)win + tile * k16;
  const int int8 = packed8 != NULL || (packed != NULL && pixels >= TILE / 8 &&
                   (tile + OB) * k16 <= tile * kp * sizeof(int16_t) &&
                   qvanilla_fit_int8(packed, (oc + OB - 1) / OB * OB * kp)); /* a few pixels do not repay the scan */
#endif
  for (size_t c0 = 0; c0 < oc; c0 += chunk) {
    const size_t nc = oc - c0 < chunk ? oc - c0 : chunk, stride = (nc + QL - 1) / QL * QL;
    for (size_t j = (nc + OB - 1) / OB * OB; j < stride; ++j) { /* lanes no dot2x4 writes */
      for (size_t i = 0; i < tile; ++i) acc[i * stride + j / QL * QL + lane(j % QL, 1)] = 0;
    }
    int32_t y = 0, x = 0; /* the next pixel to gather */
    for (size_t first = 0; first < pixels; first += tile) {
      const size_t n = pixels - first < tile ? pixels - first : tile;
#ifdef QVANILLA_MVE
      if (int8) {
        qvanilla_gather_tile8((int8_t*)win, k16, n, input, p, &y, &x);
        for (size_t o0 = c0; o0 < c0 + nc; o0 += OB) {
          if (packed8 == NULL) qvanilla_narrow4(wq, packed + o0 * kp, kp, k16);
          qvanilla_dot_tile8((int8_t*)win, n, k16, packed8 != NULL ? packed8 + o0 * k16 : wq,
                    acc + (o0 - c0) / QL * QL + lane((o0 - c0) % QL, 1), stride, spare);
        }
      } else
#endif
      {
        qvanilla_gather_tile(win, kp, n, input, p, &y, &x);
        for (size_t o0 = c0; o0 < c0 + nc; o0 += OB) {
          if (raw != NULL) { /* rows o0 .. o0+3 (OHWI: channel o's K weights at raw + o*K), zero beyond oc and K */
            const size_t no = oc - o0 < OB ? oc - o0 : OB;
            const int8_t* r0 = raw + o0 * K;
            uint32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0; /* the rows' sums, in registers */
            for (size_t k = 0; k < K; ++k) {
              const int16_t v0 = (int16_t)(r0[k] - p->weight_zp), v1 = no > 1 ? (int16_t)(r0[K + k] - p->weight_zp) : 0;
              const int16_t v2 = no > 2 ? (int16_t)(r0[2 * K + k] - p->weight_zp) : 0;
              const int16_t v3 = no > 3 ? (int16_t)(r0[3 * K + k] - p->weight_zp) : 0;
              quad[k] = v0;
              quad[kp + k] = v1;
              quad[2 * kp + k] = v2;
              quad[3 * kp + k] = v3;
              s0 += (uint32_t)v0;
              s1 += (uint32_t)v1;
              s2 += (uint32_t)v2;
              s3 += (uint32_t)v3;
            }
            const uint32_t sum[OB] = {s0, s1, s2, s3};
            for (size_t j = 0; j < no; ++j) sums[o0 - c0 + j] = sum[j]; /* used on the first tile */
            for (size_t j = 0; j < OB; ++j) qvanilla_fill(quad + j * kp + K, 0, kp - K); /* zeros past K */
          }
          /* channels o0 + j at a[4*j] */
          uint32_t* a = acc + (o0 - c0) / QL * QL + lane((o0 - c0) % QL, 1);
          if (packed8 != NULL) qvanilla_dot_tile_w8(win, n, kp, packed8 + o0 * k16, a, stride, spare);
          else qvanilla_dot_tile(win, n, kp, packed != NULL ? packed + o0 * kp : quad, a, stride, spare, dot);
        }
      }
      if (first == 0) { /* the output stages: biases, with bias - input_zp * sum (w - weight_zp) if plain */
        qvanilla_biases(bias, q, c0, nc);
        for (size_t j = 0; raw != NULL && j < nc; ++j) bias[j] -= sums[j] * (uint32_t)p->input_zp;
        for (size_t j = 0; blocks != NULL && j < nc; j += QL) {
          qvanilla_block_setup(&blocks[j / QL], bias + j, q, c0 + j, nc - j < QL ? nc - j : QL, 1, p);
        }
      }
      qvanilla_requant_rows(acc, stride, n, blocks, bias, q, c0, nc, output + first * oc + c0, oc, 1, p, t.rows);
    }
  }
  return QVANILLA_OK;
}

/* Entry k of channel o's packed weights: packed's, or packed8's (qvanilla.h). */
static int32_t packed_weight(const int16_t* packed, const int8_t* packed8, size_t kp, size_t k16, size_t o, size_t k) {
  if (packed != NULL) return packed[o * kp + k];
  return packed8[(o / OB * (k16 / K16) + k / K16) * (OB * K16) + o % OB * K16 + k % K16];
}

/* Windows longer than KMAX (beyond any usual layer), packed or packed8 weights: straightforward loops. */
static void conv_packed_direct(const int8_t* input, const int16_t* packed, const int8_t* packed8,
                               const qvanilla_channels* q, int8_t* output, const qvanilla_conv* p) {
  const size_t oc = (size_t)p->oc, ic = (size_t)p->ic, K = (size_t)p->kh * p->kw * ic, kp = (K + KA - 1) / KA * KA;
  const size_t k16 = (K + K16 - 1) / K16 * K16;
  const int64_t lo = p->act_min - p->output_zp, hi = p->act_max - p->output_zp;
  for (int32_t y = 0; y < p->oh; ++y) {
    for (int32_t x = 0; x < p->ow; ++x) {
      int8_t* out = output + ((size_t)y * p->ow + x) * oc;
      for (size_t o = 0; o < oc; ++o) {
        uint32_t sum = 0;
        for (int32_t ky = 0; ky < p->kh; ++ky) {
          const int32_t iy = y * p->stride_h - p->pad_top + ky;
          for (int32_t kx = 0; kx < p->kw; ++kx) {
            const int32_t ix = x * p->stride_w - p->pad_left + kx;
            const size_t k0 = ((size_t)ky * p->kw + kx) * ic;
            const int inside = iy >= 0 && iy < p->ih && ix >= 0 && ix < p->iw;
            const int8_t* in = inside ? input + ((size_t)iy * p->iw + ix) * ic : NULL;
            for (size_t c = 0; c < ic; ++c) {
              sum += (uint32_t)((in ? in[c] : p->input_zp) * packed_weight(packed, packed8, kp, k16, o, k0 + c));
            }
          }
        }
        const qchan qc = qvanilla_channel(q, o, qvanilla_bias(q, o), p->rounding);
        out[o] = finish_any(sum, &qc, lo, hi, p);
      }
    }
  }
}

/* Windows longer than KMAX, plain entry: for each output pixel the int32 sums of up to MAX_OC
 * channels in a scratch row acc, channel by channel (weights are OHWI: a channel's window is
 * contiguous, its taps inside the image added run by run). */
static void conv_plain_direct(const int8_t* input, const int8_t* weights, const qvanilla_channels* q,
                              int8_t* output, const qvanilla_conv* p, uint32_t* acc) {
  const int64_t lo = p->act_min - p->output_zp, hi = p->act_max - p->output_zp;
  const size_t ic = (size_t)p->ic, K = (size_t)p->kh * p->kw * ic;
  for (int32_t o0 = 0; o0 < p->oc; o0 += MAX_OC) {
    const int32_t n = imin(p->oc - o0, MAX_OC);
    for (int32_t y = 0; y < p->oh; ++y) {
      for (int32_t x = 0; x < p->ow; ++x) {
        for (int32_t o = 0; o < n; ++o) {
          const int8_t* w = weights + (size_t)(o0 + o) * K;
          uint32_t sum = 0;
          for (int32_t ky = 0; ky < p->kh; ++ky) {
            const int32_t iy = y * p->stride_h - p->pad_top + ky;
            if (iy < 0 || iy >= p->ih) continue; /* padding: (zp - zp) contributes nothing */
            for (int32_t kx = 0; kx < p->kw; ++kx) {
              const int32_t ix = x * p->stride_w - p->pad_left + kx;
              if (ix < 0 || ix >= p->iw) continue;
              const int8_t* in = input + ((size_t)iy * p->iw + ix) * ic;
              const int8_t* wt = w + ((size_t)ky * p->kw + kx) * ic;
              for (size_t c = 0; c < ic; ++c) { /* |in - zp|, |w - weight_zp| <= 255 */
                sum += (uint32_t)(((int32_t)in[c] - p->input_zp) * ((int32_t)wt[c] - p->weight_zp));
              }
            }
          }
          acc[o] = sum;
        }
        int8_t* out = output + ((size_t)y * p->ow + x) * p->oc + o0;
        for (int32_t o = 0; o < n; ++o) {
          const qchan qc = qvanilla_channel(q, (size_t)(o0 + o), qvanilla_bias(q, o0 + o), p->rounding);
          out[o] = finish_any(acc[o], &qc, lo, hi, p);
        }
      }
    }
  }
}

/* The dense entries: weights of `kind` (PLAIN: OHWI int8, PACKED: int16 rows, PACKED8: int8 blocks). */
static ALWAYS_INLINE qvanilla_status dense(const qvanilla_context* ctx, const qvanilla_conv_params* params,
                             const qvanilla_per_channel_quant_params* quant, const qvanilla_dims* input_dims,
                             const int8_t* input, const qvanilla_dims* filter_dims, const void* weights,
                             const int32_t* bias, const qvanilla_dims* output_dims, int8_t* output, int kind) {
  qvanilla_conv p;
  qvanilla_channels q;
  const qvanilla_status status = qvanilla_check(ctx, params, quant, input_dims, input, filter_dims, weights, bias,
                                                output_dims, output, kind, qvanilla_dense_scratch, &p, &q);
  if (status != QVANILLA_OK) return status;
  const int16_t* packed = kind == PACKED ? weights : NULL;
  const int8_t* packed8 = kind == PACKED8 ? weights : NULL;
  if (short_windows(&p)) {
    return conv_tiles(input, packed, packed8, kind == PLAIN ? weights : NULL, &q, output, &p, ctx->buf,
                      (size_t)ctx->size);
  } else if (kind == PLAIN) {
    conv_plain_direct(input, weights, &q, output, &p, ctx->buf);
  } else {
    conv_packed_direct(input, packed, packed8, &q, output, &p);
  }
  return QVANILLA_OK;
}

qvanilla_status qvanilla_conv2d_s8(const qvanilla_context* ctx, const qvanilla_conv_params* params,
                                   const qvanilla_per_channel_quant_params* quant, const qvanilla_dims* input_dims,
                                   const int8_t* input, const qvanilla_dims* filter_dims, const int8_t* weights,
                                   const int32_t* bias, const qvanilla_dims* output_dims, int8_t* output) {
  return dense(ctx, params, quant, input_dims, input, filter_dims, weights, bias, output_dims, output, PLAIN);
}

qvanilla_status qvanilla_conv2d_packed_s8(const qvanilla_context* ctx, const qvanilla_conv_params* params,
                                          const qvanilla_per_channel_quant_params* quant,
                                          const qvanilla_dims* input_dims, const int8_t* input,
                                          const qvanilla_dims* filter_dims, const int16_t* packed_weights,
                                          const int32_t* bias, const qvanilla_dims* output_dims, int8_t* output) {
  return dense(ctx, params, quant, input_dims, input, filter_dims, packed_weights, bias, output_dims, output, PACKED);
}

qvanilla_status qvanilla_conv2d_packed8_s8(const qvanilla_context* ctx, const qvanilla_conv_params* params,
                                           const qvanilla_per_channel_quant_params* quant,
                                           const qvanilla_dims* input_dims, const int8_t* input,
                                           const qvanilla_dims* filter_dims, const int8_t* packed_weights,
                                           const int32_t* bias, const qvanilla_dims* output_dims, int8_t* output) {
  return dense(ctx, params, quant, input_dims, input, filter_dims, packed_weights, bias, output_dims, output, PACKED8);
}

int32_t qvanilla_conv2d_s8_get_buffer_size(const qvanilla_dims* input_dims, const qvanilla_dims* filter_dims) {
  return qvanilla_buffer_size(input_dims, filter_dims, PLAIN, qvanilla_dense_scratch);
}

int32_t qvanilla_conv2d_packed_s8_get_buffer_size(const qvanilla_dims* input_dims, const qvanilla_dims* filter_dims) {
  return qvanilla_buffer_size(input_dims, filter_dims, PACKED, qvanilla_dense_scratch);
}

int32_t qvanilla_conv2d_packed8_s8_get_buffer_size(const qvanilla_dims* input_dims, const qvanilla_dims* filter_dims) {
  return qvanilla_buffer_size(input_dims, filter_dims, PACKED8, qvanilla_dense_scratch);
}
