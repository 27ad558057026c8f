/* QVanilla's argument checks (every entry's) and its requantizations.  The scratch layouts are the
 * entries' own (qvanilla_conv2d_s8.c, qvanilla_depthwise_conv2d_s8.c): each passes its sizer. */
#include "qvanilla_internal.h"

/* The requantizations are the kit's (kit_requantize.h). */
int32_t qvanilla_requantize(int32_t acc, int32_t multiplier, int32_t shift) {
  return kit_requantize(acc, multiplier, shift);
}

int32_t qvanilla_requantize_tflite(int32_t acc, int32_t multiplier, int32_t shift) {
  return kit_requantize_tflite(acc, multiplier, shift);
}

/* *count *= n unless that would exceed max (then 0); n >= 1. */
static int fits(size_t* count, int32_t n, size_t max) {
  if (*count > max / (size_t)n) return 0;
  *count *= (size_t)n;
  return 1;
}

/* Whether (out-1)*stride + kernel stays within INT32_MAX/2, so y*stride - pad + ky fits. */
static int extent_ok(int32_t out, int32_t stride, int32_t kernel) {
  return (int64_t)(out - 1) * stride + kernel <= INT32_MAX / 2;
}

static int is_int8(int32_t v) { return v >= -128 && v <= 127; }

int qvanilla_sizes(const qvanilla_dims* input_dims, const qvanilla_dims* filter_dims, const qvanilla_dims* output_dims,
                   int kind, qvanilla_conv* p) {
  const int depthwise = kind == DEPTHWISE || kind == DEPTHWISE_PACKED;
  p->ih = input_dims->h, p->iw = input_dims->w, p->ic = input_dims->c;
  p->oh = output_dims->h, p->ow = output_dims->w, p->oc = output_dims->c;
  p->kh = filter_dims->h, p->kw = filter_dims->w;
  if (p->ih <= 0 || p->iw <= 0 || p->ic <= 0 || p->oh <= 0 || p->ow <= 0 || p->oc <= 0 || p->kh <= 0 || p->kw <= 0) {
    return 0;
  }
  return input_dims->n == 1 && output_dims->n == 1 && filter_dims->c == p->ic &&
         (depthwise ? filter_dims->n == 1 && p->oc == p->ic : filter_dims->n == p->oc);
}

/* Whether every tensor of a conv of valid sizes can be indexed (ERANGE's checks but the window
 * extents, which need the strides): _get_buffer_size applies them too. */
static int tensors_in_range(const qvanilla_conv* p, int kind) {
  const size_t bytes = PTRDIFF_MAX;
  size_t in = 1, out = 1, w = 1, table = 1;
  int ok = fits(&in, p->ih, bytes) && fits(&in, p->iw, bytes) && fits(&in, p->ic, bytes) && fits(&out, p->oh, bytes) &&
           fits(&out, p->ow, bytes) && fits(&out, p->oc, bytes) && fits(&w, p->kh, bytes) && fits(&w, p->kw, bytes) &&
           fits(&table, p->oc, bytes / sizeof(int32_t));
  if (ok && kind == PLAIN) ok = fits(&w, p->ic, bytes) && fits(&w, p->oc, bytes);
  if (ok && kind == DEPTHWISE) ok = fits(&w, p->oc, bytes);
  if (ok && kind == DEPTHWISE_PACKED) ok = fits(&w, p->oc, bytes / sizeof(int16_t));
  if (ok && (kind == PACKED || kind == PACKED8)) { /* OCP rows of KP int16, or of K16 int8 */
    const size_t align = kind == PACKED ? KA : K16, size = kind == PACKED ? sizeof(int16_t) : 1;
    ok = fits(&w, p->ic, bytes) && w <= bytes - align;
    if (ok) {
      w = (w + align - 1) / align * align;
      const size_t ocp = ((size_t)p->oc + OB - 1) / OB * OB;
      ok = w <= bytes / size / ocp;
    }
  }
  return ok;
}

