// The C model's hooks into the RTL (the model built with -DCHOCOLATE_RTL, linked with the Verilated
// chocolate_top.v of the same tile sizes and scratchpad): every scratchpad byte the model writes is
// written into the RTL's scratchpad through its host port, and every core call (ZERO, int8 MATMUL,
// int8 STORE) runs on the RTL, clock by clock, its result compared with the model's, word for word
// and output for output.  A difference ends the program with one line (exit status 70); float
// layers stay on the model (the core is int8).  The report gains the RTL's calls and cycles; with
// CHOCOLATE_RTL_LAYERS set to a path, each layer's core calls, RTL cycles and the model's estimate
// of its core cycles (TILE_K a call) are written there at exit, one CSV line a layer.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "Vchocolate_top.h"
#include "verilated.h"
extern "C" {
#include "chocolate_internal.h"
}

namespace {
// Word i of a port, whatever Verilator made of its width (32 bits, 64, or wider: VlWide)
template <typename Wide> uint32_t word(const Wide& port, int i) { return port[i]; }
uint32_t word(uint32_t port, int) { return port; }
uint32_t word(uint64_t port, int i) { return (uint32_t)(port >> (32 * i)); }
template <typename Wide> void set_word(Wide& port, int i, uint32_t v) { port[i] = v; }
void set_word(uint64_t& port, int i, uint32_t v) {
  port = (port & ~(0xffffffffULL << (32 * i))) | (uint64_t)v << (32 * i);
}

Vchocolate_top* top;
long long cycles, command_cycles[3], commands[3], float_calls;
struct Layer {
  long long matmuls, rtl_cycles;
};
std::vector<Layer> layers;  // chocolate_begin calls, in order
enum { ZERO = 0, MATMUL = 1, STORE = 2 };
const char* const NAMES[] = {"zero", "matmul", "store"};

void tick() {
  top->clk = 0;
  top->eval();
  top->clk = 1;
  top->eval();
  ++cycles;
}

[[noreturn]] void differ(const char* what, long long call, long long at, long long rtl, long long model) {
  fprintf(stderr, "chocolate rtl: %s call %lld: %s %lld: the RTL gives %lld, the C model %lld\n", NAMES[call >> 32],
          call & 0xffffffffLL, what, at, rtl, model);
  exit(70);
}

void run(int op, int32_t a, int32_t b, int32_t acc) {
  top->op = (uint8_t)op, top->a_addr = (uint32_t)a, top->b_addr = (uint32_t)b, top->acc_addr = (uint32_t)acc;
  top->start = 1;
  tick();
  top->start = 0;
  const long long begin = cycles;
  while (top->busy) tick();
  command_cycles[op] += cycles - begin;
  commands[op] += 1;
  if (!layers.empty()) {
    layers.back().rtl_cycles += cycles - begin;
    layers.back().matmuls += op == MATMUL;
  }
}

void write_layers() {
  const char* path = getenv("CHOCOLATE_RTL_LAYERS");
  FILE* out = path != nullptr && path[0] != '\0' ? fopen(path, "w") : nullptr;
  if (out == nullptr) return;
  fprintf(out, "layer,core_calls,rtl_cycles,model_core_cycles\n");
  for (size_t i = 0; i < layers.size(); ++i) {
    fprintf(out, "%zu,%lld,%lld,%lld\n", i, layers[i].matmuls, layers[i].rtl_cycles, layers[i].matmuls * TILE_K);
  }
  fclose(out);
}

uint32_t read_word(int64_t addr) {
  top->host_addr = (uint32_t)(addr / 4), top->host_we = 0;
  tick();
  return top->host_rdata;
}

void compare_words(int op, int32_t addr, int64_t bytes) {  // the RTL's scratchpad against the model's
  for (int64_t w = addr; w < addr + bytes; w += 4) {
    uint32_t model;
    memcpy(&model, chocolate_dev.mem + w, 4);
    const uint32_t rtl = read_word(w);
    if (rtl != model) differ("accumulator word at", (long long)op << 32 | commands[op], w, (int32_t)rtl, (int32_t)model);
  }
}
}  // namespace

