/* The kit's fixed-point requantization of int32 accumulators, in both roundings int8 kernels need
 * (header only: static inline, C99, no undefined behaviour for any int32 argument):
 *  - kit_requantize: TVM's qnn.requantize (single rounding, ties upward);
 *  - kit_requantize_tflite: TFLite's reference kernels' MultiplyByQuantizedMultiplier (gemmlowp's
 *    two roundings).
 * Shared by backends' C libraries (QVanilla's and Chocolate's). */
#ifndef KIT_REQUANTIZE_H_
#define KIT_REQUANTIZE_H_

#include <stdint.h>

/* The shifts a per-channel multiplier takes in TVM's and TFLite's quantization: in this range both
 * functions are the frameworks' results bit for bit; outside it they go on with the same meaning. */
#define KIT_REQUANTIZE_SHIFT_MIN (-31)
#define KIT_REQUANTIZE_SHIFT_MAX 30

/* floor(x / 2^n), 0 <= n < 64: an arithmetic right shift, spelled so that standard C defines it
 * (>> of a negative value is implementation-defined); gcc and clang emit one sar for it. */
static inline int64_t kit_floor_shift(int64_t x, int n) { return x < 0 ? ~(~x >> n) : x >> n; }

/* The int32 a two's-complement adder holds as u (no implementation-defined conversion). */
static inline int32_t kit_wrapped(uint32_t u) {
  return u <= INT32_MAX ? (int32_t)u : (int32_t)(u - 2147483648u) - INT32_MAX - 1;
}

/* round_half_up(acc * multiplier * 2^(shift - 31)) saturated to int32, for shift in [-31, 62].
 * |acc * multiplier| <= 2^62; a left shift that would take it to 2^62 or beyond saturates first
 * (the result is beyond int32 then anyway), so nothing overflows 64 bits. */
static inline int32_t kit_requantize_in_range(int32_t acc, int32_t multiplier, int shift) {
  int64_t x = (int64_t)acc * multiplier;
  int right = 31;
  if (shift > 0) {
    const int64_t limit = (int64_t)1 << (62 - shift);
    if (x >= limit) return INT32_MAX;
    if (x <= -limit) return INT32_MIN;
    x *= (int64_t)1 << shift;
  } else {
    right -= shift; /* 31 .. 62 */
  }
  x = kit_floor_shift(x + ((int64_t)1 << (right - 1)), right); /* rounds ties upward */
  return x > INT32_MAX ? INT32_MAX : x < INT32_MIN ? INT32_MIN : (int32_t)x;
}

/* TVM's fixed-point multiply: (acc << max(shift, 0)) * multiplier, rounded (ties upward) and
 * shifted right by 31 - min(shift, 0), saturated to int32.  Exact for every int32 argument,
 * i.e. as if computed with unbounded integers, whatever the shift. */
static inline int32_t kit_requantize(int32_t acc, int32_t multiplier, int32_t shift) {
  if (shift < KIT_REQUANTIZE_SHIFT_MIN) {
    /* A right shift by 63 or more: (x + 2^(right-1)) / 2^right with |x| <= 2^62 rounds to 0,
     * but for x = 2^62 (acc = multiplier = INT32_MIN) at right = 63, which is exactly 1/2. */
    return shift == KIT_REQUANTIZE_SHIFT_MIN - 1 && (int64_t)acc * multiplier == (int64_t)1 << 62;
  }
  if (shift > 62) { /* any non-zero product leaves int32 */
    const int64_t x = (int64_t)acc * multiplier;
    return x > 0 ? INT32_MAX : x < 0 ? INT32_MIN : 0;
  }
  return kit_requantize_in_range(acc, multiplier, shift);
}

/* gemmlowp's SaturatingRoundingDoublingHighMul: a * b / 2^31, nudged by 2^30 (1 - 2^30 if the
 * product is negative) and truncated toward zero as C's division does; INT32_MAX for the one
 * product whose quotient leaves int32 (a = b = INT32_MIN, 2^62).  Otherwise |a * b| < 2^62 and the
 * quotient is in [-2^31 + 1, 2^31 - 1]. */
static inline int32_t kit_doubling_high_mul(int32_t a, int32_t b) {
  if (a == INT32_MIN && b == INT32_MIN) return INT32_MAX;
  const int64_t ab = (int64_t)a * b;
  const int64_t nudge = ab >= 0 ? (int64_t)1 << 30 : 1 - ((int64_t)1 << 30);
  return (int32_t)((ab + nudge) / ((int64_t)1 << 31));
}

/* gemmlowp's RoundingDivideByPOT: x / 2^exponent rounded half away from zero, exponent in [0, 31]:
 * the floor, plus one where the remainder (x's low bits, x & mask) passes half (half less one if
 * x >= 0, so that a positive tie goes up, a negative one down). */
static inline int32_t kit_divide_by_pot(int32_t x, int exponent) {
  const uint32_t mask = (uint32_t)(((uint64_t)1 << exponent) - 1);
  const uint32_t remainder = (uint32_t)x & mask; /* modulo 2^32: two's complement's low bits */
  const uint32_t threshold = (mask >> 1) + (x < 0 ? 1u : 0u);
  return (int32_t)(kit_floor_shift(x, exponent) + (remainder > threshold ? 1 : 0)); /* +1 only if exponent > 0 */
}

/* TFLite's MultiplyByQuantizedMultiplier (tensorflow/lite/kernels/internal/common.h, the build
 * without TFLITE_SINGLE_ROUNDING), with gemmlowp's two roundings:
 *     left = max(shift, 0), right = max(-shift, 0)
 *     x = acc * 2^left, wrapped to int32 (TFLite multiplies in int32)
 *     h = SaturatingRoundingDoublingHighMul(x, multiplier)
 *     result = RoundingDivideByPOT(h, right): h / 2^right rounded half away from zero.
 * No zero point, no clamp.  For shift in [KIT_REQUANTIZE_SHIFT_MIN, KIT_REQUANTIZE_SHIFT_MAX]
 * this is TFLite's result bit for bit.  Beyond that range (where TFLite's C++ would shift by 31
 * or more, which C does not define) the same arithmetic goes on with its meaning kept: x = acc *
 * 2^left modulo 2^32 (INT32_MIN or 0 at shift 31, 0 from shift 32 on), and h / 2^right rounded
 * half away from zero (0 from shift -32 down: |h| < 2^31).  Defined for every int32 argument. */
static inline int32_t kit_requantize_tflite(int32_t acc, int32_t multiplier, int32_t shift) {
  if (shift < KIT_REQUANTIZE_SHIFT_MIN) return 0; /* |h| < 2^31: |h / 2^-shift| < 1/2, rounded to 0 */
  /* acc * 2^left in int32 arithmetic, i.e. modulo 2^32: 0 from left = 32 on */
  const uint32_t x = shift <= 0 ? (uint32_t)acc : shift < 32 ? (uint32_t)acc << shift : 0u;
  return kit_divide_by_pot(kit_doubling_high_mul(kit_wrapped(x), multiplier), shift < 0 ? -shift : 0);
}

#endif /* KIT_REQUANTIZE_H_ */
