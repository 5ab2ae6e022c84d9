/* upper: the result is the payload with ASCII letters upper-cased (other bytes unchanged). */
#include "example_plugin.h"

static const char* const kTypes[] = {"upper", NULL};

SP_EXPORT uint32_t sp_plugin_abi_version(void) { return SP_PLUGIN_ABI_VERSION; }

SP_EXPORT int sp_plugin_init(const sp_host_api* host, const char* config_json, size_t config_len,
                             void** state) {
  (void)config_json;
  (void)config_len;
  return example_init(host, state);
}

SP_EXPORT int sp_plugin_handle(void* state, const sp_task* task, sp_call* call) {
  unsigned char chunk[4096];
  size_t done = 0;
  while (done < task->payload_len) {
    size_t n = task->payload_len - done;
    size_t i;
    if (n > sizeof chunk) n = sizeof chunk;
    for (i = 0; i < n; ++i) {
      unsigned char c = task->payload[done + i];
      chunk[i] = (unsigned char)(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
    }
    if (example_host(state)->write_result(call, chunk, n) != 0) {
      return example_fail(state, call, SP_FAIL, "upper: payload exceeds max_result");
    }
    done += n;
  }
  return SP_OK;
}

SP_EXPORT void sp_plugin_shutdown(void* state) { free(state); }

SP_EXPORT const char* const* sp_plugin_task_types(void) { return kTypes; }
