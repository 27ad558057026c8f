/* QVanilla's depthwise conv (plain and packed weights): 16 channels at a time. */
#include "qvanilla_internal.h"

/* ---------------------------------------------------------------------------------------------
 * Depthwise conv */

/* a = 0 if first, else acc: where a run of taps starts summing (j < CB). */
static ALWAYS_INLINE void start_sums(uint32_t* restrict a, const uint32_t* restrict acc, int first) {
  if (first) {
    for (int j = 0; j < CB; ++j) a[j] = 0;
  } else {
    for (int j = 0; j < CB; ++j) a[j] = acc[j];
  }
}

/* acc[j] (+)= sum over the taps t < nt of in[t][at + j] * w[t][at + j], j < CB (acc starts at 0 if
 * first): vectorised over j (16 int8 inputs widened, multiplied by 16 int16 weights, into 16
 * 32-bit sums: pmullw, pmulhw and unpacking). */
static void dw_taps(uint32_t* restrict acc, const int8_t* const* in, const int16_t* const* w, size_t at, int nt,
                    int first, int avx2) {
#ifdef QVANILLA_AVX2
  if (avx2) {
    qvanilla_dw_taps_avx2(acc, in, w, at, nt, first);
    return;
  }
#endif
  (void)avx2;
  uint32_t a[CB];
  start_sums(a, acc, first);
  for (int t = 0; t < nt; ++t) {
    const int8_t* restrict s = in[t] + at;
    const int16_t* restrict wt = w[t] + at;
    for (int j = 0; j < CB; ++j) a[j] += (uint32_t)(s[j] * (int32_t)wt[j]); /* |s * w| <= 2^22 */
  }
  for (int j = 0; j < CB; ++j) acc[j] = a[j];
}

/* dw_taps for weights in [-128, 127] and an even nt, two taps at a time in 16-bit lanes: the two
 * products are in [-16256, 16384], so their sum plus 32767 is in [255, 65535], exact in uint16,
 * then widened (without sign) and added: pmullw, paddw and unpacking, half the 32-bit work.  The
 * sums come out 32767 too large per pair of taps (the biases take it back). */
static void dw_pairs(uint32_t* restrict acc, const int8_t* const* in, const int16_t* const* w, size_t at, int nt,
                     int first, int avx2) {
#ifdef QVANILLA_AVX2
  if (avx2) {
    qvanilla_dw_pairs_avx2(acc, in, w, at, nt, first);
    return;
  }
#endif
  (void)avx2;
  uint32_t a[CB];
  start_sums(a, acc, first);
  for (int t = 0; t < nt; t += 2) {
    const int8_t* restrict s0 = in[t] + at;
    const int8_t* restrict s1 = in[t + 1] + at;
    const int16_t* restrict w0 = w[t] + at;
    const int16_t* restrict w1 = w[t + 1] + at;
    for (int j = 0; j < CB; ++j) a[j] += (uint16_t)(s0[j] * w0[j] + s1[j] * w1[j] + 32767);
  }
  for (int j = 0; j < CB; ++j) acc[j] = a[j];
}

#if defined(QVANILLA_SMLAD) && !defined(QVANILLA_MVE) && defined(QVANILLA_ASM) /* Helium's cores take dw_mve */
#define QVANILLA_DW_SMLAD 1
/* The DSP extension's depthwise step: SMLAD multiplies two int16 pairs and adds both products to
 * one sum, so each SMLAD takes two taps of one channel.  Its pairs: the weights of taps 2p and 2p+1
 * of a channel as one word (pair_weights(), once per block), and the inputs' likewise, four
 * channels from two 32-bit loads: SXTB16 sign-extends bytes 0 and 2 (or, rotated, 1 and 3) into
 * halfwords, and a halfword of each tap's word makes a channel's pair (PKHBT, PKHTB, in dw_smlad's
 * asm step).  Eight multiply-adds in about 20 instructions. */
static ALWAYS_INLINE int32_t low_halves(int32_t x, int32_t y) { /* x's low half, then y's: the tail's pairs */
  int32_t r;
  __asm__("pkhbt %0, %1, %2, lsl #16" : "=r"(r) : "r"(x), "r"(y));
  return r;
}

