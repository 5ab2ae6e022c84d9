/* A test plugin that talks: printf and fprintf(stderr) lines, and host->log() at every level,
 * so the tests can check that all of it reaches the manager's log. */
#include <sandpool/plugin.h>

#include <stdio.h>
#include <string.h>

static const char* const kTypes[] = {"chatty", NULL};
static const sp_host_api* host;

SP_EXPORT uint32_t sp_plugin_abi_version(void) { return SP_PLUGIN_ABI_VERSION; }
SP_EXPORT const char* const* sp_plugin_task_types(void) { return kTypes; }

SP_EXPORT int sp_plugin_init(const sp_host_api* h, const char* config_json, size_t config_len,
                             void** state) {
  static const char hello[] = "chatty: init says hello";
  (void)config_json;
  (void)config_len;
  host = h;
  *state = NULL;
  host->log(NULL, 1, hello, sizeof hello - 1);
  return 0;
}

SP_EXPORT int sp_plugin_handle(void* state, const sp_task* task, sp_call* call) {
  static const char warn[] = "chatty: a warning from handle";
  (void)state;
  printf("chatty stdout: %.*s\n", (int)task->payload_len, (const char*)task->payload);
  fflush(stdout);
  fprintf(stderr, "chatty stderr: task %llu\n", (unsigned long long)task->id);
  host->log(call, 2, warn, sizeof warn - 1);
  return SP_OK;
}
