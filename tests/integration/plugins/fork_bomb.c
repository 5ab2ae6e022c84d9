/* A hostile test plugin: forks until the kernel refuses, with the raw fork syscall (a pool
 * allows it with `allow_syscalls: [fork]`). Every child parks on a futex forever; the parent
 * reports "forked N: <errno name>" when fork fails. Only pids.max stops it as root. */
#define _GNU_SOURCE
#include <sandpool/plugin.h>

#include <errno.h>
#include <linux/futex.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static const char* const kTypes[] = {"fork_bomb", NULL};
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

/* The child: raw syscalls only (its libc state is a copy it must not trust). */
static void park_forever(void) {
  static int never = 0;
  for (;;) syscall(SYS_futex, &never, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
}

SP_EXPORT int sp_plugin_handle(void* state, const sp_task* task, sp_call* call) {
  char text[96];
  long forked = 0;
  int err = 0;
  (void)state;
  (void)task;
  for (forked = 0; forked < 100000; ++forked) {
    long pid = syscall(SYS_fork);
    if (pid == 0) park_forever();
    if (pid < 0) {
      err = errno;
      break;
    }
  }
  snprintf(text, sizeof text, "forked %ld: %s", forked, err ? strerrorname_np(err) : "none");
  return host->write_result(call, text, strlen(text)) == 0 ? SP_OK : SP_FAIL;
}
