/* Chocolate's DMA engine: im2col and weight tiles into the scratchpad (padding on the way in), and
 * the accumulator out through the output stage (bias, requantization or clamp) into the host. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "chocolate_internal.h"
#include "kit_requantize.h" /* kit_requantize: the output stage's rounding, TVM's */

/* The host element of the im2col matrix at (m, k), or -1 for the padding value. */
static int64_t im2col_index(const layer* c, int64_t m, int64_t k) {
  if (m >= c->rows || k >= c->depth) return -1;
  const int64_t y = m / c->ow, x = m % c->ow, kx = k / c->ic % c->kw, ky = k / c->ic / c->kw;
  const int64_t iy = y * c->stride_h - c->pad_top + ky, ix = x * c->stride_w - c->pad_left + kx;
  return iy >= 0 && iy < c->ih && ix >= 0 && ix < c->iw ? (iy * c->iw + ix) * c->ic + k % c->ic : -1;
}

/* The host element of the weights at (k, n), or -1 for 0. */
static int64_t weights_index(const layer* c, int64_t k, int64_t n) {
  return k < c->depth && n < c->channels ? k * c->channels + n : -1;
}

/* The rows x cols tile at (r0, c0) of a host matrix (index() locates its elements) into dst,
 * padded with `pad` (int8) or 0.0f; only host elements actually read count as DMA bytes. */
static chocolate_status dma_in(region dst, const void* host, int64_t r0, int64_t c0, int64_t rows, int64_t cols,
                      int64_t (*index)(const layer*, int64_t, int64_t), int32_t pad) {
  const int64_t elem = chocolate_dev.conf.f32 ? 4 : 1;
  unsigned char* out = chocolate_dev.mem + dst.addr;
  int64_t read = 0;
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j, out += elem) {
      const int64_t at = index(&chocolate_dev.conf, r0 + i, c0 + j);
      if (chocolate_dev.conf.f32) store_f32(out, at < 0 ? 0.0f : ((const float*)host)[at]);
      else store_s8(out, at < 0 ? pad : ((const int8_t*)host)[at]);
      read += at >= 0;
    }
  }
  chocolate_mark_written(dst);
  chocolate_dev.counters.dma_in_calls += 1;
  chocolate_dev.counters.dma_in_bytes += read * elem;
  chocolate_count_transfer(dst.bytes);
  return CHOCOLATE_OK;
}

chocolate_status chocolate_dma_im2col(int32_t a, const void* input, int32_t m0, int32_t k0) {
  const region dst = operand("a", a, chocolate_dev.tile_m, chocolate_dev.tile_k);
  CHECK(chocolate_check_call(__func__, "input", input, "im2col", m0, k0, chocolate_dev.conf.rows, chocolate_dev.conf.depth));
  CHECK(chocolate_check_inside(__func__, dst));
  return dma_in(dst, input, m0, k0, chocolate_dev.tile_m, chocolate_dev.tile_k, im2col_index, chocolate_dev.conf.input_zp);
}

/* The input patch: rows [iy0, iy0 + rows) of the host input, every column and channel. */
chocolate_status chocolate_dma_patch(int32_t p, const void* input, int32_t iy0, int32_t rows) {
  const layer* c = &chocolate_dev.conf;
  CHECK(chocolate_check_call(__func__, "input", input, NULL, 0, 0, 0, 0));
  if (iy0 < 0 || rows < 1 || iy0 > c->ih - rows)
    return chocolate_fail(CHOCOLATE_EBOUNDS, __func__, "input rows [%ld, %ld) are not inside the %ld rows of the input",
                          (long)iy0, (long)iy0 + rows, (long)c->ih);
  const int64_t row = (int64_t)c->iw * c->ic, elems = row * rows, elem = c->f32 ? 4 : 1;
  const region dst = {"patch", p, elems * elem, c->f32};
  CHECK(chocolate_check_inside(__func__, dst));
  memcpy(chocolate_dev.mem + p, (const unsigned char*)input + iy0 * row * elem, (size_t)(elems * elem));
  chocolate_mark_written(dst);
  chocolate_dev.patch_set = 1;
  chocolate_dev.patch_addr = p;
  chocolate_dev.patch_iy0 = iy0;
  chocolate_dev.patch_rows = rows;
  chocolate_dev.counters.dma_in_calls += 1;
  chocolate_dev.counters.dma_in_bytes += elems * elem;
  chocolate_count_transfer(dst.bytes);
  return CHOCOLATE_OK;
}

