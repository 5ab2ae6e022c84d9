/* The hostile plugin whose attack is its init (tests/hostile/init_escape_test.cpp,
 * docs/security.md): what sp_plugin_init starts, before the sandbox closes, that would go on
 * running outside it once the worker is ready. Strict C99 against <sandpool/plugin.h>.
 *
 * Init follows the pool's plugin_config (each key optional):
 *   "init_fork": "<path>"   forks a helper that waits until the worker is ready (its count
 *                           of seccomp filters grows), then creates <path>
 *   "init_exec": "<path>"   execs /bin/sh to create <path>
 *   "init_thread": true     starts a thread that waits for orders (thread_open, below)
 *   "init_deaf_thread": true  starts a thread that blocks every signal and sleeps
 *   "init_rwx": true        maps a page read-write-execute and keeps it (a JIT's code cache)
 * and records what became of each attempt ("fork: child 123", "fork: refused (...)", ...).
 *
 * Types:
 *   echo         result = payload
 *   init_report  result = what init recorded, one line per attempt
 *   thread_open  the thread init started performs the payload and answers:
 *                "read:<path>"   "opened: <first bytes>" or "refused: <strerror>"
 *                "create:<path>" "created" or "refused: <strerror>" */
#define _GNU_SOURCE
#include <sandpool/plugin.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

static const char* const kTypes[] = {"echo", "init_report", "thread_open", NULL};

static const sp_host_api* host;
static char report[1024];

SP_EXPORT uint32_t sp_plugin_abi_version(void) { return SP_PLUGIN_ABI_VERSION; }
SP_EXPORT const char* const* sp_plugin_task_types(void) { return kTypes; }

static void note(const char* line) {
  size_t used = strlen(report);
  snprintf(report + used, sizeof report - used, "%s%s", used ? "\n" : "", line);
}

static void pause_ms(long ms) {
  struct timespec ts;
  ts.tv_sec = ms / 1000;
  ts.tv_nsec = (ms % 1000) * 1000000L;
  nanosleep(&ts, NULL);
}

/* The value of "key": "<string>" in the config, into out; 0 when absent. */
static int config_string(const char* config, const char* key, char* out, size_t size) {
  char pattern[64];
  const char* at;
  size_t n = 0;
  snprintf(pattern, sizeof pattern, "\"%s\": \"", key);
  at = strstr(config, pattern);
  if (at == NULL) return 0;
  at += strlen(pattern);
  while (at[n] != '\0' && at[n] != '"' && n + 1 < size) {
    out[n] = at[n];
    ++n;
  }
  out[n] = '\0';
  return 1;
}

/* "Seccomp_filters:" of /proc/<pid>/status: how many filters the process has, -1 if gone. */
static int seccomp_filters_of(pid_t pid) {
  char path[64], line[256];
  int filters = -1;
  FILE* f;
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  f = fopen(path, "r");
  if (f == NULL) return -1;
  while (fgets(line, sizeof line, f) != NULL) {
    if (strncmp(line, "Seccomp_filters:", 16) == 0) filters = atoi(line + 16);
  }
  fclose(f);
  return filters;
}

/* The helper: waits (at most 30 s) until the worker has one more seccomp filter than at the
 * fork (step 7: the worker is ready, init long over), then creates the file. Where init's
 * Landlock hides the worker's /proc/<pid>/status, it waits 2 s instead, as long as the worker
 * is its parent. */
static void helper(const char* path, pid_t worker) {
  const int at_fork = seccomp_filters_of(worker);
  int i, fd;
  for (i = 0; i < 3000; ++i) {
    const int now = seccomp_filters_of(worker);
    if (getppid() != worker) _exit(3); /* the worker is gone: too late */
    if (at_fork >= 0 && now < 0) _exit(3);
    if (at_fork >= 0 && now > at_fork) break;
    if (at_fork < 0 && i == 200) break;
    pause_ms(10);
  }
  fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd >= 0) {
    if (write(fd, "escaped\n", 8) != 8) _exit(2);
    close(fd);
  }
  _exit(fd >= 0 ? 0 : 1);
}

static void init_fork(const char* path) {
  char line[128];
  const pid_t worker = getpid();
  const pid_t child = fork();
  if (child == 0) helper(path, worker);
  if (child < 0) {
    snprintf(line, sizeof line, "fork: refused (%s)", strerror(errno));
  } else {
    snprintf(line, sizeof line, "fork: child %d", (int)child);
  }
  note(line);
}

