/* A hostile plugin for the tests: spins forever, never beats, never looks at cancelled().
 * The spinning function is exported (default visibility) and never inlined, so a hung-task
 * backtrace can name it through dladdr. */
#include <sandpool/plugin.h>

static const char* const kTypes[] = {"hang", NULL};

SP_EXPORT uint32_t sp_plugin_abi_version(void) { return SP_PLUGIN_ABI_VERSION; }
SP_EXPORT const char* const* sp_plugin_task_types(void) { return kTypes; }

SP_EXPORT int sp_plugin_init(const sp_host_api* host, const char* config_json, size_t config_len,
                             void** state) {
  (void)host;
  (void)config_json;
  (void)config_len;
  *state = NULL;
  return 0;
}

SP_EXPORT __attribute__((noinline)) void hang_spin_forever(void) {
  volatile unsigned long spins = 0;
  for (;;) spins++;
}

SP_EXPORT int sp_plugin_handle(void* state, const sp_task* task, sp_call* call) {
  (void)state;
  (void)task;
  (void)call;
  hang_spin_forever();
  return SP_OK;
}