/* The checks after ESIZE's, in the header's order, of a conv whose sizes are valid. */
static qvanilla_status check_conv(const qvanilla_conv* p, const int32_t* shift, int kind) {
  if (p->stride_h <= 0 || p->stride_w <= 0) return QVANILLA_ESTRIDE;
  if (p->pad_top < 0 || p->pad_left < 0) return QVANILLA_EPAD;
  if (p->act_min > p->act_max || !is_int8(p->act_min) || !is_int8(p->act_max)) return QVANILLA_ECLAMP;
  if (!is_int8(p->input_zp) || !is_int8(p->weight_zp) || !is_int8(p->output_zp)) return QVANILLA_EZEROPOINT;
  if (!tensors_in_range(p, kind) || !extent_ok(p->oh, p->stride_h, p->kh) || !extent_ok(p->ow, p->stride_w, p->kw)) {
    return QVANILLA_ERANGE;
  }
  for (int32_t o = 0; o < p->oc; ++o) {
    if (shift[o] < QVANILLA_SHIFT_MIN || shift[o] > QVANILLA_SHIFT_MAX) return QVANILLA_ESHIFT;
  }
  /* Last but the scratch, as the header lists it (the shifts' range is the same in both roundings). */
  if (p->rounding != QVANILLA_ROUNDING_UPWARD && p->rounding != QVANILLA_ROUNDING_TFLITE) return QVANILLA_EROUNDING;
  return QVANILLA_OK;
}

static int packed_kind(int kind) { return kind != PLAIN && kind != DEPTHWISE; }

qvanilla_status qvanilla_check(const qvanilla_context* ctx, const qvanilla_conv_params* params,
                               const qvanilla_per_channel_quant_params* quant, const qvanilla_dims* input_dims,
                               const int8_t* input, const qvanilla_dims* filter_dims, const void* weights,
                               const int32_t* bias, const qvanilla_dims* output_dims, const int8_t* output, int kind,
                               qvanilla_sizer scratch, qvanilla_conv* p, qvanilla_channels* q) {
  if (ctx == NULL || params == NULL || quant == NULL || quant->multiplier == NULL || quant->shift == NULL ||
      input_dims == NULL || input == NULL || filter_dims == NULL || weights == NULL || output_dims == NULL ||
      output == NULL) { /* bias may be NULL: zeros */
    return QVANILLA_EINVAL;
  }
  if (!qvanilla_sizes(input_dims, filter_dims, output_dims, kind, p)) return QVANILLA_ESIZE;
  p->stride_h = params->stride.h, p->stride_w = params->stride.w;
  p->pad_top = params->padding.h, p->pad_left = params->padding.w;
  p->input_zp = params->input_zp, p->output_zp = params->output_zp;
  p->weight_zp = kind == PLAIN || kind == DEPTHWISE ? params->weight_zp : 0;
  p->act_min = params->activation.min, p->act_max = params->activation.max;
  p->rounding = params->rounding;
#ifdef QVANILLA_AVX2
  p->avx2 = qvanilla_avx2(); /* once per call, not in the loops */
#else
  p->avx2 = 0;
#endif
  const qvanilla_status status = check_conv(p, quant->shift, kind);
  if (status != QVANILLA_OK) return status;
  const size_t need = scratch(p, packed_kind(kind), 1); /* the least it accepts */
  if (need > 0 && (ctx->buf == NULL || ctx->size < 0 || (size_t)ctx->size < need ||
                   (uintptr_t)ctx->buf % QVANILLA_SCRATCH_ALIGN != 0)) {
    return QVANILLA_ESCRATCH;
  }
  q->bias = bias, q->multiplier = quant->multiplier, q->shift = quant->shift;
  return QVANILLA_OK;
}

int32_t qvanilla_buffer_size(const qvanilla_dims* input_dims, const qvanilla_dims* filter_dims, int kind,
                             qvanilla_sizer scratch) {
  qvanilla_conv p;
  if (input_dims == NULL || filter_dims == NULL) return 0;
  /* the output's sizes do not matter: any valid ones, with the channels the entry needs */
  const qvanilla_dims output_dims = {1, 1, 1, kind == DEPTHWISE || kind == DEPTHWISE_PACKED ? input_dims->c
                                                                                           : filter_dims->n};
  /* what the entries reject for sizes (ESIZE) or ranges (ERANGE, but for the strides'): no size */
  if (!qvanilla_sizes(input_dims, filter_dims, &output_dims, kind, &p) || !tensors_in_range(&p, kind)) return 0;
  return (int32_t)scratch(&p, packed_kind(kind), QVANILLA_SCRATCH_BUDGET); /* below 100 KB */
}