/* The A tile at (m0, k0) from the patch: checked whole before anything is written. */
chocolate_status chocolate_im2col_patch(int32_t a, int32_t p, int32_t m0, int32_t k0) {
  const layer* c = &chocolate_dev.conf;
  const region dst = operand("a", a, chocolate_dev.tile_m, chocolate_dev.tile_k);
  CHECK(chocolate_check_call(__func__, NULL, NULL, "im2col", m0, k0, c->rows, c->depth));
  CHECK(chocolate_check_inside(__func__, dst));
  if (!chocolate_dev.patch_set || chocolate_dev.patch_addr != p)
    return chocolate_fail(CHOCOLATE_EPATCH, __func__, "no input patch at %ld since the layer was configured "
                          "(chocolate_dma_patch first)", (long)p);
  const int64_t row = (int64_t)c->iw * c->ic, elem = c->f32 ? 4 : 1;
  const int64_t first = chocolate_dev.patch_iy0 * row, end = first + chocolate_dev.patch_rows * row;
  const region src = {"patch", p, (end - first) * elem, c->f32};
  CHECK(chocolate_check_apart(__func__, dst, src));
  /* The patch's bytes are written: its flags were set by chocolate_dma_patch and only a begin,
   * which forgets the patch, clears them. */
  for (int64_t i = 0; i < chocolate_dev.tile_m; ++i) {
    for (int64_t j = 0; j < chocolate_dev.tile_k; ++j) {
      const int64_t at = im2col_index(c, m0 + i, k0 + j);
      if (at >= 0 && (at < first || at >= end))
        return chocolate_fail(CHOCOLATE_EPATCH, __func__, "im2col element (%lld, %lld) reads input row %lld, outside the "
                              "patch's rows [%ld, %ld)", (long long)(m0 + i), (long long)(k0 + j),
                              (long long)(at / row), (long)chocolate_dev.patch_iy0,
                              (long)(chocolate_dev.patch_iy0 + chocolate_dev.patch_rows));
    }
  }
  unsigned char* out = chocolate_dev.mem + a;
  const unsigned char* patch = chocolate_dev.mem + p;
  for (int64_t i = 0; i < chocolate_dev.tile_m; ++i) {
    for (int64_t j = 0; j < chocolate_dev.tile_k; ++j, out += elem) {
      const int64_t at = im2col_index(c, m0 + i, k0 + j);
      if (at >= 0) memcpy(out, patch + (at - first) * elem, (size_t)elem);
      else if (c->f32) store_f32(out, 0.0f);
      else store_s8(out, c->input_zp);
    }
  }
  chocolate_mark_written(dst);
  chocolate_dev.counters.dma_local_calls += 1;
  chocolate_count_transfer(dst.bytes);
  return CHOCOLATE_OK;
}

chocolate_status chocolate_dma_weights(int32_t b, const void* weights, int32_t k0, int32_t n0) {
  const region dst = operand("b", b, chocolate_dev.tile_k, chocolate_dev.tile_n);
  CHECK(chocolate_check_call(__func__, "weights", weights, "weights", k0, n0, chocolate_dev.conf.depth, chocolate_dev.conf.channels));
  CHECK(chocolate_check_inside(__func__, dst));
  return dma_in(dst, weights, k0, n0, chocolate_dev.tile_k, chocolate_dev.tile_n, weights_index, 0);
}

