/* Chocolate's matrix core: acc (+)= a . b over one tile_m x tile_n x tile_k tile, int32 sums
 * wrapping through uint32 as the hardware's adders do. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "chocolate_internal.h"

/* The core's status register and its completion.  Polling (default): the driver spins on the
 * register.  CHOCOLATE_COMPLETION_INTERRUPT: the core raises an interrupt whose handler,
 * registered at power-up, sets a flag the driver sleeps on.  The model's "hardware" runs inside
 * the start, so either wait ends at once; both exist so that both drivers are built and run. */
enum { CORE_IDLE, CORE_BUSY, CORE_DONE };
static volatile int core_status;
static void (*core_irq_handler)(void); /* NULL: the completion interrupt is disabled */
#ifdef CHOCOLATE_COMPLETION_INTERRUPT
static volatile int core_completed;
static void on_core_completion(void) { core_completed = 1; }
#endif

void chocolate_core_power_up(void) {
#ifdef CHOCOLATE_COMPLETION_INTERRUPT
  core_irq_handler = on_core_completion;
#endif
}

void chocolate_core_power_down(void) { core_irq_handler = NULL; }

chocolate_status chocolate_zero(int32_t acc) {
  const region r = accumulator(acc);
  CHECK(chocolate_check_call(__func__, NULL, NULL, NULL, 0, 0, 0, 0));
  CHECK(chocolate_check_inside(__func__, r));
  memset(chocolate_dev.mem + acc, 0, (size_t)r.bytes); /* int32 0 and float +0.0f alike (IEEE 754) */
#ifdef CHOCOLATE_RTL
  chocolate_rtl_zero(acc);
#endif
  chocolate_mark_written(r);
  chocolate_dev.counters.zero_calls += 1;
  return CHOCOLATE_OK;
}

/* The "hardware": acc += a . b over one tile, then DONE in the status register and, if enabled,
 * the completion interrupt. */
static void core_run(int32_t a, int32_t b, int32_t acc) {
  const int64_t tm = chocolate_dev.tile_m, tn = chocolate_dev.tile_n, tk = chocolate_dev.tile_k;
  const unsigned char *pa = chocolate_dev.mem + a, *pb = chocolate_dev.mem + b;
  for (int64_t i = 0; i < tm; ++i) {
    for (int64_t n = 0; n < tn; ++n) {
      unsigned char* pc = chocolate_dev.mem + acc + 4 * (i * tn + n);
      if (chocolate_dev.conf.f32) {
        float s = load_f32(pc);
        for (int64_t k = 0; k < tk; ++k) s += load_f32(pa + 4 * (i * tk + k)) * load_f32(pb + 4 * (k * tn + n));
        store_f32(pc, s);
      } else {
        int64_t dot = 0; /* exact: at most 256 products of at most 2^14 */
        for (int64_t k = 0; k < tk; ++k) dot += load_s8(pa + i * tk + k) * load_s8(pb + k * tn + n);
        store_i32(pc, wrap32((uint32_t)load_i32(pc) + (uint32_t)dot)); /* the running sum wraps: a 32-bit adder */
      }
    }
  }
  core_status = CORE_DONE;
  if (core_irq_handler != NULL) core_irq_handler();
}

chocolate_status chocolate_matmul(int32_t a, int32_t b, int32_t acc) {
  const region ra = operand("a", a, chocolate_dev.tile_m, chocolate_dev.tile_k), rb = operand("b", b, chocolate_dev.tile_k, chocolate_dev.tile_n);
  const region rc = accumulator(acc);
  CHECK(chocolate_check_call(__func__, NULL, NULL, NULL, 0, 0, 0, 0));
  CHECK(chocolate_check_inside(__func__, ra)); CHECK(chocolate_check_inside(__func__, rb)); CHECK(chocolate_check_inside(__func__, rc));
  CHECK(chocolate_check_apart(__func__, rc, ra)); CHECK(chocolate_check_apart(__func__, rc, rb));
  CHECK(chocolate_check_written(__func__, ra)); CHECK(chocolate_check_written(__func__, rb)); CHECK(chocolate_check_written(__func__, rc));

  core_status = CORE_BUSY; /* start */
  core_run(a, b, acc);
#ifdef CHOCOLATE_COMPLETION_INTERRUPT
  while (!core_completed) { /* sleep until the interrupt (wfi on a real chip) */
  }
  core_completed = 0;
#else
  while (core_status != CORE_DONE) { /* poll the status register */
  }
#endif
  core_status = CORE_IDLE;
#ifdef CHOCOLATE_RTL
  chocolate_rtl_matmul(a, b, acc);
#endif
  chocolate_dev.counters.core_calls += 1;
  chocolate_dev.counters.macs_issued += (int64_t)chocolate_dev.tile_m * chocolate_dev.tile_n * chocolate_dev.tile_k;
  chocolate_dev.counters.core_cycles += chocolate_dev.tile_k;
  return CHOCOLATE_OK;
}
