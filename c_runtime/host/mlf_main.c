/* Host program for an AOT-compiled MLF: reads raw input tensors from files, runs the model
 * and writes raw output tensors.
 *
 *   model [-r REPEAT] IN_0 ... IN_n OUT_0 ... OUT_m
 *
 * Compile-time definitions describe the model (tvm_extension.mlf.host passes them):
 *   MLF_HEADER        the interface header, e.g. "tvmgen_default.h"
 *   MLF_PREFIX        the interface prefix, e.g. tvmgen_default
 *   MLF_INPUT_SIZES   comma-separated byte sizes of the inputs, in interface order
 *   MLF_OUTPUT_SIZES  the same for the outputs
 * With -r, the model runs REPEAT times and the time per run is printed on stderr.
 * MLF_PLATFORM, if defined, is a header replacing the host's clock (now_seconds) and adding
 * measurements around the first run (MLF_BEFORE_RUN, MLF_AFTER_RUN): c_runtime/board's. */
#ifndef MLF_PLATFORM
#define _POSIX_C_SOURCE 199309L
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#ifndef MLF_PLATFORM
#include <time.h>
#endif

#include MLF_HEADER

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define INPUTS_T struct CAT(MLF_PREFIX, _inputs)
#define OUTPUTS_T struct CAT(MLF_PREFIX, _outputs)
#define RUN CAT(MLF_PREFIX, _run)

extern const char* TVMGetLastError(void);

static const size_t input_sizes[] = {MLF_INPUT_SIZES};
static const size_t output_sizes[] = {MLF_OUTPUT_SIZES};
#define NUM_INPUTS (sizeof(input_sizes) / sizeof(input_sizes[0]))
#define NUM_OUTPUTS (sizeof(output_sizes) / sizeof(output_sizes[0]))

/* The interface structs hold one void* per tensor, in order. */
typedef char inputs_are_pointers[sizeof(INPUTS_T) == NUM_INPUTS * sizeof(void*) ? 1 : -1];
typedef char outputs_are_pointers[sizeof(OUTPUTS_T) == NUM_OUTPUTS * sizeof(void*) ? 1 : -1];

static void* read_tensor(const char* path, size_t size) {
  void* data = aligned_alloc(64, (size + 63) / 64 * 64);
  if (data == NULL) {
    fprintf(stderr, "error: no memory left for the %lu bytes of %s\n", (unsigned long)size, path);
    exit(1);
  }
  FILE* file = fopen(path, "rb");
  if (file == NULL) {
    fprintf(stderr, "error: cannot read %s\n", path);
    exit(1);
  }
  if (fread(data, 1, size, file) != size || fgetc(file) != EOF) {
    fprintf(stderr, "error: %s does not hold exactly %zu bytes\n", path, size);
    exit(1);
  }
  fclose(file);
  return data;
}

static void write_tensor(const char* path, const void* data, size_t size) {
  FILE* file = fopen(path, "wb");
  if (file == NULL || fwrite(data, 1, size, file) != size || fclose(file) != 0) {
    fprintf(stderr, "error: cannot write %s\n", path);
    exit(1);
  }
}

#ifdef MLF_PLATFORM
#include MLF_PLATFORM
#else
#define MLF_BEFORE_RUN()
#define MLF_AFTER_RUN()
static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
#endif

int main(int argc, char** argv) {
  int first = 1;
  long repeat = 0;
  if (argc > 2 && argv[1][0] == '-' && argv[1][1] == 'r') {
    repeat = strtol(argv[2], NULL, 10);
    first = 3;
  }
  if ((size_t)(argc - first) != NUM_INPUTS + NUM_OUTPUTS) {
    fprintf(stderr, "usage: %s [-r REPEAT] %zu input files then %zu output files\n", argv[0], NUM_INPUTS,
            NUM_OUTPUTS);
    return 1;
  }
  INPUTS_T inputs;
  OUTPUTS_T outputs;
  void** in_slots = (void**)&inputs;
  void** out_slots = (void**)&outputs;
  for (size_t i = 0; i < NUM_INPUTS; ++i) in_slots[i] = read_tensor(argv[first + i], input_sizes[i]);
  for (size_t i = 0; i < NUM_OUTPUTS; ++i) out_slots[i] = aligned_alloc(64, (output_sizes[i] + 63) / 64 * 64);

  int result = 0;
  MLF_BEFORE_RUN();
  int32_t status = RUN(&inputs, &outputs);
  MLF_AFTER_RUN();
  if (status != 0) {
    fprintf(stderr, "error: inference failed with status %d %s\n", (int)status, TVMGetLastError());
    result = 2;
  } else {
    if (repeat > 0) {
      double start = now_seconds();
      for (long r = 0; r < repeat; ++r) RUN(&inputs, &outputs);
      fprintf(stderr, "seconds_per_run: %.9f\n", (now_seconds() - start) / (double)repeat);
    }
    for (size_t i = 0; i < NUM_OUTPUTS; ++i) write_tensor(argv[first + NUM_INPUTS + i], out_slots[i], output_sizes[i]);
  }
  /* freed, so that LeakSanitizer runs of compiled models report only the model's own leaks */
  for (size_t i = 0; i < NUM_INPUTS; ++i) free(in_slots[i]);
  for (size_t i = 0; i < NUM_OUTPUTS; ++i) free(out_slots[i]);
  return result;
}