chocolate_status chocolate_store(void* output, int32_t acc, int32_t m0, int32_t n0) {
  const layer* c = &chocolate_dev.conf;
  const region src = accumulator(acc);
  CHECK(chocolate_check_call(__func__, "output", output, "output", m0, n0, c->rows, c->channels));
  CHECK(chocolate_check_inside(__func__, src));
  CHECK(chocolate_check_written(__func__, src));

  const int64_t channels = c->channels;
  const int64_t rows = c->rows - m0 < chocolate_dev.tile_m ? c->rows - m0 : chocolate_dev.tile_m;
  const int64_t cols = channels - n0 < chocolate_dev.tile_n ? channels - n0 : chocolate_dev.tile_n;
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      const unsigned char* pc = chocolate_dev.mem + acc + 4 * (i * chocolate_dev.tile_n + j);
      const int64_t n = n0 + j, at = (m0 + i) * channels + n;
      if (c->f32) {
        float v = load_f32(pc);
        if (c->bias != NULL) v += c->bias[n];
        ((float*)output)[at] = v < c->lo ? c->lo : v > c->hi ? c->hi : v;
      } else {
        const int32_t v = wrap32((uint32_t)load_i32(pc) + (uint32_t)c->table[n]);
        int64_t r = (int64_t)kit_requantize(v, c->table[channels + n], c->table[2 * channels + n]) + c->output_zp;
        r = r < c->act_min ? c->act_min : r > c->act_max ? c->act_max : r;
        ((int8_t*)output)[at] = (int8_t)r;
      }
    }
  }
#ifdef CHOCOLATE_RTL
  if (!c->f32) chocolate_rtl_store(acc, m0, n0, (const int8_t*)output);
#endif
  chocolate_dev.counters.dma_out_calls += 1;
  chocolate_dev.counters.dma_out_bytes += rows * cols * (c->f32 ? 4 : 1);
  chocolate_count_transfer(src.bytes);
  return CHOCOLATE_OK;
}


#define TYPED(NAME, F32, CALL) \
  do {                         \
    CHECK(chocolate_check_type(NAME, F32)); \
    return CALL;               \
  } while (0)

chocolate_status chocolate_dma_im2col_s8(int32_t a, int8_t* input, int32_t m0, int32_t k0) {
  TYPED(__func__, 0, chocolate_dma_im2col(a, input, m0, k0));
}
chocolate_status chocolate_dma_weights_s8(int32_t b, int8_t* weights, int32_t k0, int32_t n0) {
  TYPED(__func__, 0, chocolate_dma_weights(b, weights, k0, n0));
}
chocolate_status chocolate_store_s8(int8_t* output, int32_t acc, int32_t m0, int32_t n0) {
  TYPED(__func__, 0, chocolate_store(output, acc, m0, n0));
}
chocolate_status chocolate_dma_im2col_f32(int32_t a, float* input, int32_t m0, int32_t k0) {
  TYPED(__func__, 1, chocolate_dma_im2col(a, input, m0, k0));
}
chocolate_status chocolate_dma_weights_f32(int32_t b, float* weights, int32_t k0, int32_t n0) {
  TYPED(__func__, 1, chocolate_dma_weights(b, weights, k0, n0));
}
chocolate_status chocolate_store_f32(float* output, int32_t acc, int32_t m0, int32_t n0) {
  TYPED(__func__, 1, chocolate_store(output, acc, m0, n0));
}
chocolate_status chocolate_dma_patch_s8(int32_t p, int8_t* input, int32_t iy0, int32_t rows) {
  TYPED(__func__, 0, chocolate_dma_patch(p, input, iy0, rows));
}
chocolate_status chocolate_dma_patch_f32(int32_t p, float* input, int32_t iy0, int32_t rows) {
  TYPED(__func__, 1, chocolate_dma_patch(p, input, iy0, rows));
}