/* The weights as SMLAD's pairs, in the order dw_smlad reads them: for each quad of channels
 * (c = 4q + j, the last quad possibly short) and pair of taps p (of P = (taps + 1) / 2),
 * pairs[(q * P + p) * 4 + j] = w[2p][c] (low half), w[2p+1][c] (high half; 0 past the last tap),
 * w rows of ws int16, c < nc. */
static void pair_weights(uint32_t* pairs, const int16_t* w, size_t ws, size_t taps, size_t nc) {
  for (size_t c0 = 0; c0 < nc; c0 += 4) {
    const size_t n = nc - c0 < 4 ? nc - c0 : 4;
    for (size_t t = 0; t < taps; t += 2, pairs += 4) {
      const int16_t* a = w + t * ws + c0;
      const int16_t* b = t + 1 < taps ? a + ws : NULL; /* no pointer past the last tap's row */
      for (size_t j = 0; j < n; ++j) pairs[j] = (uint16_t)a[j] | (b != NULL ? (uint32_t)(uint16_t)b[j] << 16 : 0u);
    }
  }
}

/* row[c] (+)= sum over the taps t < nt (even) of in[t][c] * w[t][c], c < nc (row starts at 0 if
 * first), the weights as pairs (pair_weights(), P pairs a quad, from the group's first pair on). */
static void dw_smlad(uint32_t* row, const int8_t* const* in, const uint32_t* pairs, size_t P, size_t nc, int nt,
                     int first) {
  const int8_t* const* end = in + nt;
  size_t c = 0;
  for (; c + 4 <= nc; c += 4) {
    int32_t s0 = first ? 0 : (int32_t)row[c], s1 = first ? 0 : (int32_t)row[c + 1];
    int32_t s2 = first ? 0 : (int32_t)row[c + 2], s3 = first ? 0 : (int32_t)row[c + 3];
    const uint32_t* w = pairs + c / 4 * P * 4;
    for (const int8_t* const* t = in; t != end;) {
      /* in C, gcc runs out of registers and spills (38 instructions a step instead of 20) */
      int32_t a, b, x, y, q, v;
      __asm__("ldr %[x], [%[t]], #4\n\t"        /* x, y = the two taps' inputs */
              "ldr %[y], [%[t]], #4\n\t"
              "ldr %[a], [%[x], %[c]]\n\t"      /* a, b = their channels c .. c+3 (unaligned LDR) */
              "ldr %[b], [%[y], %[c]]\n\t"
              "sxtb16 %[x], %[a]\n\t"           /* x = a0, a2; y = b0, b2 */
              "sxtb16 %[y], %[b]\n\t"
              "sxtb16 %[a], %[a], ror #8\n\t"   /* a = a1, a3; b = b1, b3 */
              "sxtb16 %[b], %[b], ror #8\n\t"
              "ldr %[v], [%[w]]\n\t"
              "pkhbt %[q], %[x], %[y], lsl #16\n\t"  /* a0, b0 */
              "smlad %[s0], %[q], %[v], %[s0]\n\t"
              "ldr %[v], [%[w], #8]\n\t"
              "pkhtb %[q], %[y], %[x], asr #16\n\t"  /* a2, b2 */
              "smlad %[s2], %[q], %[v], %[s2]\n\t"
              "ldr %[v], [%[w], #4]\n\t"
              "pkhbt %[q], %[a], %[b], lsl #16\n\t"  /* a1, b1 */
              "smlad %[s1], %[q], %[v], %[s1]\n\t"
              "ldr %[v], [%[w], #12]\n\t"
              "pkhtb %[q], %[b], %[a], asr #16\n\t"  /* a3, b3 */
              "smlad %[s3], %[q], %[v], %[s3]\n\t"
              "add %[w], %[w], #16"
              : [s0] "+r"(s0), [s1] "+r"(s1), [s2] "+r"(s2), [s3] "+r"(s3), [t] "+r"(t), [w] "+r"(w),
                [a] "=&r"(a), [b] "=&r"(b), [x] "=&r"(x), [y] "=&r"(y), [q] "=&r"(q), [v] "=&r"(v)
              : [c] "r"(c)
              : "memory");
    }
    row[c] = (uint32_t)s0, row[c + 1] = (uint32_t)s1, row[c + 2] = (uint32_t)s2, row[c + 3] = (uint32_t)s3;
  }
  for (; c < nc; ++c) { /* the last nc % 4 channels */
    int32_t s = first ? 0 : (int32_t)row[c];
    const uint32_t* w = pairs + (c / 4 * P * 4) + c % 4;
    for (const int8_t* const* t = in; t != end; t += 2, w += 4) {
      s = __smlad(low_halves(t[0][c], t[1][c]), (int32_t)*w, s);
    }
    row[c] = (uint32_t)s;
  }
}
#endif

