/* A plugin whose init fails with 7 after explaining why through host->log(NULL, 3, ...). */
#include <sandpool/plugin.h>

#include <string.h>

SP_EXPORT uint32_t sp_plugin_abi_version(void) { return SP_PLUGIN_ABI_VERSION; }

SP_EXPORT int sp_plugin_init(const sp_host_api* host, const char* config_json, size_t config_len,
                             void** state) {
  static const char why[] = "init_fails: refusing to start: no model configured";
  (void)config_json;
  (void)config_len;
  *state = NULL;
  host->log(NULL, 3, why, strlen(why));
  return 7;
}

SP_EXPORT int sp_plugin_handle(void* state, const sp_task* task, sp_call* call) {
  (void)state;
  (void)task;
  (void)call;
  return SP_OK;
}
