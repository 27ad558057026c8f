/* Start-up code for the Arm MPS2/MPS3 boards QEMU emulates (no vendor SDK): the vector table,
 * a reset handler that sets up C memory and the FPU, the semihosting command line as argc/argv,
 * and SysTick as an instruction counter (see board.h).
 *
 * Memory comes from the linker script (link.ld with the board's memory map): .data is copied
 * from its load address, .bss cleared; the stack is the top STACK_SIZE bytes of RAM, the heap
 * what lies between .bss and the stack. */
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "board.h"

extern uint32_t __data_load[], __data_start[], __data_end[], __bss_start__[], __bss_end__[];
extern uint32_t __stack_top[], __stack_bottom[], end[];
extern int main(int argc, char** argv);
extern void initialise_monitor_handles(void); /* newlib's semihosting (librdimon) */

#define SCB_CPACR (*(volatile uint32_t*)0xE000ED88u)
#define SCB_CCR (*(volatile uint32_t*)0xE000ED14u)
#define SYST_CSR (*(volatile uint32_t*)0xE000E010u)
#define SYST_RVR (*(volatile uint32_t*)0xE000E014u)
#define SYST_CVR (*(volatile uint32_t*)0xE000E018u)
#define SYST_RELOAD 0xFFFFFFu

static volatile uint32_t systick_wraps;

/* ARM semihosting call (the BKPT 0xAB convention of M-profile cores). */
static int semihost(int reason, void* argument) {
  register int r0 __asm__("r0") = reason;
  register void* r1 __asm__("r1") = argument;
  __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
  return r0;
}

/* The command line QEMU passes (-semihosting-config ...,arg=...), split at spaces. */
#define MAX_ARGS 32
static char command_line[1024];
static char* arguments[MAX_ARGS + 1];

static int read_arguments(void) {
  struct { char* buffer; int size; } block = {command_line, (int)sizeof(command_line)};
  int argc = 0;
  if (semihost(0x15 /* SYS_GET_CMDLINE */, &block) != 0) return 0;
  for (char* p = command_line; *p != '\0' && argc < MAX_ARGS;) {
    while (*p == ' ') *p++ = '\0';
    if (*p == '\0') break;
    arguments[argc++] = p;
    while (*p != '\0' && *p != ' ') ++p;
  }
  arguments[argc] = NULL;
  return argc;
}

/* A fault ends the run with a message instead of a hang: where (the stacked pc) and why (the
 * configurable fault status register: 0x01000000 an unaligned access, 0x02000000 a division by zero). */
__attribute__((used)) static void fault_report(const uint32_t* frame) {
  fprintf(stderr, "error: the board stopped on a processor fault (hard fault) at pc 0x%08lx (lr 0x%08lx), cfsr 0x%08lx\n",
          (unsigned long)frame[6], (unsigned long)frame[5], (unsigned long)*(volatile uint32_t*)0xE000ED28u);
  exit(3);
}

__attribute__((naked)) static void fault(void) {
  __asm__ volatile("mrs r0, msp\n b fault_report"); /* the exception frame: r0-r3, r12, lr, pc, xpsr */
}

static void systick(void) { ++systick_wraps; }

void reset(void) {
  memcpy(__data_start, __data_load, (size_t)((char*)__data_end - (char*)__data_start));
  memset(__bss_start__, 0, (size_t)((char*)__bss_end__ - (char*)__bss_start__));
#if defined(__ARM_FP) || defined(__ARM_FEATURE_MVE)
  SCB_CPACR |= 0xFu << 20; /* CP10 and CP11: the FPU (and MVE) */
  __asm__ volatile("dsb\n isb" ::: "memory");
#endif
#if defined(BOARD_TRAP_UNALIGNED) /* as parts that fault on unaligned loads (build with -mno-unaligned-access) */
  SCB_CCR |= 1u << 3;   /* UNALIGN_TRP */
  __asm__ volatile("dsb\n isb" ::: "memory");
#endif
  SYST_RVR = SYST_RELOAD;
  SYST_CVR = 0;
  SYST_CSR = 7; /* enabled, processor clock, interrupt on wrap */
  initialise_monitor_handles();
  int argc = read_arguments();
  exit(main(argc, arguments));
}

#if defined(BOARD_TRAP_UNALIGNED)
/* This newlib's memcpy (built for cores that allow unaligned words) loads words at any alignment:
 * on a part that traps them, a byte-wise one (volatile: gcc would make the loop a memcpy call). */
void* memcpy(void* restrict dst, const void* restrict src, size_t n) {
  volatile unsigned char* d = dst;
  const volatile unsigned char* s = src;
  for (size_t i = 0; i < n; ++i) d[i] = s[i];
  return dst;
}
#endif

uint64_t board_ticks(void) {
  uint32_t wraps, value;
  do { /* a wrap between the two reads: read again */
    wraps = systick_wraps;
    value = SYST_CVR;
  } while (wraps != systick_wraps);
  return (uint64_t)wraps * (SYST_RELOAD + 1u) + (SYST_RELOAD - value);
}

/* Heap for newlib's malloc: between the end of .bss and the stack, never into it. */
static char* heap_end = (char*)end;

uintptr_t board_heap_used(void) { return (uintptr_t)(heap_end - (char*)end); }

void* _sbrk(ptrdiff_t increment) {
  if (increment > (char*)__stack_bottom - heap_end) return (void*)-1;
  char* previous = heap_end;
  heap_end += increment;
  return previous;
}

/* newlib's aligned_alloc (the harness's) calls it, and this newlib has none. */
int posix_memalign(void** memory, size_t alignment, size_t size) {
  *memory = memalign(alignment, size);
  return *memory == NULL ? ENOMEM : 0;
}

/* No crti.o (linked with -nostartfiles): newlib's exit() calls _fini; C needs nothing there. */
void _init(void) {}
void _fini(void) {}

typedef void (*handler)(void);
__attribute__((section(".vectors"), used)) static const handler vectors[16] = {
    (handler)(uintptr_t)__stack_top, reset, fault /* NMI */, fault /* hard fault */,
    fault, fault, fault, fault, 0, 0, 0, 0, 0, 0, 0, systick,
};
