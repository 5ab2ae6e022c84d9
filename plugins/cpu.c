/* cpu: payload = decimal milliseconds of CPU time to burn (CLOCK_THREAD_CPUTIME_ID), so a
 * busy machine stretches the wall time but not the work. Checks cancellation as it goes. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <time.h>

#include "example_plugin.h"

static const char* const kTypes[] = {"cpu", NULL};

#define MAX_MS (3600ULL * 1000ULL) /* one hour */

static long long cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

SP_EXPORT uint32_t sp_plugin_abi_version(void) { return SP_PLUGIN_ABI_VERSION; }

SP_EXPORT int sp_plugin_init(const sp_host_api* host, const char* config_json, size_t config_len,
                             void** state) {
  (void)config_json;
  (void)config_len;
  return example_init(host, state);
}

SP_EXPORT int sp_plugin_handle(void* state, const sp_task* task, sp_call* call) {
  const sp_host_api* host = example_host(state);
  unsigned long long ms;
  long long end;
  volatile unsigned long long sink = 0;
  unsigned long turns = 0;
  char text[64];
  if (example_parse_decimal(task, MAX_MS, &ms) != 0) {
    return example_fail(state, call, SP_FAIL, "cpu: payload must be decimal milliseconds");
  }
  end = cpu_ns() + (long long)ms * 1000000LL;
  while (cpu_ns() < end) {
    unsigned i;
    /* ~10 us of work between clock reads: the thread CPU clock is a real syscall. */
    for (i = 0; i < 20000; ++i) sink += i;
    if (host->cancelled(call)) return example_fail(state, call, SP_FAIL, "cancelled");
    if (++turns % 100 == 0) host->heartbeat(call);
  }
  snprintf(text, sizeof text, "burned %llu ms of CPU", ms);
  return example_result(state, call, text);
}

SP_EXPORT void sp_plugin_shutdown(void* state) { free(state); }

SP_EXPORT const char* const* sp_plugin_task_types(void) { return kTypes; }