#ifdef QVANILLA_MVE
/* row[c] (+)= sum over the taps t < nt of in[t][c] * w[t][c], c < nc (row starts at 0 if first), in
 * Helium, eight channels at a time: the inputs widened as loaded (VLDRB.S16), the int16 products of
 * even and odd lanes widened into two vectors of 32-bit sums (VMULLB, VMULLT), which VST2 writes
 * back interleaved, in channel order.  Loads are predicated past nc; the row is a multiple of 16
 * words long (CB), so the last stores stay in it. */
static void dw_mve(uint32_t* row, const int8_t* const* in, const int16_t* const* w, size_t nc, int nt, int first) {
  for (size_t c = 0; c < nc; c += 8) {
    const mve_pred16_t active = vctp16q((uint32_t)(nc - c));
    int32x4x2_t s;
    if (first) {
      s.val[0] = s.val[1] = vdupq_n_s32(0);
    } else {
      s = vld2q_s32((const int32_t*)row + c);
    }
    for (int t = 0; t < nt; ++t) {
      const int16x8_t x = vldrbq_z_s16(in[t] + c, active), v = vldrhq_z_s16(w[t] + c, active);
      s.val[0] = vaddq_s32(s.val[0], vmullbq_int_s16(x, v)); /* wraps, as the plain C's unsigned sums */
      s.val[1] = vaddq_s32(s.val[1], vmulltq_int_s16(x, v));
    }
    vst2q_s32((int32_t*)row + c, s);
  }
}
#endif

/* dst[0 .. n) = src[0 .. n), 0 < n < 16, with two fixed-size (possibly overlapping) copies. */
static void copy_short(int8_t* dst, const int8_t* src, size_t n) {
  if (n >= 8) {
    memcpy(dst, src, 8);
    memcpy(dst + n - 8, src + n - 8, 8);
  } else if (n >= 4) {
    memcpy(dst, src, 4);
    memcpy(dst + n - 4, src + n - 4, 4);
  } else if (n >= 2) {
    memcpy(dst, src, 2);
    memcpy(dst + n - 2, src + n - 2, 2);
  } else {
    dst[0] = src[0];
  }
}

/* Depthwise conv of the channels [c0, c0 + nc), nc <= DW_BLOCK, with weights w[t*ws + c - c0]
 * (int16, weight_zp subtracted; in [-128, 127] if paired: dw_pairs, whose excess the biases
 * d->bias take back) and the output stages d->blocks (roomy) or the table q.  Per output pixel and group
 * of taps (d->group): pointers to the taps' input (at fixed offsets from the first tap's when
 * the window is inside the image, zp_row for taps outside it) and weights (an odd group gets a tap
 * of zero weights if paired), then CB channels at a time (the last nc % CB channels through
 * zero-padded copies of their inputs and weights) into a row of accumulators; the output stage
 * runs on d->pixels consecutive pixels at a time. */
