/* flaky: the first attempt of every task asks for a retry (SP_RETRY with an error); any
 * later attempt succeeds with "ok on attempt N". */
#include <stdio.h>

#include "example_plugin.h"

static const char* const kTypes[] = {"flaky", NULL};

SP_EXPORT uint32_t sp_plugin_abi_version(void) { return SP_PLUGIN_ABI_VERSION; }

SP_EXPORT int sp_plugin_init(const sp_host_api* host, const char* config_json, size_t config_len,
                             void** state) {
  (void)config_json;
  (void)config_len;
  return example_init(host, state);
}

SP_EXPORT int sp_plugin_handle(void* state, const sp_task* task, sp_call* call) {
  char text[64];
  if (task->attempt <= 1) {
    return example_fail(state, call, SP_RETRY, "flaky: attempt 1 fails on purpose");
  }
  snprintf(text, sizeof text, "ok on attempt %u", (unsigned)task->attempt);
  return example_result(state, call, text);
}

SP_EXPORT void sp_plugin_shutdown(void* state) { free(state); }

SP_EXPORT const char* const* sp_plugin_task_types(void) { return kTypes; }
