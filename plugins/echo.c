/* echo: the result is the payload. */
#include "example_plugin.h"

static const char* const kTypes[] = {"echo", NULL};

SP_EXPORT uint32_t sp_plugin_abi_version(void) { return SP_PLUGIN_ABI_VERSION; }

SP_EXPORT int sp_plugin_init(const sp_host_api* host, const char* config_json, size_t config_len,
                             void** state) {
  (void)config_json;
  (void)config_len;
  return example_init(host, state);
}

SP_EXPORT int sp_plugin_handle(void* state, const sp_task* task, sp_call* call) {
  if (example_host(state)->write_result(call, task->payload, task->payload_len) != 0) {
    return example_fail(state, call, SP_FAIL, "echo: payload exceeds max_result");
  }
  return SP_OK;
}

SP_EXPORT void sp_plugin_shutdown(void* state) { free(state); }

SP_EXPORT const char* const* sp_plugin_task_types(void) { return kTypes; }