/* The scratch of depthwise() and dw_block(), in order; base NULL: only the size. */
typedef struct {
  qblock* blocks;       /* the output stages of a block of channels, roomy */
  uint32_t* bias;       /* block */
  int16_t* wbuf;        /* plain: taps * block int16 weights, if they fit DW_WBUF */
  uint32_t* acc;        /* dw_block's accumulators: pixels awaiting their output stage */
  uint32_t* rows;       /* TILE * QL: qvanilla_requant_rows()', roomy */
  uint32_t* pairs;      /* pair_words: the weights as SMLAD's pairs (the rows if roomy) */
  int8_t* zp_row;       /* block: what a tap outside the image reads */
  int16_t* zero_w;      /* block */
  const int8_t** in;    /* group + 1 each: the taps' inputs and weights, and the tail's */
  const int16_t** wr;
  const int8_t** tail_in;
  const int16_t** tail_wr;
  size_t* offset;       /* group */
  int8_t* tail_x;       /* (group + 1) * CB */
  int16_t* tail_w;      /* (group + 1) * CB */
  size_t block, pixels, group, pair_words; /* channels, pixels and taps at a time */
} dw_scratch;

/* Channels per block: DW_BLOCK, or for plain weights as many as fit wbuf (at least 1). */
static size_t block_of(const qvanilla_conv* p, int packed) {
  const size_t taps = (size_t)p->kh * p->kw;
  size_t block = DW_BLOCK;
  if (!packed) { /* a block's weights must fit wbuf */
    block = DW_WBUF / taps < DW_BLOCK ? DW_WBUF / taps : DW_BLOCK;
    if (block >= QL) block -= block % QL;
    if (block == 0) block = 1;
  }
  return block;
}

enum { LEAN_TAPS = 16, PAIR_TAPS = 32 }; /* lean layouts: taps per group, most taps paired for SMLAD */

/* The layout of blocks of `block` channels, `pixels` pixels and `group` taps at a time, roomy (the
 * lanes' blocks, DW_TAPS taps) or lean; its size. */
static size_t dw_layout(const qvanilla_conv* p, int packed, size_t block, size_t pixels, int roomy,
                        unsigned char* base, dw_scratch* d) {
  const size_t taps = (size_t)p->kh * p->kw, cb = (size_t)p->ic < block ? (size_t)p->ic : block;
  const size_t stride = (cb + CB - 1) / CB * CB, group = roomy ? DW_TAPS : taps < LEAN_TAPS ? taps : LEAN_TAPS;
  const size_t slots = (group + 1) * QVANILLA_POINTER_BYTES;
  const int tails = roomy || p->ic % CB != 0 || cb % CB != 0; /* a block of channels not a multiple of CB */
  qvanilla_arena a = {base, 0};
  d->block = block, d->pixels = pixels, d->group = group;
  d->blocks = roomy ? qvanilla_take(&a, (cb + QL - 1) / QL * QVANILLA_BLOCK_BYTES) : NULL;
  d->bias = qvanilla_take(&a, cb * sizeof(uint32_t));
  d->wbuf = qvanilla_take(&a, !packed && taps * cb <= DW_WBUF ? taps * cb * sizeof(int16_t) : 0);
  d->acc = qvanilla_take(&a, pixels * stride * sizeof(uint32_t));
  d->rows = roomy ? qvanilla_take(&a, TILE * QL * sizeof(uint32_t)) : NULL;
  d->pair_words = roomy ? TILE * QL : taps <= PAIR_TAPS ? (taps + 1) / 2 * ((cb + 3) / 4 * 4) : 0;
  d->pairs = roomy ? d->rows : qvanilla_take(&a, d->pair_words * sizeof(uint32_t));
  d->zp_row = qvanilla_take(&a, cb);
  d->zero_w = qvanilla_take(&a, cb * sizeof(int16_t));
  d->in = qvanilla_take(&a, slots);
  d->wr = qvanilla_take(&a, slots);
  d->tail_in = qvanilla_take(&a, tails ? slots : 0);
  d->tail_wr = qvanilla_take(&a, tails ? slots : 0);
  d->offset = qvanilla_take(&a, group * QVANILLA_POINTER_BYTES);
  d->tail_x = qvanilla_take(&a, tails ? (group + 1) * CB : 0);
  d->tail_w = qvanilla_take(&a, tails ? (group + 1) * CB * sizeof(int16_t) : 0);
  return a.used;
}

