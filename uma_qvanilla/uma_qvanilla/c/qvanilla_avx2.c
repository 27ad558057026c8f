/* QVanilla on x86-64 CPUs with AVX2, chosen at run time (qvanilla_avx2()): the same binary runs on
 * any x86-64 and takes these where the CPU has them, as TFLite's kernels do; the results are those
 * of the plain C, bit for bit.  Built with gcc's or clang's target attribute, so no -mavx2 is
 * needed; -DQVANILLA_NO_AVX2 (or QVANILLA_PORTABLE) leaves them out.
 *  - dot products: 16 int16 multiply-adds per VPMADDWD, 2 windows x 4 channels at a time;
 *  - the output stage: finish() (finish_tflite()) on eight lanes at a time, straight from the
 *    channel table: 32 x 32 -> 64-bit products (VPMULDQ) and per-lane 64-bit shifts (VPSRLVQ), so
 *    it needs none of the SSE2 lanes' per-call set-up (qvanilla_block_setup()). */
#include "qvanilla_internal.h"

#ifdef QVANILLA_AVX2
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2")))

int qvanilla_avx2(void) { return __builtin_cpu_supports("avx2"); }

/* The four sums of a0 .. a3's eight lanes each. */
static AVX2 ALWAYS_INLINE __m128i sums4(__m256i a0, __m256i a1, __m256i a2, __m256i a3) {
  const __m256i s = _mm256_hadd_epi32(_mm256_hadd_epi32(a0, a1), _mm256_hadd_epi32(a2, a3));
  return _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
}

static AVX2 ALWAYS_INLINE void store4(uint32_t* out, __m128i s) { /* out[0], out[4], out[8], out[12] */
  out[0] = (uint32_t)_mm_cvtsi128_si32(s);
  out[4] = (uint32_t)_mm_extract_epi32(s, 1);
  out[8] = (uint32_t)_mm_extract_epi32(s, 2);
  out[12] = (uint32_t)_mm_extract_epi32(s, 3);
}

static AVX2 ALWAYS_INLINE __m256i load16(const int16_t* p) { return _mm256_loadu_si256((const __m256i*)p); }
static AVX2 ALWAYS_INLINE __m256i load8(const int16_t* p) { /* the upper half zero: nothing read past p + 8 */
  return _mm256_inserti128_si256(_mm256_setzero_si256(), _mm_loadu_si128((const __m128i*)p), 0);
}

/* dot2x4 (see qvanilla_conv2d_s8.c) over n = a multiple of 8 entries: sixteen at a time, then eight.
 * VPMADDWD adds two products of at most 2^8 * 2^9 (no saturation), the lanes' sums wrap as the
 * plain C's unsigned ones. */
/* dot2x4 (see qvanilla_conv2d_s8.c) over n = a multiple of 8 entries: sixteen at a time, then eight
 * (the upper lanes zero).  VPMADDWD adds two products of at most 2^8 * 2^9 (no saturation); the
 * lanes' sums wrap as the plain C's unsigned ones.  Written out: eight accumulators and six
 * operands stay in the sixteen registers. */
static AVX2 ALWAYS_INLINE void dot2x4(const int16_t* x0, const int16_t* x1, const int16_t* w, size_t ws, size_t n,
                                      uint32_t* out0, uint32_t* out1) {
  const int16_t *w0 = w, *w1 = w + ws, *w2 = w + 2 * ws, *w3 = w + 3 * ws;
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
  for (size_t k = 0; k < n; k += 16) {
    __m256i u, v, q0, q1, q2, q3;
    if (k + 16 <= n) {
      u = load16(x0 + k), v = load16(x1 + k);
      q0 = load16(w0 + k), q1 = load16(w1 + k), q2 = load16(w2 + k), q3 = load16(w3 + k);
    } else {
      u = load8(x0 + k), v = load8(x1 + k);
      q0 = load8(w0 + k), q1 = load8(w1 + k), q2 = load8(w2 + k), q3 = load8(w3 + k);
    }
    a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(u, q0)), b0 = _mm256_add_epi32(b0, _mm256_madd_epi16(v, q0));
    a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(u, q1)), b1 = _mm256_add_epi32(b1, _mm256_madd_epi16(v, q1));
    a2 = _mm256_add_epi32(a2, _mm256_madd_epi16(u, q2)), b2 = _mm256_add_epi32(b2, _mm256_madd_epi16(v, q2));
    a3 = _mm256_add_epi32(a3, _mm256_madd_epi16(u, q3)), b3 = _mm256_add_epi32(b3, _mm256_madd_epi16(v, q3));
  }
  store4(out0, sums4(a0, a1, a2, a3));
  store4(out1, sums4(b0, b1, b2, b3));
}

