/* fail: every task fails permanently (SP_FAIL). The error is the payload when there is
 * one, else a fixed message. */
#include "example_plugin.h"

static const char* const kTypes[] = {"fail", NULL};

SP_EXPORT uint32_t sp_plugin_abi_version(void) { return SP_PLUGIN_ABI_VERSION; }

SP_EXPORT int sp_plugin_init(const sp_host_api* host, const char* config_json, size_t config_len,
                             void** state) {
  (void)config_json;
  (void)config_len;
  return example_init(host, state);
}

SP_EXPORT int sp_plugin_handle(void* state, const sp_task* task, sp_call* call) {
  if (task->payload_len > 0) {
    example_host(state)->set_error(call, (const char*)task->payload, task->payload_len);
    return SP_FAIL;
  }
  return example_fail(state, call, SP_FAIL, "fail: this task always fails");
}

SP_EXPORT void sp_plugin_shutdown(void* state) { free(state); }

SP_EXPORT const char* const* sp_plugin_task_types(void) { return kTypes; }
