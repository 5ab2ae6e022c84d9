/* A plugin that writes its result in 1 KiB pieces until write_result refuses (past
 * max_result), then returns SP_OK anyway: the host must still fail the attempt with
 * kResultTooLarge. Gives up after 64 MiB if nothing refuses. */
#include <sandpool/plugin.h>

#include <string.h>

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
  char piece[1024];
  unsigned i;
  (void)state;
  (void)task;
  memset(piece, 'x', sizeof piece);
  for (i = 0; i < 64u * 1024u; ++i) {
    if (g_host->write_result(call, piece, sizeof piece) != 0) break;
  }
  return SP_OK;
}
