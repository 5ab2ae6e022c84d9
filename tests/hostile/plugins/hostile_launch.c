/* Hostile plugin against the launch: the doorbell the worker shares with the manager, and
 * the secrets a worker could find in its own or its parent's environment and command line
 * (tests/hostile/launch_test.cpp, docs/security.md). Strict C99 against <sandpool/plugin.h>
 * only, as a third party's plugin would be; POSIX and Linux calls are made directly.
 *
 * Init follows the pool's plugin_config:
 *   "doorbell_thieves": N   clears O_NONBLOCK on fd 4 (the doorbell) and starts N threads
 *                           parked in read() on it: with a shared eventfd, each steals the
 *                           count the manager's epoll saw. Under strict (no read after
 *                           seccomp) each steals once and then sleeps; otherwise they loop.
 *   "strict": true          the thieves read once (strict forbids read() after init)
 *   "reread": true          "secrets" reads the /proc files again inside the sandbox
 *                           (relaxed lets a plugin open files)
 * Init always reads /proc/self/{environ,cmdline} and its parent's (after the privilege
 * drop, before Landlock and seccomp) for the "secrets" task.
 *
 * Types:
 *   echo       result = payload
 *   doorbell   <payload> times (1 when empty): waits 2 ms (the manager is asleep by then)
 *              and rings fd 4 with an eventfd's 8-byte increment; then waits 20 ms
 *              (whatever stole the last ring has, and the manager no longer sleeps, so the
 *              result rings nothing) and answers "rang"
 *   secrets    the payload is space-separated needles; for each place the worker could read
 *              (its initial stack's argv and environment strings, read in place; the files
 *              read in init; with "reread", the same files read again now) one line
 *              "<place>: clean", "<place>: unreadable" or "<place>: FOUND <needle>" */
#define _GNU_SOURCE
#include <sandpool/plugin.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define DOORBELL_FD 4
#define MAX_THIEVES 16
#define CAPTURE_BYTES 65536
#define RESULT_BYTES 4096

static const char* const kTypes[] = {"echo", "doorbell", "secrets", NULL};

static const sp_host_api* host;
static int strict_thieves; /* 1: read once, then sleep (strict has no read after init) */
static int reread;         /* 1: "secrets" reads the /proc files again (relaxed) */

/* What a /proc file held when init read it, or -1 bytes when it could not be read. */
typedef struct capture {
  const char* place;
  char path[64];
  char bytes[CAPTURE_BYTES];
  long len;
} capture;

static capture captures[4];

SP_EXPORT uint32_t sp_plugin_abi_version(void) { return SP_PLUGIN_ABI_VERSION; }
SP_EXPORT const char* const* sp_plugin_task_types(void) { return kTypes; }