AVX2 void qvanilla_dot_tile_avx2(const int16_t* win, size_t n, size_t kp, const int16_t* w, uint32_t* a,
                                 size_t stride, uint32_t* spare) {
  for (size_t i = 0; i < n; i += 2) {
    const int pair = i + 1 < n;
    dot2x4(win + i * kp, win + (pair ? i + 1 : i) * kp, w, kp, kp, a + i * stride, pair ? a + (i + 1) * stride : spare);
  }
}

/* The depthwise steps (qvanilla_depthwise_conv2d_s8.c's dw_taps() and dw_pairs()): CB = 16
 * channels in one vector of int16 lanes, into two vectors of 32-bit sums. */
typedef char qvanilla_cb_is_a_vector[CB == 16 ? 1 : -1];

static AVX2 ALWAYS_INLINE __m256i widen16(const int8_t* p) {
  return _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i*)p));
}

AVX2 void qvanilla_dw_taps_avx2(uint32_t* acc, const int8_t* const* in, const int16_t* const* w, size_t at, int nt,
                                int first) {
  __m256i a0 = first ? _mm256_setzero_si256() : _mm256_loadu_si256((const __m256i*)acc);
  __m256i a1 = first ? _mm256_setzero_si256() : _mm256_loadu_si256((const __m256i*)(acc + 8));
  for (int t = 0; t < nt; ++t) {
    const __m256i s = widen16(in[t] + at), q = _mm256_loadu_si256((const __m256i*)(w[t] + at));
    /* 32-bit products from their low and high halves, interleaved: channels 0-3, 8-11 and 4-7, 12-15 */
    const __m256i low = _mm256_mullo_epi16(s, q), high = _mm256_mulhi_epi16(s, q);
    const __m256i p0 = _mm256_unpacklo_epi16(low, high), p1 = _mm256_unpackhi_epi16(low, high);
    a0 = _mm256_add_epi32(a0, _mm256_permute2x128_si256(p0, p1, 0x20)); /* channels 0-7 */
    a1 = _mm256_add_epi32(a1, _mm256_permute2x128_si256(p0, p1, 0x31)); /* channels 8-15 */
  }
  _mm256_storeu_si256((__m256i*)acc, a0);
  _mm256_storeu_si256((__m256i*)(acc + 8), a1);
}

/* Two taps at a time, each pair's sum plus 32767 exact in 16 bits (see dw_pairs()). */
AVX2 void qvanilla_dw_pairs_avx2(uint32_t* acc, const int8_t* const* in, const int16_t* const* w, size_t at, int nt,
                                 int first) {
  __m256i a0 = first ? _mm256_setzero_si256() : _mm256_loadu_si256((const __m256i*)acc);
  __m256i a1 = first ? _mm256_setzero_si256() : _mm256_loadu_si256((const __m256i*)(acc + 8));
  const __m256i offset = _mm256_set1_epi16(32767);
  for (int t = 0; t < nt; t += 2) {
    const __m256i p0 = _mm256_mullo_epi16(widen16(in[t] + at), _mm256_loadu_si256((const __m256i*)(w[t] + at)));
    const __m256i p1 = _mm256_mullo_epi16(widen16(in[t + 1] + at), _mm256_loadu_si256((const __m256i*)(w[t + 1] + at)));
    const __m256i sum = _mm256_add_epi16(_mm256_add_epi16(p0, p1), offset);
    a0 = _mm256_add_epi32(a0, _mm256_cvtepu16_epi32(_mm256_castsi256_si128(sum)));
    a1 = _mm256_add_epi32(a1, _mm256_cvtepu16_epi32(_mm256_extracti128_si256(sum, 1)));
  }
  _mm256_storeu_si256((__m256i*)acc, a0);
  _mm256_storeu_si256((__m256i*)(acc + 8), a1);
}

