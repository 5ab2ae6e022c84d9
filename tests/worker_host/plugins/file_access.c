/* A plugin that touches files, for the privilege and Landlock tests. Its init reads the
 * file named by the config {"init_read": "<path>"} when given (init runs before Landlock)
 * and fails with 4 when it cannot. Task types, the payload being a path:
 *   read   result "read <n> bytes"; on failure SP_FAIL with error "open: errno <n>"
 *   write  opens it O_WRONLY|O_CREAT and writes one byte; result "wrote", or the same error
 *   ids    result "uid=<uid> euid=<euid> gid=<gid>" (the payload is ignored) */
#define _POSIX_C_SOURCE 200809L
#include <sandpool/plugin.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char* const kTypes[] = {"read", "write", "ids", NULL};
static const sp_host_api* g_host;

static int is_type(const sp_task* task, const char* name) {
  return task->type_len == strlen(name) && memcmp(task->type, name, task->type_len) == 0;
}

static int text_result(sp_call* call, const char* text) {
  return g_host->write_result(call, text, strlen(text)) == 0 ? SP_OK : SP_FAIL;
}

static int fail_errno(sp_call* call, int err) {
  char text[64];
  snprintf(text, sizeof text, "open: errno %d", err);
  g_host->set_error(call, text, strlen(text));
  return SP_FAIL;
}

/* Reads the file at path; returns the byte count or -errno. */
static long read_all(const char* path) {
  char buf[256];
  long total = 0;
  ssize_t n;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  while ((n = read(fd, buf, sizeof buf)) > 0) total += n;
  close(fd);
  return total;
}

SP_EXPORT uint32_t sp_plugin_abi_version(void) { return SP_PLUGIN_ABI_VERSION; }
SP_EXPORT const char* const* sp_plugin_task_types(void) { return kTypes; }

SP_EXPORT int sp_plugin_init(const sp_host_api* host, const char* config_json, size_t config_len,
                             void** state) {
  static const char key[] = "\"init_read\": \"";
  const char* start = strstr(config_json, key);
  (void)config_len;
  g_host = host;
  *state = NULL;
  if (start != NULL) {
    char path[512];
    const char* end;
    start += sizeof key - 1;
    end = strchr(start, '"');
    if (end == NULL || (size_t)(end - start) >= sizeof path) return 3;
    memcpy(path, start, (size_t)(end - start));
    path[end - start] = '\0';
    if (read_all(path) < 0) return 4;
  }
  return 0;
}

SP_EXPORT int sp_plugin_handle(void* state, const sp_task* task, sp_call* call) {
  char path[512];
  char text[96];
  (void)state;
  if (is_type(task, "ids")) {
    snprintf(text, sizeof text, "uid=%d euid=%d gid=%d", (int)getuid(), (int)geteuid(),
             (int)getgid());
    return text_result(call, text);
  }
  if (task->payload_len >= sizeof path) return fail_errno(call, ENAMETOOLONG);
  memcpy(path, task->payload, task->payload_len);
  path[task->payload_len] = '\0';
  if (is_type(task, "read")) {
    long n = read_all(path);
    if (n < 0) return fail_errno(call, (int)-n);
    snprintf(text, sizeof text, "read %ld bytes", n);
    return text_result(call, text);
  }
  if (is_type(task, "write")) {
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return fail_errno(call, errno);
    if (write(fd, "x", 1) != 1) {
      close(fd);
      return fail_errno(call, errno);
    }
    close(fd);
    return text_result(call, "wrote");
  }
  return SP_FAIL;
}
