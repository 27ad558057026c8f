// chocolate_spad.v against an array: random byte-masked writes and reads, a read answering the next
// cycle with the word before a write to it in the same cycle.  Usage: tb_spad SEED CYCLES.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "Vchocolate_spad.h"
#include "verilated.h"

int main(int argc, char** argv) {
  Verilated::commandArgs(argc, argv);
  std::mt19937 rng(argc > 1 ? (unsigned)atoi(argv[1]) : 1);
  const long cycles = argc > 2 ? atol(argv[2]) : 100000;
  const uint32_t words = WORDS;  // -D from the build
  std::vector<uint32_t> model(words, 0);
  Vchocolate_spad spad;
  for (uint32_t a = 0; a < words; ++a) {  // a known start
    spad.addr = a, spad.we = 1, spad.wmask = 0xf, spad.wdata = 0;
    spad.clk = 0, spad.eval(), spad.clk = 1, spad.eval();
  }
  for (long t = 0; t < cycles; ++t) {
    const uint32_t addr = rng() % 4 ? rng() % 8 : rng() % words;  // a few words often: reads after writes
    const uint32_t mask = rng() & 0xf, data = (uint32_t)rng();
    const int write = rng() % 2;
    spad.addr = addr, spad.we = write, spad.wmask = mask, spad.wdata = data;
    spad.clk = 0, spad.eval(), spad.clk = 1, spad.eval();
    const uint32_t want = model[addr];  // the word before this cycle's write
    if (spad.rdata != want) return printf("cycle %ld: word %u read %08x, want %08x\n", t, addr, spad.rdata, want), 1;
    if (write) {
      for (int b = 0; b < 4; ++b) {
        if (mask >> b & 1) model[addr] = (model[addr] & ~(0xffu << (8 * b))) | (data & (0xffu << (8 * b)));
      }
    }
  }
  spad.final();
  printf("ok %ld\n", cycles);
  return 0;
}
