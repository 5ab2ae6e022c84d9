/* A plugin whose handle creates a socket: forbidden by every seccomp profile unless the
 * pool allows "socket". When allowed, the result is "socket allowed". */
#define _POSIX_C_SOURCE 200809L
#include <sandpool/plugin.h>

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

static const sp_host_api* g_host;

SP_EXPORT uint32_t sp_plugin_abi_version(void) { return SP_PLUGIN_ABI_VERSION; }

SP_EXPORT int sp_plugin_init(const sp_host_api* host, const char* config_json, size_t config_len,
                             void** state) {
  (void)config_json;
  (void)config_len;
  g_host = host;
  *state = NULL;
  return 0;
}

SP_EXPORT int sp_plugin_handle(void* state, const sp_task* task, sp_call* call) {
  static const char ok[] = "socket allowed";
  static const char failed[] = "socket() failed";
  (void)state;
  (void)task;
  /* The fd is left open on purpose: close() is not in the strict profile either. */
  if (socket(AF_INET, SOCK_STREAM, 0) < 0) {
    g_host->set_error(call, failed, strlen(failed));
    return SP_FAIL;
  }
  g_host->write_result(call, ok, strlen(ok));
  return SP_OK;
}