static void init_exec(const char* path) {
  char command[600], line[128];
  char* argv[4];
  char* envp[] = {NULL};
  snprintf(command, sizeof command, "echo escaped > '%s'", path);
  argv[0] = (char*)"sh";
  argv[1] = (char*)"-c";
  argv[2] = command;
  argv[3] = NULL;
  execve("/bin/sh", argv, envp);
  snprintf(line, sizeof line, "exec: refused (%s)", strerror(errno));
  note(line);
}

/* The thread init leaves running, and its orders. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static char order[512];
static char answer[512];
static int has_order, has_answer;

static void carry_out(const char* what, char* out, size_t size) {
  int fd;
  if (strncmp(what, "read:", 5) == 0) {
    char content[256];
    ssize_t n;
    fd = open(what + 5, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      snprintf(out, size, "refused: %s", strerror(errno));
      return;
    }
    n = read(fd, content, sizeof content - 1);
    close(fd);
    content[n > 0 ? n : 0] = '\0';
    snprintf(out, size, "opened: %s", content);
  } else if (strncmp(what, "create:", 7) == 0) {
    fd = open(what + 7, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
      snprintf(out, size, "refused: %s", strerror(errno));
      return;
    }
    close(fd);
    snprintf(out, size, "created");
  } else {
    snprintf(out, size, "unknown order");
  }
}

static void* obedient_thread(void* arg) {
  char mine[512], result[512];
  (void)arg;
  for (;;) {
    pthread_mutex_lock(&lock);
    while (!has_order) pthread_cond_wait(&changed, &lock);
    memcpy(mine, order, sizeof mine);
    has_order = 0;
    pthread_mutex_unlock(&lock);
    carry_out(mine, result, sizeof result);
    pthread_mutex_lock(&lock);
    memcpy(answer, result, sizeof answer);
    has_answer = 1;
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
  }
  return NULL;
}

/* Started with every signal blocked (see sp_plugin_init), so from its first instruction. */
static void* deaf_thread(void* arg) {
  (void)arg;
  for (;;) pause_ms(3600 * 1000L);
  return NULL;
}

static void start_thread(void* (*body)(void*), const char* name) {
  pthread_t t;
  char line[128];
  const int rc = pthread_create(&t, NULL, body, NULL);
  snprintf(line, sizeof line, "%s: %s", name, rc == 0 ? "started" : strerror(rc));
  note(line);
}

SP_EXPORT int sp_plugin_init(const sp_host_api* h, const char* config_json, size_t config_len,
                             void** state) {
  char path[512];
  (void)config_len;
  host = h;
  *state = NULL;
  if (config_string(config_json, "init_fork", path, sizeof path)) init_fork(path);
  if (config_string(config_json, "init_exec", path, sizeof path)) init_exec(path);
  if (strstr(config_json, "\"init_thread\": true") != NULL) start_thread(obedient_thread, "thread");
  if (strstr(config_json, "\"init_rwx\": true") != NULL) {
    const void* p =
        mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    note(p == MAP_FAILED ? "rwx: refused" : "rwx: mapped");
  }
  if (strstr(config_json, "\"init_deaf_thread\": true") != NULL) {
    sigset_t all, before;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &before); /* the new thread inherits the mask */
    start_thread(deaf_thread, "deaf thread");
    pthread_sigmask(SIG_SETMASK, &before, NULL);
  }
  return 0;
}

static int is_type(const sp_task* task, const char* name) {
  return task->type_len == strlen(name) && memcmp(task->type, name, task->type_len) == 0;
}

static int text_result(sp_call* call, const char* text) {
  return host->write_result(call, text, strlen(text)) == 0 ? SP_OK : SP_FAIL;
}

static int thread_open(const sp_task* task, sp_call* call) {
  char reply[512];
  size_t n = task->payload_len < sizeof order - 1 ? task->payload_len : sizeof order - 1;
  pthread_mutex_lock(&lock);
  memcpy(order, task->payload, n);
  order[n] = '\0';
  has_order = 1;
  has_answer = 0;
  pthread_cond_broadcast(&changed);
  while (!has_answer) pthread_cond_wait(&changed, &lock);
  memcpy(reply, answer, sizeof reply);
  pthread_mutex_unlock(&lock);
  return text_result(call, reply);
}

SP_EXPORT int sp_plugin_handle(void* state, const sp_task* task, sp_call* call) {
  (void)state;
  if (is_type(task, "echo")) {
    return host->write_result(call, task->payload, task->payload_len) == 0 ? SP_OK : SP_FAIL;
  }
  if (is_type(task, "init_report")) return text_result(call, report);
  if (is_type(task, "thread_open")) return thread_open(task, call);
  host->set_error(call, "unknown task type", 17);
  return SP_FAIL;
}