/* One block's output stage in vectors: lanes [8g, 8g + 8) of a row; the 64-bit parameters of its
 * even lanes (2k) and odd lanes (2k + 1) apart, as VPMULDQ multiplies the even 32-bit lanes. */
typedef struct {
  __m256i bias, multiplier, left;       /* 32-bit lanes */
  __m256i round[2], fix[2], right[2];   /* [even, odd]: 64-bit lanes */
  __m256i add, last;                    /* the usual shifts' 32-bit form (see usual8()) */
  int usual;                            /* every lane's right in [33, 54] */
} lanes8;

/* floor(t / 2^right) per 64-bit lane (AVX2 shifts 64-bit lanes logically only): for t < 0,
 * ~(~t >> right). */
static AVX2 ALWAYS_INLINE __m256i floor_shift(__m256i t, __m256i right) {
  const __m256i sign = _mm256_cmpgt_epi64(_mm256_setzero_si256(), t);
  return _mm256_xor_si256(_mm256_srlv_epi64(_mm256_xor_si256(t, sign), right), sign);
}

static AVX2 ALWAYS_INLINE __m256i clamp64(__m256i r, __m256i lo, __m256i hi) {
  r = _mm256_blendv_epi8(r, lo, _mm256_cmpgt_epi64(lo, r));
  return _mm256_blendv_epi8(r, hi, _mm256_cmpgt_epi64(r, hi));
}

/* finish_tflite() on four 64-bit lanes ab = x * M (upward: fix = 0, so finish()), clamped to [lo, hi]. */
static AVX2 ALWAYS_INLINE __m256i finish4(__m256i ab, __m256i round, __m256i fix, __m256i right, __m256i lo,
                                           __m256i hi) {
  const __m256i below = _mm256_cmpgt_epi64(_mm256_set1_epi64x(-((int64_t)1 << 30)), ab);
  const __m256i t = _mm256_sub_epi64(_mm256_add_epi64(ab, round), _mm256_and_si256(below, fix));
  return clamp64(floor_shift(t, right), lo, hi);
}

/* The eight outputs of a row's lanes, less the output zero point, as 32-bit lanes: any shift. */
static AVX2 ALWAYS_INLINE __m256i finish8(const uint32_t* acc, const lanes8* l, __m256i lo, __m256i hi) {
  const __m256i x = _mm256_sllv_epi32(_mm256_add_epi32(_mm256_loadu_si256((const __m256i*)acc), l->bias), l->left);
  const __m256i even = finish4(_mm256_mul_epi32(x, l->multiplier), l->round[0], l->fix[0], l->right[0], lo, hi);
  const __m256i odd = finish4(_mm256_mul_epi32(_mm256_srli_epi64(x, 32), _mm256_srli_epi64(l->multiplier, 32)),
                              l->round[1], l->fix[1], l->right[1], lo, hi);
  return _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA); /* the low words: even from r, odd from s */
}

/* The eight outputs of a row's lanes for the usual shifts (right in [33, 54]) in 32-bit lanes, as
 * requant_columns() computes them (see qvanilla_output_stage.c): the high words of the products
 * (TFLite: of ab + 2^30, less 2^31 if that is negative), plus `add` (rounding and output zero
 * point), shifted right by `last` arithmetically (VPSRAVD), clamped to the activation. */
