/* A careless plugin: allocates 1 MiB blocks until malloc fails, then, depending on the
 * payload, writes through the NULL it got ("segv") or gives up with abort() ("abort"),
 * as a plugin that does not check its allocations, or C++ code meeting std::bad_alloc,
 * would. Any other payload crashes the same way without exhausting anything first. */
#include <sandpool/plugin.h>

#include <stdlib.h>
#include <string.h>

static const char* const kTypes[] = {"exhaust", "crash", NULL};

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

static int payload_is(const sp_task* task, const char* word) {
  return task->payload_len == strlen(word) && memcmp(task->payload, word, task->payload_len) == 0;
}

SP_EXPORT int sp_plugin_handle(void* state, const sp_task* task, sp_call* call) {
  volatile char* volatile block = NULL;
  (void)state;
  (void)call;
  if (task->type_len == strlen("exhaust") && memcmp(task->type, "exhaust", task->type_len) == 0) {
    /* Leaked on purpose: the worker is about to die. */
    while ((block = (volatile char*)malloc(1024 * 1024)) != NULL) block[0] = 1;
  }
  if (payload_is(task, "abort")) abort();
  block[0] = 1; /* NULL: SIGSEGV */
  return SP_OK;
}
