/* The one runtime function the Relax engine's AOT C needs: the message of the last failure.
 *
 * tvmgen_<name>_run returns the status of the first kernel that fails and records which kernel
 * it was; the application reads it back with TVMGetLastError(), as with the Relay engine's MLF. */
static const char* last_error = "";

void TVMAPISetLastError(const char* message) { last_error = message != 0 ? message : ""; }

const char* TVMGetLastError(void) { return last_error; }