static AVX2 ALWAYS_INLINE __m256i usual8(const uint32_t* acc, const lanes8* l, __m256i lo, __m256i hi, int tflite) {
  const __m256i x = _mm256_add_epi32(_mm256_loadu_si256((const __m256i*)acc), l->bias);
  __m256i even = _mm256_mul_epi32(x, l->multiplier);
  __m256i odd = _mm256_mul_epi32(_mm256_srli_epi64(x, 32), _mm256_srli_epi64(l->multiplier, 32));
  if (tflite) {
    const __m256i half = _mm256_set1_epi64x((int64_t)1 << 30), two = _mm256_set1_epi64x((int64_t)1 << 31);
    even = _mm256_add_epi64(even, half), odd = _mm256_add_epi64(odd, half);
    even = _mm256_sub_epi64(even, _mm256_and_si256(_mm256_cmpgt_epi64(_mm256_setzero_si256(), even), two));
    odd = _mm256_sub_epi64(odd, _mm256_and_si256(_mm256_cmpgt_epi64(_mm256_setzero_si256(), odd), two));
  }
  const __m256i high = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
  const __m256i r = _mm256_srav_epi32(_mm256_add_epi32(high, l->add), l->last);
  return _mm256_min_epi32(_mm256_max_epi32(r, lo), hi);
}

/* A block's lanes [8h, 8h + 8) of the channels' table (c, bias) in lane order: channel j of lane
 * 8h + k at index[k], those from nb on left out (zero). */
static AVX2 ALWAYS_INLINE __m256i gather8(const int32_t* table, __m256i index, __m256i active) {
  return _mm256_mask_i32gather_epi32(_mm256_setzero_si256(), table, index, active, 4);
}

/* The parameters of lanes [8h, 8h + 8), as qvanilla_channel() makes them: TFLite left = max(shift, 0),
 * right = 31 + max(-shift, 0), round = 2^(right-1) + (right > 31 ? 2^30 : 0), fix = (right > 31 ?
 * 2^31 : 0); upward left = 0, right = 31 - shift, round = 2^(right-1), fix = 0. */
static AVX2 ALWAYS_INLINE void lanes_of(lanes8* l, const uint32_t* bias, const qvanilla_channels* c, size_t o0,
                                        size_t nb, int h, int transposed, int tflite, int32_t zp) {
  const __m256i k = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), lanes = _mm256_add_epi32(k, _mm256_set1_epi32(8 * h));
  /* lane() inverted: lane 4a + b holds channel 4b + a (its own inverse) */
  const __m256i low2 = _mm256_and_si256(lanes, _mm256_set1_epi32(3));
  const __m256i index = transposed ? _mm256_add_epi32(_mm256_slli_epi32(low2, 2), _mm256_srli_epi32(lanes, 2)) : lanes;
  const __m256i active = _mm256_cmpgt_epi32(_mm256_set1_epi32((int32_t)nb), index);
  const __m256i shift = gather8(c->shift + o0, index, active), zero = _mm256_setzero_si256();
  l->bias = gather8((const int32_t*)bias, index, active);
  l->multiplier = gather8(c->multiplier + o0, index, active);
  l->left = tflite ? _mm256_max_epi32(shift, zero) : zero;
  const __m256i right = tflite ? _mm256_sub_epi32(_mm256_set1_epi32(31), _mm256_min_epi32(shift, zero))
                               : _mm256_sub_epi32(_mm256_set1_epi32(31), shift); /* in [1, 62] */
  /* requant_columns()'s n = right - 32 (TFLite: right - 31), add = 2^(last-1) (TFLite 2^(last-1)
   * too: last = n - 1) + output_zp * 2^last */
  const __m256i usual = _mm256_and_si256(_mm256_cmpgt_epi32(right, _mm256_set1_epi32(32)),
                                         _mm256_cmpgt_epi32(_mm256_set1_epi32(55), right));
  l->usual = (_mm256_movemask_epi8(_mm256_andnot_si256(usual, active)) == 0); /* lanes from nb on: any */
  l->last = _mm256_sub_epi32(right, _mm256_set1_epi32(32));
  l->add = _mm256_add_epi32(_mm256_sllv_epi32(_mm256_set1_epi32(1), _mm256_sub_epi32(l->last, _mm256_set1_epi32(1))),
                            _mm256_sllv_epi32(_mm256_set1_epi32(zp), l->last));
  const __m256i split[2] = {_mm256_and_si256(right, _mm256_set1_epi64x(0xffffffff)), _mm256_srli_epi64(right, 32)};
  for (int odd = 0; odd < 2; ++odd) {
    const __m256i r = split[odd], skewed = _mm256_cmpgt_epi64(r, _mm256_set1_epi64x(31));
    l->right[odd] = r;
    l->round[odd] = _mm256_sllv_epi64(_mm256_set1_epi64x(1), _mm256_sub_epi64(r, _mm256_set1_epi64x(1)));
    l->fix[odd] = zero;
    if (tflite) {
      l->round[odd] = _mm256_add_epi64(l->round[odd], _mm256_and_si256(skewed, _mm256_set1_epi64x((int64_t)1 << 30)));
      l->fix[odd] = _mm256_and_si256(skewed, _mm256_set1_epi64x((int64_t)1 << 31));
    }
  }
}

