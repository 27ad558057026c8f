/* What the start-up code (startup.c) offers a program on an emulated Arm board. */
#ifndef BOARD_H_
#define BOARD_H_
#include <stdint.h>

/* SysTick ticks since reset (24-bit counter plus counted wraps). Under QEMU's -icount shift=0
 * one tick is a fixed number of instructions per board (its processor clock: 25 MHz on MPS2,
 * i.e. 40 instructions), which tvm_extension.mlf.board calibrates and applies. */
uint64_t board_ticks(void);

/* Bytes of heap taken from the system so far (malloc's high-water mark: the heap only grows). */
uintptr_t board_heap_used(void);

#endif
