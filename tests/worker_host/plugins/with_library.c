/* A plugin that links a shared library of its own, libsp_beside.so, installed beside it and
 * found through RUNPATH $ORIGIN: the layout of a plugin shipped with its dependencies. Its
 * one type, "shout", answers with what the library makes of the payload, so a task that
 * completes shows the library was found and its symbol bound. */
#include <sandpool/plugin.h>

#include "beside.h"

static const sp_host_api* host;
static const char* const kTypes[] = {"shout", NULL};

SP_EXPORT uint32_t sp_plugin_abi_version(void) { return SP_PLUGIN_ABI_VERSION; }
SP_EXPORT const char* const* sp_plugin_task_types(void) { return kTypes; }

SP_EXPORT int sp_plugin_init(const sp_host_api* h, const char* config_json, size_t config_len,
                             void** state) {
  (void)config_json;
  (void)config_len;
  host = h;
  *state = NULL;
  return 0;
}

SP_EXPORT int sp_plugin_handle(void* state, const sp_task* task, sp_call* call) {
  char out[256];
  const size_t n = sp_beside_shout((const char*)task->payload, task->payload_len, out, sizeof out);
  (void)state;
  return host->write_result(call, out, n) == 0 ? SP_OK : SP_FAIL;
}
