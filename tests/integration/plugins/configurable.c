/* A test plugin whose behaviour comes from its plugin_config: with {"fail": true} every task
 * fails permanently, otherwise it echoes. Lets a test dead-letter a task in one pool and
 * replay it successfully in another. A payload starting with "crash" segfaults the worker.
 * {"hang_shutdown": true}: sp_plugin_shutdown never returns (a worker that ignores Stop).
 * {"fail_init_if": "/path"}: init fails while that file exists (replacements that cannot
 * start, after a first worker that could).
 * A payload "hold" runs its first attempt until the task is cancelled (SP_FAIL "cancelled")
 * or its worker dies, beating meanwhile; a later attempt echoes it. A test ends such a task
 * when it chooses (a kill, a cancel), never by how long it ran. */
#define _POSIX_C_SOURCE 200809L
#include <sandpool/plugin.h>

#include <string.h>
#include <time.h>
#include <unistd.h>

static const char* const kTypes[] = {"configurable", NULL};
static const sp_host_api* host;
static int fail_all;
static int hang_shutdown;

SP_EXPORT uint32_t sp_plugin_abi_version(void) { return SP_PLUGIN_ABI_VERSION; }
SP_EXPORT const char* const* sp_plugin_task_types(void) { return kTypes; }

SP_EXPORT int sp_plugin_init(const sp_host_api* h, const char* config_json, size_t config_len,
                             void** state) {
  (void)config_len;
  host = h;
  *state = NULL;
  fail_all = strstr(config_json, "\"fail\": true") != NULL;
  hang_shutdown = strstr(config_json, "\"hang_shutdown\": true") != NULL;
  {
    static const char key[] = "\"fail_init_if\": \"";
    const char* at = strstr(config_json, key);
    if (at != NULL) {
      char path[256];
      size_t n = 0;
      at += sizeof key - 1;
      while (at[n] != '\0' && at[n] != '"' && n < sizeof path - 1) {
        path[n] = at[n];
        ++n;
      }
      path[n] = '\0';
      if (access(path, F_OK) == 0) return 7;
    }
  }
  return 0;
}

SP_EXPORT int sp_plugin_handle(void* state, const sp_task* task, sp_call* call) {
  static const char msg[] = "configured to fail";
  (void)state;
  if (task->payload_len >= 5 && memcmp(task->payload, "crash", 5) == 0) {
    volatile int* nowhere = NULL;
    *nowhere = 1;
  }
  if (task->payload_len == 4 && memcmp(task->payload, "hold", 4) == 0 && task->attempt <= 1) {
    static const char cancelled[] = "cancelled";
    const struct timespec step = {0, 10 * 1000 * 1000}; /* 10 ms */
    while (!host->cancelled(call)) {
      host->heartbeat(call);
      nanosleep(&step, NULL);
    }
    host->set_error(call, cancelled, sizeof cancelled - 1);
    return SP_FAIL;
  }
  if (fail_all) {
    host->set_error(call, msg, sizeof msg - 1);
    return SP_FAIL;
  }
  return host->write_result(call, task->payload, task->payload_len) == 0 ? SP_OK : SP_FAIL;
}
