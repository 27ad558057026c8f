// chocolate_output_stage.v against the C model's output stage (chocolate_store: kit_requantize, the
// zero point, the clamp) on every edge of its arguments' ranges and on random ones, bit for bit.
// Usage: tb_output_stage SEED COUNT; prints "ok N" or the first mismatches, exit status 1 then.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "Vchocolate_output_stage.h"
#include "verilated.h"
extern "C" {
#include "kit_requantize.h"
}

static int8_t model(int32_t acc, int32_t bias, int32_t multiplier, int32_t shift, int8_t zp, int8_t lo, int8_t hi) {
  const int32_t v = kit_wrapped((uint32_t)acc + (uint32_t)bias);
  int64_t r = (int64_t)kit_requantize(v, multiplier, shift) + zp; /* as chocolate_store */
  r = r < lo ? lo : r > hi ? hi : r;
  return (int8_t)r;
}

int main(int argc, char** argv) {
  Verilated::commandArgs(argc, argv);
  const unsigned seed = argc > 1 ? (unsigned)atoi(argv[1]) : 1;
  const long count = argc > 2 ? atol(argv[2]) : 100000;
  std::mt19937 rng(seed);
  const int32_t edges[] = {INT32_MIN, INT32_MIN + 1, -(1 << 30), -65536, -129, -1, 0, 1, 127, 128, 1 << 30, INT32_MAX - 1,
                           INT32_MAX};
  const int32_t shifts[] = {INT32_MIN, -200, -96, -65, -64, -63, -62, -33, -32, -31, -30, -8, -1, 0, 1, 2, 29, 30,
                            31, 32, 33, 62, 63, 64, 65, 95, 200, INT32_MAX};
  Vchocolate_output_stage stage;
  long checked = 0, wrong = 0;
  for (long t = 0; t < count; ++t) {
    auto pick = [&](const int32_t* set, size_t n) { return rng() % 3 == 0 ? set[rng() % n] : (int32_t)rng(); };
    const int32_t acc = pick(edges, sizeof edges / 4), bias = rng() % 2 ? pick(edges, sizeof edges / 4) : 0;
    const int32_t multiplier = pick(edges, sizeof edges / 4);
    const int32_t shift = rng() % 2 ? shifts[rng() % (sizeof shifts / 4)] : (int32_t)(rng() % 80) - 40;
    const int8_t zp = (int8_t)rng(), a = (int8_t)rng(), b = (int8_t)rng();
    const int8_t lo = a < b ? a : b, hi = a < b ? b : a;
    stage.acc = (uint32_t)acc, stage.bias = (uint32_t)bias, stage.multiplier = (uint32_t)multiplier;
    stage.shift = (uint32_t)shift, stage.output_zp = (uint8_t)zp, stage.act_min = (uint8_t)lo, stage.act_max = (uint8_t)hi;
    stage.eval();
    const int8_t want = model(acc, bias, multiplier, shift, zp, lo, hi), got = (int8_t)stage.out;
    ++checked;
    if (got != want && ++wrong <= 10) {
      printf("mismatch: acc %d bias %d multiplier %d shift %d zp %d clamp [%d, %d]: rtl %d, model %d\n", acc, bias,
             multiplier, shift, zp, lo, hi, got, want);
    }
  }
  stage.final();
  if (wrong) return printf("%ld of %ld differ\n", wrong, checked), 1;
  printf("ok %ld\n", checked);
  return 0;
}
