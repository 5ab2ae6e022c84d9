/* A test plugin that looks at where it runs from inside sp_plugin_init, before any task: it
 * keeps /proc/self/cgroup and /proc/self/oom_score_adj as they were at init and returns
 * them for every task. Proves the manager placed the worker before plugin code ran. */
#define _GNU_SOURCE
#include <sandpool/plugin.h>

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

static const char* const kTypes[] = {"cgroup_probe", NULL};
static const sp_host_api* host;
static char seen[8192];
static size_t seen_len;

SP_EXPORT uint32_t sp_plugin_abi_version(void) { return SP_PLUGIN_ABI_VERSION; }
SP_EXPORT const char* const* sp_plugin_task_types(void) { return kTypes; }

/* Appends the file's text to seen. */
static void append(const char* path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  ssize_t n;
  if (fd < 0) return;
  while (seen_len < sizeof seen && (n = read(fd, seen + seen_len, sizeof seen - seen_len)) > 0) {
    seen_len += (size_t)n;
  }
  close(fd);
}

SP_EXPORT int sp_plugin_init(const sp_host_api* h, const char* config_json, size_t config_len,
                             void** state) {
  static const char label[] = "oom_score_adj ";
  (void)config_json;
  (void)config_len;
  host = h;
  *state = NULL;
  append("/proc/self/cgroup");
  if (seen_len + sizeof label < sizeof seen) {
    memcpy(seen + seen_len, label, sizeof label - 1);
    seen_len += sizeof label - 1;
  }
  append("/proc/self/oom_score_adj");
  return seen_len == 0;
}

SP_EXPORT int sp_plugin_handle(void* state, const sp_task* task, sp_call* call) {
  (void)state;
  (void)task;
  return host->write_result(call, seen, seen_len) == 0 ? SP_OK : SP_FAIL;
}