/* The roomy layout: the accumulators of up to TILE pixels within DW_ACC. */
static size_t dw_roomy(const qvanilla_conv* p, int packed, unsigned char* base, dw_scratch* d) {
  const size_t block = block_of(p, packed), cb = (size_t)p->ic < block ? (size_t)p->ic : block;
  const size_t stride = (cb + CB - 1) / CB * CB;
  return dw_layout(p, packed, block, DW_ACC / stride < TILE ? DW_ACC / stride : TILE, 1, base, d);
}

/* The layout that fits `size` bytes: the roomy one, else the lean one of the most channels at a time
 * (a multiple of CB) that leaves MIN_TILE pixels (CB channels if none does) and as many pixels as
 * fit, up to TILE; its size, 0 if not even one pixel fits. */
static size_t dw_fit(const qvanilla_conv* p, int packed, size_t size, unsigned char* base, dw_scratch* d) {
  if (dw_roomy(p, packed, NULL, d) <= size) return dw_roomy(p, packed, base, d);
  const size_t widest = (size_t)p->ic < d->block ? (size_t)p->ic : d->block; /* the roomy layout's */
  for (size_t block = widest;; block = block > CB ? (block - 1) / CB * CB : block) {
    const size_t fixed = dw_layout(p, packed, block, 0, 0, NULL, d), per_pixel = (block + CB - 1) / CB * CB * 4;
    size_t pixels = size > fixed ? (size - fixed) / per_pixel : 0; /* the takes are multiples of 8 bytes */
    pixels = pixels < TILE ? pixels : TILE;
    if (pixels >= MIN_TILE || block <= CB) return pixels >= 1 ? dw_layout(p, packed, block, pixels, 0, base, d) : 0;
  }
}

size_t qvanilla_depthwise_scratch(const qvanilla_conv* p, int packed, size_t budget) {
  dw_scratch d;
  const size_t roomy = dw_roomy(p, packed, NULL, &d), widest = (size_t)p->ic < d.block ? (size_t)p->ic : d.block;
  const size_t lean = budget > 0 ? dw_fit(p, packed, budget, NULL, &d) : 0;
  return budget == 0 || budget >= roomy ? roomy
         : lean > 0                     ? lean
                                        : dw_layout(p, packed, widest < CB ? widest : CB, 1, 0, NULL, &d); /* the least */
}

