// chocolate_top.v (core and scratchpad) against the C model (uma_chocolate/c), bit for bit: random
// tiles at random scratchpad addresses (operands at any byte, accumulators on words), ZERO, MATMUL
// and STORE on both, the accumulator tiles and the stored outputs compared.  Prints each command's
// RTL cycles beside the model's estimate.  Usage: tb_core SEED TRIALS; exit status 1 on a mismatch.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "Vchocolate_top.h"
#include "verilated.h"
extern "C" {
#include "chocolate_internal.h"
}

static const int TM = TILE_M, TN = TILE_N, TK = TILE_K, SPAD = SPAD_BYTES;  // -D from the build
static Vchocolate_top top;
static long long cycles;

static void tick() {
  top.clk = 0;
  top.eval();
  top.clk = 1;
  top.eval();
  ++cycles;
}

static void host_write(int32_t byte_addr, uint32_t word) {  // a word through the host port
  top.host_addr = (uint32_t)byte_addr / 4, top.host_we = 1, top.host_wmask = 0xf, top.host_wdata = word;
  tick();
  top.host_we = 0;
}

static uint32_t host_read(int32_t byte_addr) {
  top.host_addr = (uint32_t)byte_addr / 4, top.host_we = 0;
  tick();
  return top.host_rdata;
}

static long long command(int op, int32_t a, int32_t b, int32_t acc) {  // the core's cycles
  top.op = op, top.a_addr = (uint32_t)a, top.b_addr = (uint32_t)b, top.acc_addr = (uint32_t)acc, top.start = 1;
  tick();
  top.start = 0;
  const long long begin = cycles;
  while (top.busy) tick();
  return cycles - begin;
}

// random bytes in [at, at + n) of both scratchpads (the model's marked written)
static void fill(std::mt19937& rng, int32_t at, int32_t n) {
  for (int32_t w = at & ~3; w < at + n; w += 4) {
    uint32_t word;
    memcpy(&word, chocolate_dev.mem + w, 4);
    for (int b = 0; b < 4; ++b) {
      if (w + b >= at && w + b < at + n) {
        const uint32_t v = rng() & 0xff;
        word = (word & ~(0xffu << (8 * b))) | v << (8 * b);
      }
    }
    memcpy(chocolate_dev.mem + w, &word, 4);
    host_write(w, word);
  }
  chocolate_mark_written(region{"fill", at, n, 0});
}

static int compare(const char* what, int32_t at, int32_t n) {
  for (int32_t w = at; w < at + n; w += 4) {
    uint32_t model;
    memcpy(&model, chocolate_dev.mem + w, 4);
    const uint32_t rtl = host_read(w);
    if (rtl != model) return printf("%s: word at %d: rtl %08x, model %08x\n", what, w, rtl, model), 1;
  }
  return 0;
}

int main(int argc, char** argv) {
  Verilated::commandArgs(argc, argv);
  std::mt19937 rng(argc > 1 ? (unsigned)atoi(argv[1]) : 1);
  const int trials = argc > 2 ? atoi(argv[2]) : 50;
  top.rst = 1;
  tick();
  top.rst = 0;
  if (chocolate_begin(SPAD, TM, TN, TK, 1, 0) != CHOCOLATE_OK) return 1;
  const int32_t acc_bytes = 4 * TM * TN, a_bytes = TM * TK, b_bytes = TK * TN;
  long long matmul_cycles = 0, matmuls = 0, store_cycles = 0, zero_cycles = 0;
  for (int t = 0; t < trials; ++t) {
    // a layer of two row tiles and two channel tiles (1x1 conv: depth = ic = TK), random output stage
    const int32_t rows = 2 * TM, channels = 2 * TN;
    std::vector<int32_t> table(3 * channels);
    for (int n = 0; n < channels; ++n) {
      table[n] = rng() % 4 ? (int32_t)(rng() % 20001) - 10000 : (int32_t)rng();
      table[channels + n] = rng() % 4 ? (int32_t)(rng() | 1u << 30) & 0x7fffffff : (int32_t)rng();
      table[2 * channels + n] = rng() % 4 ? -(int32_t)(rng() % 12) : (int32_t)(rng() % 80) - 40;
    }
    const int32_t zp = (int32_t)(rng() % 256) - 128, e1 = (int32_t)(rng() % 256) - 128, e2 = (int32_t)(rng() % 256) - 128;
    const int32_t lo = e1 < e2 ? e1 : e2, hi = e1 < e2 ? e2 : e1;
    if (chocolate_begin(SPAD, TM, TN, TK, 1, 0) != CHOCOLATE_OK ||
        chocolate_configure_s8_call(rows, channels, TK, rows, 1, TK, 1, 1, 1, 1, 0, 0, 1, 0, table.data(), zp, lo,
                                    hi) != CHOCOLATE_OK)
      return printf("the model refused the layer\n"), 1;
    // the accumulators on a word, A and B anywhere else (no overlap)
    const int32_t acc = 4 * (int32_t)(rng() % ((SPAD - acc_bytes) / 4 / 3));
    const int32_t a = acc + acc_bytes + (int32_t)(rng() % ((SPAD - acc - acc_bytes - a_bytes - b_bytes) / 2));
    const int32_t b = a + a_bytes + (int32_t)(rng() % (SPAD - a - a_bytes - b_bytes + 1));
    fill(rng, a, a_bytes);
    fill(rng, b, b_bytes);
    if (rng() % 2) {  // accumulate onto random sums, or from zero
      fill(rng, acc, acc_bytes);
    } else {
      zero_cycles = command(0, 0, 0, acc);
      if (chocolate_zero(acc) != CHOCOLATE_OK) return 1;
      if (compare("zero", acc, acc_bytes)) return 1;
    }
    for (int call = 0; call < 1 + (int)(rng() % 3); ++call) {  // one to three products into the same sums
      matmul_cycles += command(1, a, b, acc), ++matmuls;
      if (chocolate_matmul(a, b, acc) != CHOCOLATE_OK) return printf("model: %s\n", chocolate_last_error()), 1;
      if (compare("matmul", acc, acc_bytes)) return 1;
      fill(rng, a, a_bytes);
    }
    // the store of channel tile n0 through its channels' output stage
    const int32_t n0 = (int32_t)(rng() % 2) * TN;
    std::vector<int8_t> output((size_t)rows * channels);
    if (chocolate_store_s8(output.data(), acc, 0, n0) != CHOCOLATE_OK) return 1;
    for (int j = 0; j < TN; ++j) {
      top.bias[j] = (uint32_t)table[n0 + j];
      top.multiplier[j] = (uint32_t)table[channels + n0 + j];
      top.shift[j] = (uint32_t)table[2 * channels + n0 + j];
    }
    top.output_zp = (uint8_t)zp, top.act_min = (uint8_t)lo, top.act_max = (uint8_t)hi;
    store_cycles = command(2, 0, 0, acc);
    for (int i = 0; i < TM; ++i) {
      for (int j = 0; j < TN; ++j) {
        const int e = i * TN + j;
        const int8_t rtl = (int8_t)(top.out_tile[e / 4] >> (8 * (e % 4)));
        const int8_t model = output[(size_t)i * channels + n0 + j];
        if (rtl != model) return printf("store (%d, %d): rtl %d, model %d\n", i, n0 + j, rtl, model), 1;
      }
    }
  }
  printf("ok %d trials, tiles %dx%dx%d: matmul %lld cycles (model %d), zero %lld, store %lld\n", trials, TM, TN, TK,
         matmul_cycles / matmuls, TK, zero_cycles, store_cycles);
  top.final();
  return 0;
}
