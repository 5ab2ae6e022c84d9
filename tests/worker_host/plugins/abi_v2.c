/* A plugin built for a future ABI version 2: the loader must refuse it, saying both numbers. */
#include <sandpool/plugin.h>

SP_EXPORT uint32_t sp_plugin_abi_version(void) { return 2u; }

SP_EXPORT int sp_plugin_init(const sp_host_api* host, const char* config_json, size_t config_len,
                             void** state) {
  (void)host;
  (void)config_json;
  (void)config_len;
  *state = NULL;
  return 0;
}

SP_EXPORT int sp_plugin_handle(void* state, const sp_task* task, sp_call* call) {
  (void)state;
  (void)task;
  (void)call;
  return SP_OK;
}