static void dw_block(const int8_t* input, const int16_t* w, size_t ws, const qvanilla_channels* q, int8_t* output,
                     size_t c0, size_t nc, int paired, const qvanilla_conv* p, const dw_scratch* d) {
  const size_t channels = (size_t)p->ic, taps = (size_t)p->kh * p->kw, full = nc - nc % CB, rest = nc - full;
  const size_t stride = (nc + CB - 1) / CB * CB, pixels = d->pixels, group = d->group; /* >= 1 */
  int8_t* zp_row = d->zp_row;
  int16_t* zero_w = d->zero_w;
  const int8_t** in = d->in;
  const int16_t** wr = d->wr;
  const int8_t** tail_in = d->tail_in;
  const int16_t** tail_wr = d->tail_wr;
  size_t* offset = d->offset; /* of each tap of the first group from the window's corner, inside the image */
  int8_t* tail_x = d->tail_x;
  int16_t* tail_w = d->tail_w;
  size_t tail_w_group = (size_t)-1, wr_group = (size_t)-1; /* the tap groups tail_w and wr hold */
  uint32_t* acc = d->acc;
  const uint32_t* pairs = NULL; /* the weights as SMLAD's pairs, if they fit the scratch of the lanes' rows */
#if defined(QVANILLA_DW_SMLAD)
  const size_t P = (taps + 1) / 2;
  /* The asm step loads four channels of an input as a word: at any address only where the core
   * allows unaligned loads (not under -mno-unaligned-access, for parts that trap them). */
#if defined(__ARM_FEATURE_UNALIGNED)
  const int words = 1;
#else
  const int words = (uintptr_t)input % 4 == 0 && channels % 4 == 0 && c0 % 4 == 0;
#endif
  if (!paired && words && P * ((nc + 3) / 4 * 4) <= d->pair_words) {
    pair_weights(d->pairs, w, ws, taps, nc);
    pairs = d->pairs;
  }
#endif
  for (size_t c = 0; c < nc; ++c) {
    zp_row[c] = (int8_t)p->input_zp;
    zero_w[c] = 0;
  }
#ifdef QVANILLA_MVE
  const int tails = 0; /* dw_mve takes every channel */
#else
  const int tails = rest != 0 && pairs == NULL; /* the last nc % CB channels through copies (dw_taps, dw_pairs) */
#endif
  for (size_t t = 0; tails && t <= group; ++t) {
    tail_in[t] = tail_x + t * CB;
    tail_wr[t] = tail_w + t * CB;
  }
  for (size_t i = 0; tails && i < (group + 1) * CB; ++i) {
    tail_x[i] = 0;
    tail_w[i] = 0;
  }
  for (size_t t = 0; t < taps && t < group; ++t) {
    offset[t] = ((t / (size_t)p->kw) * (size_t)p->iw + t % (size_t)p->kw) * channels;
  }
  const size_t total = (size_t)p->oh * p->ow;
  int32_t y = 0, x = 0; /* the next output pixel */
  for (size_t first = 0; first < total; first += pixels) {
    const size_t np = total - first < pixels ? total - first : pixels;
    for (size_t i = 0; i < np; ++i) {
      const int32_t iy0 = y * p->stride_h - p->pad_top, ix0 = x * p->stride_w - p->pad_left; /* fit: extent_ok() */
      const int inside = iy0 >= 0 && iy0 <= p->ih - p->kh && ix0 >= 0 && ix0 <= p->iw - p->kw;
      uint32_t* row = acc + i * stride;
      for (size_t t0 = 0; t0 < taps; t0 += group) {
        int nt = (int)(taps - t0 < group ? taps - t0 : group);
        if (inside && t0 == 0) {
          const int8_t* corner = input + ((size_t)iy0 * p->iw + (size_t)ix0) * channels + c0;
          for (int t = 0; t < nt; ++t) in[t] = corner + offset[t];
        } else {
          int32_t ky = (int32_t)(t0 / (size_t)p->kw), kx = (int32_t)(t0 % (size_t)p->kw);
          for (int t = 0; t < nt; ++t) {
            const int32_t iy = iy0 + ky, ix = ix0 + kx;
            const int tap_inside = iy >= 0 && iy < p->ih && ix >= 0 && ix < p->iw;
            in[t] = tap_inside ? input + ((size_t)iy * p->iw + ix) * channels + c0 : zp_row;
            if (++kx == p->kw) {
              kx = 0;
              ++ky;
            }
          }
        }
        if (t0 != wr_group) {
          for (int t = 0; t < nt; ++t) wr[t] = w + (t0 + (size_t)t) * ws;
          wr[nt] = zero_w; /* a tap of zero weights, for an odd group if paired */
          wr_group = t0;
        }
        if ((paired || pairs != NULL) && nt % 2) {
          in[nt] = zp_row;
          ++nt;
        }
#if defined(QVANILLA_MVE)
        dw_mve(row, in, wr, nc, nt, t0 == 0);
        continue;
#elif defined(QVANILLA_DW_SMLAD)
        if (pairs != NULL) {
          dw_smlad(row, in, pairs + t0 / 2 * 4, P, nc, nt, t0 == 0);
          continue;
        }
#endif
        for (size_t c = 0; c < full; c += CB) {
          if (paired) dw_pairs(row + c, in, wr, c, nt, t0 == 0, p->avx2);
          else dw_taps(row + c, in, wr, c, nt, t0 == 0, p->avx2);
        }
        if (rest == 0) continue;
        if (tail_w_group != t0) {
          for (int t = 0; t < nt; ++t) {
            for (size_t j = 0; j < rest; ++j) tail_w[(size_t)t * CB + j] = wr[t][full + j];
          }
          tail_w_group = t0;
        }
        for (int t = 0; t < nt; ++t) copy_short(tail_x + (size_t)t * CB, in[t] + full, rest);
        if (paired) dw_pairs(row + full, tail_in, tail_wr, 0, nt, t0 == 0, p->avx2);
        else dw_taps(row + full, tail_in, tail_wr, 0, nt, t0 == 0, p->avx2);
      }
      if (++x == p->ow) {
        x = 0;
        ++y;
      }
    }
    qvanilla_requant_rows(acc, stride, np, d->blocks, d->bias, q, c0, nc, output + first * channels + c0, channels, 0, p,
                          d->rows);
  }
}

