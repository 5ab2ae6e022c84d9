/* A plugin whose worker dies of SIGSYS without its reporter's word (issue 41): the manager
 * must name the call from the kernel's record, or say why it cannot.
 * (tests/hostile/silent_sigsys_test.cpp). Strict C99 against <sandpool/plugin.h> only.
 *
 * Types:
 *   ignore_sigsys    sigaction(SIGSYS, SIG_IGN): the filter's guard kills the process on
 *                    the spot (SECCOMP_RET_KILL_PROCESS), which the kernel audits
 *   block_then_trap  blocks SIGSYS on its thread, then calls syscall 999: the filter's trap
 *                    finds the signal blocked and the kernel kills the process instead
 *   echo             result = payload */
#define _GNU_SOURCE
#include <sandpool/plugin.h>

#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static const char* const kTypes[] = {"ignore_sigsys", "block_then_trap", "echo", NULL};
static const sp_host_api* host;

SP_EXPORT uint32_t sp_plugin_abi_version(void) { return SP_PLUGIN_ABI_VERSION; }
SP_EXPORT const char* const* sp_plugin_task_types(void) { return kTypes; }

SP_EXPORT int sp_plugin_init(const sp_host_api* h, const char* config_json, size_t config_len,
                             void** state) {
  (void)config_json;
  (void)config_len;
  host = h;
  *state = NULL;
  return 0;
}

static int is_type(const sp_task* task, const char* name) {
  return task->type_len == strlen(name) && memcmp(task->type, name, task->type_len) == 0;
}

SP_EXPORT int sp_plugin_handle(void* state, const sp_task* task, sp_call* call) {
  (void)state;
  if (is_type(task, "ignore_sigsys")) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_IGN;
    sigaction(SIGSYS, &sa, NULL);
    return SP_OK; /* not reached under a filter */
  }
  if (is_type(task, "block_then_trap")) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGSYS);
    sigprocmask(SIG_BLOCK, &set, NULL);
    syscall(999);
    return SP_OK; /* not reached under a filter */
  }
  return host->write_result(call, task->payload, task->payload_len) == 0 ? SP_OK : SP_FAIL;
}
