/* crash: every task dies of SIGSEGV, writing through a NULL pointer. */
#include "example_plugin.h"

static const char* const kTypes[] = {"crash", NULL};

SP_EXPORT uint32_t sp_plugin_abi_version(void) { return SP_PLUGIN_ABI_VERSION; }

SP_EXPORT int sp_plugin_init(const sp_host_api* host, const char* config_json, size_t config_len,
                             void** state) {
  (void)config_json;
  (void)config_len;
  return example_init(host, state);
}

SP_EXPORT int sp_plugin_handle(void* state, const sp_task* task, sp_call* call) {
  /* Both volatile: the pointer, so the compiler cannot see that it is NULL and turn the
   * store into a trap instruction (SIGILL); the pointee, so the store is not dropped as
   * dead (it is never read back). */
  volatile int* volatile target = NULL;
  (void)state;
  (void)task;
  (void)call;
  *target = 42;
  return SP_OK;
}

SP_EXPORT void sp_plugin_shutdown(void* state) { free(state); }

SP_EXPORT const char* const* sp_plugin_task_types(void) { return kTypes; }
