/* SysTick against a known number of instructions: prints "board: ticks N instructions M" for
 * a loop of M instructions (two per iteration), as tvm_extension.mlf.board's calibration test reads. */
#include <stdio.h>

#include "board.h"

int main(void) {
  const unsigned iterations = 5000000u;
  unsigned n = iterations;
  uint64_t before = board_ticks();
  __asm__ volatile("1: subs %0, %0, #1\n bne 1b" : "+r"(n) : : "cc");
  uint64_t ticks = board_ticks() - before;
  printf("board: ticks %llu instructions %u\n", (unsigned long long)ticks, 2u * iterations);
  return 0;
}
