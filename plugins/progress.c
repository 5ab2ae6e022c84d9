/* progress: payload = decimal N. Reports N progress steps "1/N" ... "N/N", then the result
 * "done". Stops early (SP_FAIL, "cancelled") when the task is cancelled. */
#include <stdio.h>

#include "example_plugin.h"

static const char* const kTypes[] = {"progress", NULL};

#define MAX_STEPS 1000000ULL

SP_EXPORT uint32_t sp_plugin_abi_version(void) { return SP_PLUGIN_ABI_VERSION; }

SP_EXPORT int sp_plugin_init(const sp_host_api* host, const char* config_json, size_t config_len,
                             void** state) {
  (void)config_json;
  (void)config_len;
  return example_init(host, state);
}

SP_EXPORT int sp_plugin_handle(void* state, const sp_task* task, sp_call* call) {
  const sp_host_api* host = example_host(state);
  unsigned long long n, i;
  if (example_parse_decimal(task, MAX_STEPS, &n) != 0) {
    return example_fail(state, call, SP_FAIL, "progress: payload must be a decimal step count");
  }
  for (i = 1; i <= n; ++i) {
    char step[48];
    int len = snprintf(step, sizeof step, "%llu/%llu", i, n);
    if (host->cancelled(call)) return example_fail(state, call, SP_FAIL, "cancelled");
    host->progress(call, step, (size_t)len);
  }
  return example_result(state, call, "done");
}

SP_EXPORT void sp_plugin_shutdown(void* state) { free(state); }

SP_EXPORT const char* const* sp_plugin_task_types(void) { return kTypes; }
