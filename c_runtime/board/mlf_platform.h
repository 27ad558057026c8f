/* The board side of c_runtime/host/mlf_main.c (included as its MLF_PLATFORM): around the first
 * run of the model, SysTick ticks (instructions under QEMU's -icount) and the peak stack depth,
 * measured by painting the free stack with a pattern and finding the deepest word overwritten, and
 * the heap the run took (scratch the generated code asks TVMBackendAllocWorkspace for, e.g. a
 * kernel's buffer).  Printed on stdout as "board: ticks N stack BYTES heap BYTES" for
 * tvm_extension.mlf.board. */
#include <stdint.h>
#include <stdio.h>

#include "board.h"

extern uint32_t __stack_bottom[];

#define PAINT 0xC5A3E1F7u
static uintptr_t painted_top; /* the stack pointer when the model was called, about */
static uint64_t ticks_before;
static uintptr_t heap_before;

static inline uintptr_t stack_pointer(void) {
  uintptr_t sp;
  __asm__ volatile("mov %0, sp" : "=r"(sp));
  return sp;
}

static __attribute__((noinline)) void board_before_run(void) {
  painted_top = stack_pointer() - 64; /* below this function's own frame */
  for (uint32_t* p = __stack_bottom; (uintptr_t)p < painted_top; ++p) *p = PAINT;
  heap_before = board_heap_used();
  ticks_before = board_ticks();
}

static __attribute__((noinline)) void board_after_run(void) {
  uint64_t ticks = board_ticks() - ticks_before;
  uint32_t* p = __stack_bottom;
  while ((uintptr_t)p < painted_top && *p == PAINT) ++p;
  /* 64 bytes were left unpainted: they count as used (the call's return address, at least) */
  printf("board: ticks %llu stack %lu heap %lu\n", (unsigned long long)ticks,
         (unsigned long)(painted_top + 64 - (uintptr_t)p), (unsigned long)(board_heap_used() - heap_before));
  if (p == __stack_bottom) printf("board: stack overflow\n");
}

#define MLF_BEFORE_RUN() board_before_run()
#define MLF_AFTER_RUN() board_after_run()

/* Not called: tvm_extension.mlf.board passes no -r (it counts instructions instead). */
static double now_seconds(void) { return 0.0; }
