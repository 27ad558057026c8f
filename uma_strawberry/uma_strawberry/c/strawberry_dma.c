/* Strawberry's DMA engine: 3-D tiles between host memory and the scratchpad, zero padding on the
 * way in.  Arguments are validated before anything is touched; past the checks no index
 * arithmetic can overflow (64-bit, with sizes saturated far above any scratchpad). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "strawberry_internal.h"

/* ------------------------------------------------------------------------------------------ */
/* DMA */

typedef struct {
  int64_t ext[3], stride[3], start[3], n[3];
} tile;

static strawberry_status check_tile(const char* entry, const float* host, const strawberry_tile* in, tile* t,
                                    int inside) {
  if (!strawberry_dev.ready) return strawberry_fail(STRAWBERRY_ENOTREADY, entry, "the device is not initialised (strawberry_begin first)");
  if (host == NULL) return strawberry_fail(STRAWBERRY_EINVAL, entry, "host pointer is NULL");
  if (in == NULL) return strawberry_fail(STRAWBERRY_EINVAL, entry, "tile is NULL");
  for (int d = 0; d < 3; ++d) {
    t->ext[d] = in->extent[d];
    t->stride[d] = in->stride[d];
    t->start[d] = in->start[d];
    t->n[d] = in->size[d];
  }
  for (int d = 0; d < 3; ++d)
    if (t->ext[d] < 1 || t->n[d] < 1)
      return strawberry_fail(STRAWBERRY_ESIZE, entry, "extent %d of the host tensor (%lld) or of the tile (%lld) is below 1", d,
                  (long long)t->ext[d], (long long)t->n[d]);
  for (int d = 0; d < 3; ++d)
    if (t->stride[d] < 0) return strawberry_fail(STRAWBERRY_ESTRIDE, entry, "host stride %d is %lld", d, (long long)t->stride[d]);
  int64_t last = 0; /* the host tensor's last element, in elements from host */
  for (int d = 0; d < 3; ++d) last = min64(SATURATED, last + mul_sat(t->ext[d] - 1, t->stride[d]));
  if (last >= (int64_t)(PTRDIFF_MAX / sizeof(float)) || last >= SATURATED)
    return strawberry_fail(STRAWBERRY_EHOST, entry, "the host tensor is too large to index");
  if (inside)
    for (int d = 0; d < 3; ++d)
      if (t->start[d] < 0 || t->start[d] + t->n[d] > t->ext[d])
        return strawberry_fail(STRAWBERRY_EHOST, entry, "tile [%lld, %lld) along dimension %d is not inside the host tensor's %lld",
                    (long long)t->start[d], (long long)(t->start[d] + t->n[d]), d, (long long)t->ext[d]);
  return STRAWBERRY_OK;
}

static int64_t tile_bytes(const tile* t) { return mul_sat(mul_sat(mul_sat(4, t->n[0]), t->n[1]), t->n[2]); }

static void count_transfer(int64_t spad_bytes) {
  strawberry_dev.counters.dma_cycles += strawberry_dev.dma_setup_cycles + ceil_div(spad_bytes, strawberry_dev.dma_bytes_per_cycle);
}

strawberry_status strawberry_dma_in(int32_t spad_addr, const float* host, const strawberry_tile* box) {
  static const char entry[] = "strawberry_dma_in";
  tile t;
  strawberry_status status = check_tile(entry, host, box, &t, 0);
  if (status != STRAWBERRY_OK) return status;
  const region dst = {"destination", spad_addr, tile_bytes(&t)};
  if ((status = strawberry_check_inside(entry, dst)) != STRAWBERRY_OK) return status;

  float* out = strawberry_dev.mem + spad_addr / 4;
  /* Along dimension 2, the tile's elements j in [lo2, hi2) are inside the host tensor. */
  const int64_t lo2 = min64(t.n[2], max64(0, -t.start[2])), hi2 = max64(lo2, min64(t.n[2], t.ext[2] - t.start[2]));
  int64_t read = 0;
  for (int64_t j0 = 0; j0 < t.n[0]; ++j0) {
    const int64_t h0 = t.start[0] + j0;
    for (int64_t j1 = 0; j1 < t.n[1]; ++j1, out += t.n[2]) {
      const int64_t h1 = t.start[1] + j1;
      if (h0 < 0 || h0 >= t.ext[0] || h1 < 0 || h1 >= t.ext[1] || lo2 >= hi2) {
        memset(out, 0, (size_t)t.n[2] * sizeof(float));
        continue;
      }
      const float* row = host + (h0 * t.stride[0] + h1 * t.stride[1]);
      for (int64_t j2 = 0; j2 < lo2; ++j2) out[j2] = 0.0f;
      if (t.stride[2] == 1) {
        memcpy(out + lo2, row + (t.start[2] + lo2), (size_t)(hi2 - lo2) * sizeof(float));
      } else {
        for (int64_t j2 = lo2; j2 < hi2; ++j2) out[j2] = row[(t.start[2] + j2) * t.stride[2]];
      }
      for (int64_t j2 = hi2; j2 < t.n[2]; ++j2) out[j2] = 0.0f;
      read += hi2 - lo2;
    }
  }
  strawberry_mark_written(dst);
  strawberry_dev.counters.dma_in_calls += 1;
  strawberry_dev.counters.dma_in_bytes += 4 * read;
  strawberry_dev.counters.dma_pad_bytes += dst.bytes - 4 * read;
  count_transfer(dst.bytes);
  return STRAWBERRY_OK;
}

strawberry_status strawberry_dma_out(float* host, int32_t spad_addr, const strawberry_tile* box) {
  static const char entry[] = "strawberry_dma_out";
  tile t;
  strawberry_status status = check_tile(entry, host, box, &t, 1);
  if (status != STRAWBERRY_OK) return status;
  const region src = {"source", spad_addr, tile_bytes(&t)};
  if ((status = strawberry_check_inside(entry, src)) != STRAWBERRY_OK) return status;
  if ((status = strawberry_check_written(entry, src)) != STRAWBERRY_OK) return status;
  if ((status = strawberry_check_no_partial(entry, src)) != STRAWBERRY_OK) return status;

  const float* in = strawberry_dev.mem + spad_addr / 4;
  for (int64_t j0 = 0; j0 < t.n[0]; ++j0) {
    for (int64_t j1 = 0; j1 < t.n[1]; ++j1, in += t.n[2]) {
      float* row = host + ((t.start[0] + j0) * t.stride[0] + (t.start[1] + j1) * t.stride[1]);
      if (t.stride[2] == 1) {
        memcpy(row + t.start[2], in, (size_t)t.n[2] * sizeof(float));
      } else {
        for (int64_t j2 = 0; j2 < t.n[2]; ++j2) row[(t.start[2] + j2) * t.stride[2]] = in[j2];
      }
    }
  }
  strawberry_dev.counters.dma_out_calls += 1;
  strawberry_dev.counters.dma_out_bytes += src.bytes;
  count_transfer(src.bytes);
  return STRAWBERRY_OK;
}