/* Whether dw_pairs may take the weights w (taps rows of ws int16, nc channels): all in [-128, 127].
 * Never with the DSP extension or Helium (dw_smlad, dw_mve take any int16 weights). */
static int pairable(const int16_t* w, size_t ws, size_t taps, size_t nc) {
#ifdef QVANILLA_SMLAD
  (void)w, (void)ws, (void)taps, (void)nc;
  return 0;
#else
  int16_t lo[CB] = {0}, hi[CB] = {0};
  for (size_t t = 0; t < taps; ++t) {
    const int16_t* r = w + t * ws;
    size_t c = 0;
    for (; c + CB <= nc; c += CB) { /* blocks of 16 vectorise (pminsw, pmaxsw) */
      for (int j = 0; j < CB; ++j) {
        lo[j] = r[c + j] < lo[j] ? r[c + j] : lo[j];
        hi[j] = r[c + j] > hi[j] ? r[c + j] : hi[j];
      }
    }
    for (; c < nc; ++c) {
      lo[0] = r[c] < lo[0] ? r[c] : lo[0];
      hi[0] = r[c] > hi[0] ? r[c] : hi[0];
    }
  }
  int paired = 1;
  for (int j = 0; j < CB; ++j) paired = paired && lo[j] >= -128 && hi[j] <= 127;
  return paired;
#endif
}

/* packed: [tap][channel] int16 with folded biases; else raw [tap][channel] int8 and weight_zp. */
static qvanilla_status depthwise(const int8_t* input, const int16_t* packed, const int8_t* raw,
                                 const qvanilla_channels* q, int8_t* output, const qvanilla_conv* p, void* scratch,
                                 size_t size) {
  const size_t channels = (size_t)p->ic, taps = (size_t)p->kh * p->kw;
  dw_scratch d;
  /* size: at least the least layout's (qvanilla_check); should not one pixel fit even so, nothing runs */
  if (dw_fit(p, packed != NULL, size, scratch, &d) == 0) return QVANILLA_ESCRATCH;
  const size_t block = d.block;
  qblock* blocks = d.blocks;
  uint32_t* bias = d.bias;
  int16_t* wbuf = d.wbuf;
  for (size_t c0 = 0; c0 < channels; c0 += block) {
    const size_t nc = channels - c0 < block ? channels - c0 : block;
    qvanilla_biases(bias, q, c0, nc);
    if (packed == NULL && taps * nc <= DW_WBUF) {
      for (size_t c = 0; c < nc; ++c) {
        uint32_t sum = 0;
        for (size_t t = 0; t < taps; ++t) {
          const int16_t v = (int16_t)(raw[t * channels + c0 + c] - p->weight_zp);
          wbuf[t * nc + c] = v;
          sum += (uint32_t)v;
        }
        bias[c] -= sum * (uint32_t)p->input_zp;
      }
    }
    if (packed != NULL || taps * nc <= DW_WBUF) {
      const int16_t* w = packed != NULL ? packed + c0 : wbuf;
      const size_t ws = packed != NULL ? channels : nc;
      const int paired = pairable(w, ws, taps, nc);
      if (paired) { /* dw_pairs' excess: 32767 per pair of taps of each group (an odd one padded) */
        const size_t groups = taps / d.group, last = taps % d.group;
        const uint32_t excess = 32767u * (uint32_t)(groups * ((d.group + 1) / 2) + (last + 1) / 2);
        for (size_t c = 0; c < nc; ++c) bias[c] -= excess;
      }
      for (size_t c = 0; blocks != NULL && c < nc; c += QL) {
        qvanilla_block_setup(&blocks[c / QL], bias + c, q, c0 + c, nc - c < QL ? nc - c : QL, 0, p);
      }
      dw_block(input, w, ws, q, output, c0, nc, paired, p, &d);
      continue;
    }
    /* More than DW_WBUF taps: one channel at a time, its weights in turns of DW_WBUF taps. */
    const int64_t lo = p->act_min - p->output_zp, hi = p->act_max - p->output_zp;
    for (size_t c = c0; c < c0 + nc; ++c) {
      const qchan qc = qvanilla_channel(q, c, qvanilla_bias(q, c), p->rounding);
      for (int32_t y = 0; y < p->oh; ++y) {
        for (int32_t x = 0; x < p->ow; ++x) {
          uint32_t sum = 0;
          for (int32_t ky = 0; ky < p->kh; ++ky) {
            const int32_t iy = y * p->stride_h - p->pad_top + ky;
            for (int32_t kx = 0; kx < p->kw; ++kx) {
              const int32_t ix = x * p->stride_w - p->pad_left + kx;
              if (iy < 0 || iy >= p->ih || ix < 0 || ix >= p->iw) continue;
              const int32_t v = (int32_t)input[((size_t)iy * p->iw + ix) * channels + c] - p->input_zp;
              sum += (uint32_t)(v * ((int32_t)raw[((size_t)ky * p->kw + kx) * channels + c] - p->weight_zp));
            }
          }
          output[((size_t)y * p->ow + x) * channels + c] = finish_any(sum, &qc, lo, hi, p);
        }
      }
    }
  }
  return QVANILLA_OK;
}