static void sleep_ms(long ms) {
  struct timespec ts;
  ts.tv_sec = ms / 1000;
  ts.tv_nsec = (ms % 1000) * 1000000L;
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* Each thief's tid, published before it blocks in read(); init waits until every one of
 * them sleeps there, so none calls read() for the first time after the seccomp filter. */
static volatile pid_t thief_tids[MAX_THIEVES];

static void* thief(void* arg) {
  unsigned char buf[8];
  const long slot = (long)arg;
  __atomic_store_n(&thief_tids[slot], (pid_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
  for (;;) {
    const ssize_t n = read(DOORBELL_FD, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (strict_thieves || n <= 0) break;
  }
  for (;;) sleep_ms(3600 * 1000);
  return NULL;
}

/* The number after "doorbell_thieves": in the config, 0 when absent. */
static int thieves_wanted(const char* config) {
  const char* at = strstr(config, "\"doorbell_thieves\":");
  int n;
  if (at == NULL) return 0;
  n = atoi(at + strlen("\"doorbell_thieves\":"));
  return n < 0 ? 0 : (n > MAX_THIEVES ? MAX_THIEVES : n);
}

/* True once /proc/self/task/<tid>/stat says the thread sleeps ('S'): after publishing its
 * tid a thief makes no other call that can sleep but read(). */
static int sleeping(pid_t tid) {
  char path[64], stat[512];
  const char* close_paren;
  ssize_t n;
  int fd;
  snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  n = read(fd, stat, sizeof stat - 1);
  close(fd);
  if (n <= 0) return 0;
  stat[n] = '\0';
  close_paren = strrchr(stat, ')');
  return close_paren != NULL && close_paren[1] == ' ' && close_paren[2] == 'S';
}

/* Waits (at most 10 s) until every thief is asleep in read(). Returns 0 on success. */
static int wait_for_thieves(int thieves) {
  int i, rounds;
  for (i = 0; i < thieves; ++i) {
    for (rounds = 0; rounds < 10000; ++rounds) {
      const pid_t tid = __atomic_load_n(&thief_tids[i], __ATOMIC_ACQUIRE);
      if (tid != 0 && sleeping(tid)) break;
      sleep_ms(1);
    }
    if (rounds == 10000) return 1;
  }
  return 0;
}

static void read_capture(capture* c) {
  const int fd = open(c->path, O_RDONLY | O_CLOEXEC);
  c->len = -1;
  if (fd < 0) return;
  c->len = 0;
  while (c->len < CAPTURE_BYTES) {
    const ssize_t n = read(fd, c->bytes + c->len, (size_t)(CAPTURE_BYTES - c->len));
    if (n <= 0) break;
    c->len += n;
  }
  close(fd);
}

static void set_capture(capture* c, const char* place, const char* path) {
  c->place = place;
  snprintf(c->path, sizeof c->path, "%s", path);
  read_capture(c);
}

SP_EXPORT int sp_plugin_init(const sp_host_api* h, const char* config_json, size_t config_len,
                             void** state) {
  char parent[64];
  int i, thieves;
  (void)config_len;
  host = h;
  *state = NULL;
  snprintf(parent, sizeof parent, "/proc/%d", (int)getppid());
  set_capture(&captures[0], "init /proc/self/environ", "/proc/self/environ");
  set_capture(&captures[1], "init /proc/self/cmdline", "/proc/self/cmdline");
  strcat(parent, "/environ");
  set_capture(&captures[2], "init parent environ", parent);
  snprintf(parent, sizeof parent, "/proc/%d/cmdline", (int)getppid());
  set_capture(&captures[3], "init parent cmdline", parent);

  reread = strstr(config_json, "\"reread\"") != NULL;
  thieves = thieves_wanted(config_json);
  if (thieves > 0) {
    const int flags = fcntl(DOORBELL_FD, F_GETFL);
    if (flags < 0 || fcntl(DOORBELL_FD, F_SETFL, flags & ~O_NONBLOCK) != 0) return 1;
    strict_thieves = strstr(config_json, "\"strict\"") != NULL;
    for (i = 0; i < thieves; ++i) {
      pthread_t t;
      if (pthread_create(&t, NULL, thief, (void*)(long)i) != 0) return 2;
      pthread_detach(t);
    }
    if (wait_for_thieves(thieves) != 0) return 3;
  }
  return 0;
}

static int is_type(const sp_task* task, const char* name) {
  return task->type_len == strlen(name) && memcmp(task->type, name, task->type_len) == 0;
}

/* Appends "<place>: clean|unreadable|FOUND <needle>\n" for the bytes [at, at + len). */
static void report(char* out, const char* place, const char* at, long len, const sp_task* task) {
  char needles[512];
  char* save = NULL;
  char* needle;
  size_t used = strlen(out);
  const size_t n = task->payload_len < sizeof needles - 1 ? task->payload_len : sizeof needles - 1;
  if (len < 0) {
    snprintf(out + used, RESULT_BYTES - used, "%s: unreadable\n", place);
    return;
  }
  memcpy(needles, task->payload, n);
  needles[n] = '\0';
  for (needle = strtok_r(needles, " ", &save); needle != NULL;
       needle = strtok_r(NULL, " ", &save)) {
    if (memmem(at, (size_t)len, needle, strlen(needle)) != NULL) {
      used = strlen(out);
      snprintf(out + used, RESULT_BYTES - used, "%s: FOUND %s\n", place, needle);
      return;
    }
  }
  used = strlen(out);
  snprintf(out + used, RESULT_BYTES - used, "%s: clean\n", place);
}

/* The strings exec put on the initial stack, argv[0] up to the end of AT_EXECFN's string:
 * every argument and environment string the worker host was started with, whatever
 * clearenv() did to the pointers since. Plain memory reads: no syscall. */
static void report_stack(char* out, const sp_task* task) {
  const char* first = program_invocation_name;
  const char* execfn = (const char*)getauxval(AT_EXECFN);
  if (first == NULL || execfn == NULL || execfn < first) {
    report(out, "initial stack strings", NULL, -1, task);
    return;
  }
  report(out, "initial stack strings", first, (long)(execfn + strlen(execfn) - first), task);
}

static int secrets(const sp_task* task, sp_call* call) {
  static char out[RESULT_BYTES];
  int i;
  out[0] = '\0';
  report_stack(out, task);
  for (i = 0; i < 4; ++i) report(out, captures[i].place, captures[i].bytes, captures[i].len, task);
  if (reread) {
    /* Again now, inside the sandbox (relaxed lets a plugin open files). */
    for (i = 0; i < 4; ++i) {
      capture now = captures[i];
      char place[64];
      read_capture(&now);
      snprintf(place, sizeof place, "now%s", captures[i].place + 4);
      report(out, place, now.bytes, now.len, task);
    }
  }
  return host->write_result(call, out, strlen(out)) == 0 ? SP_OK : SP_FAIL;
}

static int doorbell(const sp_task* task, sp_call* call) {
  const unsigned long long one = 1;
  char count[16] = {0};
  int rings, i;
  memcpy(count, task->payload, task->payload_len < sizeof count - 1 ? task->payload_len : 15);
  rings = atoi(count) > 0 ? atoi(count) : 1;
  for (i = 0; i < rings; ++i) {
    sleep_ms(2);
    if (write(DOORBELL_FD, &one, sizeof one) < 0) return SP_FAIL;
  }
  sleep_ms(20);
  return host->write_result(call, "rang", 4) == 0 ? SP_OK : SP_FAIL;
}

SP_EXPORT int sp_plugin_handle(void* state, const sp_task* task, sp_call* call) {
  (void)state;
  if (is_type(task, "echo")) {
    return host->write_result(call, task->payload, task->payload_len) == 0 ? SP_OK : SP_FAIL;
  }
  if (is_type(task, "doorbell")) return doorbell(task, call);
  if (is_type(task, "secrets")) return secrets(task, call);
  host->set_error(call, "unknown task type", 17);
  return SP_FAIL;
}