extern "C" void chocolate_rtl_power_up(void) {
  if (chocolate_dev.tile_m != TILE_M || chocolate_dev.tile_n != TILE_N || chocolate_dev.tile_k != TILE_K ||
      chocolate_dev.spad_bytes != SPAD_BYTES) {
    fprintf(stderr, "chocolate rtl: the code was compiled for %dx%dx%d tiles and a %d-byte scratchpad, the RTL was "
            "built for %dx%dx%d and %d\n", (int)chocolate_dev.tile_m, (int)chocolate_dev.tile_n,
            (int)chocolate_dev.tile_k, (int)chocolate_dev.spad_bytes, TILE_M, TILE_N, TILE_K, SPAD_BYTES);
    exit(70);
  }
  if (top == nullptr) {
    top = new Vchocolate_top;
    atexit(write_layers);
  }
  top->rst = 1;
  tick();
  top->rst = 0;
}

// [addr, addr + bytes) of the model's scratchpad into the RTL's, whole words
extern "C" void chocolate_rtl_layer(void) { layers.push_back(Layer{0, 0}); }

extern "C" void chocolate_rtl_write(int64_t addr, int64_t bytes) {
  for (int64_t w = addr & ~(int64_t)3; w < addr + bytes; w += 4) {
    uint32_t word;
    memcpy(&word, chocolate_dev.mem + w, 4);
    top->host_addr = (uint32_t)(w / 4), top->host_we = 1, top->host_wmask = 0xf, top->host_wdata = word;
    tick();
  }
  top->host_we = 0;
}

extern "C" void chocolate_rtl_zero(int32_t acc) {
  run(ZERO, 0, 0, acc);
  compare_words(ZERO, acc, 4LL * TILE_M * TILE_N);
}

extern "C" void chocolate_rtl_matmul(int32_t a, int32_t b, int32_t acc) {
  if (chocolate_dev.conf.f32) {  // the RTL's core is int8: a float layer's tiles stay on the model
    ++float_calls;
    return;
  }
  run(MATMUL, a, b, acc);
  compare_words(MATMUL, acc, 4LL * TILE_M * TILE_N);
}

// the int8 store of the tile (m0, n0) through the RTL's output stage, against what the model wrote
extern "C" void chocolate_rtl_store(int32_t acc, int32_t m0, int32_t n0, const int8_t* output) {
  const layer* c = &chocolate_dev.conf;
  for (int j = 0; j < TILE_N; ++j) {  // the configuration registers of the tile's channels
    const int inside = n0 + j < c->channels;
    set_word(top->bias, j, inside ? (uint32_t)c->table[n0 + j] : 0u);
    set_word(top->multiplier, j, inside ? (uint32_t)c->table[c->channels + n0 + j] : 0u);
    set_word(top->shift, j, inside ? (uint32_t)c->table[2 * c->channels + n0 + j] : 0u);
  }
  top->output_zp = (uint8_t)c->output_zp, top->act_min = (uint8_t)c->act_min, top->act_max = (uint8_t)c->act_max;
  run(STORE, 0, 0, acc);
  for (int i = 0; i < TILE_M && m0 + i < c->rows; ++i) {
    for (int j = 0; j < TILE_N && n0 + j < c->channels; ++j) {
      const int e = i * TILE_N + j;
      const int8_t rtl = (int8_t)(word(top->out_tile, e / 4) >> (8 * (e % 4)));
      const int64_t at = (int64_t)(m0 + i) * c->channels + n0 + j;
      if (rtl != output[at]) differ("output", (long long)STORE << 32 | commands[STORE], at, rtl, output[at]);
    }
  }
}

extern "C" void chocolate_rtl_report(FILE* out) {
  for (int op = 0; op < 3; ++op) {
    fprintf(out, "chocolate.rtl_%s_calls: %lld\nchocolate.rtl_%s_cycles: %lld\n", NAMES[op], commands[op], NAMES[op],
            command_cycles[op]);
  }
  fprintf(out, "chocolate.rtl_float_calls_on_the_model: %lld\n", float_calls);
}
