/* The few TVM runtime functions an AOT-generated MLF calls, for hosted builds.
 *
 * With statically planned memory the generated code rarely allocates; when an operator
 * still asks for scratch space it gets it from malloc.  Errors are kept as a message
 * that the application can read back with TVMGetLastError(). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "tvm/runtime/c_backend_api.h"
#include "tvm/runtime/c_runtime_api.h"

static char last_error[256];

void* TVMBackendAllocWorkspace(int device_type, int device_id, uint64_t nbytes, int dtype_code_hint,
                               int dtype_bits_hint) {
  (void)device_type;
  (void)device_id;
  (void)dtype_code_hint;
  (void)dtype_bits_hint;
  return malloc(nbytes ? (size_t)nbytes : 1);
}

int TVMBackendFreeWorkspace(int device_type, int device_id, void* ptr) {
  (void)device_type;
  (void)device_id;
  free(ptr);
  return 0;
}

void TVMAPISetLastError(const char* msg) { snprintf(last_error, sizeof(last_error), "%s", msg); }

const char* TVMGetLastError(void) { return last_error; }