qvanilla_status qvanilla_depthwise_conv2d_s8(const qvanilla_context* ctx, const qvanilla_conv_params* params,
                                             const qvanilla_per_channel_quant_params* quant,
                                             const qvanilla_dims* input_dims, const int8_t* input,
                                             const qvanilla_dims* filter_dims, const int8_t* weights,
                                             const int32_t* bias, const qvanilla_dims* output_dims, int8_t* output) {
  qvanilla_conv p;
  qvanilla_channels q;
  const qvanilla_status status = qvanilla_check(ctx, params, quant, input_dims, input, filter_dims, weights, bias,
                                                output_dims, output, DEPTHWISE, qvanilla_depthwise_scratch, &p, &q);
  if (status != QVANILLA_OK) return status;
  return depthwise(input, NULL, weights, &q, output, &p, ctx->buf, (size_t)ctx->size);
}

qvanilla_status qvanilla_depthwise_conv2d_packed_s8(const qvanilla_context* ctx, const qvanilla_conv_params* params,
                                                    const qvanilla_per_channel_quant_params* quant,
                                                    const qvanilla_dims* input_dims, const int8_t* input,
                                                    const qvanilla_dims* filter_dims, const int16_t* packed_weights,
                                                    const int32_t* bias, const qvanilla_dims* output_dims,
                                                    int8_t* output) {
  qvanilla_conv p;
  qvanilla_channels q;
  const qvanilla_status status = qvanilla_check(ctx, params, quant, input_dims, input, filter_dims, packed_weights,
                                                bias, output_dims, output, DEPTHWISE_PACKED, qvanilla_depthwise_scratch,
                                                &p, &q);
  if (status != QVANILLA_OK) return status;
  return depthwise(input, packed_weights, NULL, &q, output, &p, ctx->buf, (size_t)ctx->size);
}

int32_t qvanilla_depthwise_conv2d_s8_get_buffer_size(const qvanilla_dims* input_dims,
                                                     const qvanilla_dims* filter_dims) {
  return qvanilla_buffer_size(input_dims, filter_dims, DEPTHWISE, qvanilla_depthwise_scratch);
}

int32_t qvanilla_depthwise_conv2d_packed_s8_get_buffer_size(const qvanilla_dims* input_dims,
                                                            const qvanilla_dims* filter_dims) {
  return qvanilla_buffer_size(input_dims, filter_dims, DEPTHWISE_PACKED, qvanilla_depthwise_scratch);
}
