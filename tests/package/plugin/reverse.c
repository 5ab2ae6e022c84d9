/* reverse: the result is the payload's bytes in reverse order. A third-party plugin: it
 * includes nothing of sandpool's but the installed <sandpool/plugin.h>. */
#include <sandpool/plugin.h>

#include <stddef.h>

static const char* const kTypes[] = {"reverse", NULL};
static const sp_host_api* g_host;

SP_EXPORT uint32_t sp_plugin_abi_version(void) { return SP_PLUGIN_ABI_VERSION; }

SP_EXPORT int sp_plugin_init(const sp_host_api* host, const char* config_json, size_t config_len,
                             void** state) {
  (void)config_json;
  (void)config_len;
  if (host == NULL || host->abi_version != SP_PLUGIN_ABI_VERSION) return 1;
  g_host = host;
  *state = NULL;
  return 0;
}

SP_EXPORT int sp_plugin_handle(void* state, const sp_task* task, sp_call* call) {
  unsigned char chunk[4096];
  size_t done = 0;
  (void)state;
  while (done < task->payload_len) {
    size_t n = task->payload_len - done;
    size_t i;
    if (n > sizeof chunk) n = sizeof chunk;
    for (i = 0; i < n; ++i) chunk[i] = task->payload[task->payload_len - 1 - done - i];
    if (g_host->write_result(call, chunk, n) != 0) {
      static const char msg[] = "reverse: payload exceeds max_result";
      g_host->set_error(call, msg, sizeof msg - 1);
      return SP_FAIL;
    }
    done += n;
  }
  return SP_OK;
}

SP_EXPORT const char* const* sp_plugin_task_types(void) { return kTypes; }