/* A row's outputs: lanes r0 (0 .. 8) and r1 (8 .. 16), each in [-128, 127], as bytes in channel
 * order (shuffle: byte j from lane(j)), the first nb stored. */
static AVX2 ALWAYS_INLINE void store_row(__m256i r0, __m256i r1, __m128i shuffle, int8_t* o, size_t nb) {
  /* packs interleaves the 128-bit halves: put back in order */
  const __m256i w16 = _mm256_permute4x64_epi64(_mm256_packs_epi32(r0, r1), 0xD8);
  const __m128i bytes = _mm_shuffle_epi8(_mm_packs_epi16(_mm256_castsi256_si128(w16), _mm256_extracti128_si256(w16, 1)),
                                         shuffle);
  if (nb == QL) {
    _mm_storeu_si128((__m128i*)o, bytes);
  } else {
    int8_t part[QL];
    _mm_storeu_si128((__m128i*)part, bytes);
    memcpy(o, part, nb);
  }
}

/* qvanilla_requant_rows() for one block of nb <= QL channels (o0 .. o0 + nb - 1 of the table c,
 * biases bias[j], in lanes lane(j)), every rounding and shift the API accepts. */
AVX2 void qvanilla_requant_avx2(const uint32_t* acc, size_t stride, size_t rows, const uint32_t* bias,
                                const qvanilla_channels* c, size_t o0, size_t nb, int8_t* out, size_t ostride,
                                int transposed, const qvanilla_conv* p) {
  const int tflite = p->rounding == QVANILLA_ROUNDING_TFLITE;
  lanes8 g[2];
  lanes_of(&g[0], bias, c, o0, nb, 0, transposed, tflite, p->output_zp);
  lanes_of(&g[1], bias, c, o0, nb, 1, transposed, tflite, p->output_zp);
  /* output byte j: lane(j) */
  const __m128i shuffle = transposed ? _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15)
                                     : _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  if (g[0].usual && g[1].usual) {
    const __m256i lo = _mm256_set1_epi32(p->act_min), hi = _mm256_set1_epi32(p->act_max);
    for (size_t i = 0; i < rows; ++i) {
      const uint32_t* a = acc + i * stride;
      store_row(usual8(a, &g[0], lo, hi, tflite), usual8(a + 8, &g[1], lo, hi, tflite), shuffle, out + i * ostride, nb);
    }
    return;
  }
  const __m256i lo = _mm256_set1_epi64x(p->act_min - p->output_zp), hi = _mm256_set1_epi64x(p->act_max - p->output_zp);
  const __m256i zp = _mm256_set1_epi32(p->output_zp);
  for (size_t i = 0; i < rows; ++i) {
    const uint32_t* a = acc + i * stride;
    store_row(_mm256_add_epi32(finish8(a, &g[0], lo, hi), zp), _mm256_add_epi32(finish8(a + 8, &g[1], lo, hi), zp),
              shuffle, out + i * ostride, nb);
  }
}
#endif
