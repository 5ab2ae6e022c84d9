/* A test plugin that serves two task types, "alpha" and "beta": each answers its payload with
 * the type in front ("alpha:x"). With {"init": "fail"} in its plugin_config its init fails, so
 * a reload can give a pool a config that cannot start. The config is matched as poold passes
 * it (compact JSON) or spaced. */
#include <sandpool/plugin.h>

#include <stdio.h>
#include <string.h>

static const char* const kTypes[] = {"alpha", "beta", NULL};
static const sp_host_api* host;

SP_EXPORT uint32_t sp_plugin_abi_version(void) { return SP_PLUGIN_ABI_VERSION; }
SP_EXPORT const char* const* sp_plugin_task_types(void) { return kTypes; }

SP_EXPORT int sp_plugin_init(const sp_host_api* h, const char* config_json, size_t config_len,
                             void** state) {
  (void)config_len;
  host = h;
  *state = NULL;
  if (strstr(config_json, "\"init\":\"fail\"") != NULL ||
      strstr(config_json, "\"init\": \"fail\"") != NULL) {
    return 3;
  }
  return 0;
}

SP_EXPORT int sp_plugin_handle(void* state, const sp_task* task, sp_call* call) {
  char out[256];
  const int n = snprintf(
      out, sizeof out, "%.*s:%.*s", (int)(task->type_len < 32 ? task->type_len : 32), task->type,
      (int)(task->payload_len < 200 ? task->payload_len : 200), (const char*)task->payload);
  (void)state;
  return host->write_result(call, out, (size_t)n) == 0 ? SP_OK : SP_FAIL;
}
