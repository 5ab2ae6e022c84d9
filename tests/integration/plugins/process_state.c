/* A test plugin that reports the process state its worker runs it in, one "key=value" line
 * each, for the task type "state":
 *   cwd=<getcwd()>
 *   umask=<octal, 4 digits>
 *   stdin=<"chr M:N" for a character device, else "other">, eof=<1 iff read(0) returns 0>
 *   core=<soft>/<hard> of RLIMIT_CORE ("inf" for unlimited)
 *   env=<every NAME=value of environ, in order, joined by '|'>
 * It calls getcwd, umask, prlimit64 (getrlimit) and read: a pool that runs it allows those. */
#define _GNU_SOURCE
#include <sandpool/plugin.h>

#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

extern char** environ;

static const char* const kTypes[] = {"state", NULL};
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

static void limit_text(rlim_t v, char* out, size_t cap) {
  if (v == RLIM_INFINITY) {
    snprintf(out, cap, "inf");
  } else {
    snprintf(out, cap, "%llu", (unsigned long long)v);
  }
}

SP_EXPORT int sp_plugin_handle(void* state, const sp_task* task, sp_call* call) {
  static char out[16384];
  char cwd[512], soft[32], hard[32], stdin_text[64], byte;
  struct stat st;
  struct rlimit core;
  mode_t mask;
  size_t len = 0;
  char** e;
  (void)state;
  (void)task;

  if (getcwd(cwd, sizeof cwd) == NULL) snprintf(cwd, sizeof cwd, "error");
  mask = umask(0);
  umask(mask);
  if (fstat(0, &st) == 0 && S_ISCHR(st.st_mode)) {
    snprintf(stdin_text, sizeof stdin_text, "chr %u:%u", major(st.st_rdev), minor(st.st_rdev));
  } else {
    snprintf(stdin_text, sizeof stdin_text, "other");
  }
  if (getrlimit(RLIMIT_CORE, &core) != 0) core.rlim_cur = core.rlim_max = 12345;
  limit_text(core.rlim_cur, soft, sizeof soft);
  limit_text(core.rlim_max, hard, sizeof hard);

  len += (size_t)snprintf(out + len, sizeof out - len,
                          "cwd=%s\numask=%04o\nstdin=%s\neof=%d\ncore=%s/%s\nenv=", cwd,
                          (unsigned)mask, stdin_text, (int)(read(0, &byte, 1) == 0), soft, hard);
  for (e = environ; e != NULL && *e != NULL && len < sizeof out - 1; ++e) {
    len += (size_t)snprintf(out + len, sizeof out - len, "%s%s", e == environ ? "" : "|", *e);
  }
  if (len > sizeof out - 1) len = sizeof out - 1;
  return host->write_result(call, out, len) == 0 ? SP_OK : SP_FAIL;
}
