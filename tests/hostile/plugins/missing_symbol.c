/* A plugin that calls a function no library provides: built as a MODULE, the link leaves the
 * symbol undefined, and the loader's dlopen(RTLD_NOW) must refuse the .so naming it, before
 * any of the plugin's code runs. */
#include <sandpool/plugin.h>

extern int sp_hostile_no_such_function(void);

SP_EXPORT uint32_t sp_plugin_abi_version(void) { return SP_PLUGIN_ABI_VERSION; }

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
  return sp_hostile_no_such_function();
}
