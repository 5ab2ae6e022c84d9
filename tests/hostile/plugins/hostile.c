/* The hostile plugin: one task type per attack of the hostile-plugin suite
 * (tests/hostile/, docs/security.md), and "echo", a well-behaved type the suite submits
 * alongside to show the pool keeps serving. Strict C99 against <sandpool/plugin.h> only, as
 * a third party's plugin would be; POSIX and Linux calls are made directly.
 *
 * Types (the payload is the argument, where one is needed):
 *   echo            result = payload
 *   alloc_forever   mallocs and touches 1 MiB blocks until refused, then aborts (as C++'s
 *                   std::bad_alloc would)
 *   reserve_64g     reserves 64 GiB without touching it; result "reserved" or "refused"
 *   fork_bomb       forks until refused (children pause); SP_FAIL "fork refused after N"
 *   thread_bomb     starts sleeping threads until refused; SP_FAIL "threads refused after N"
 *   sleep_forever   sleeps, forever, ignoring cancellation
 *   read_file       result = the first bytes of the file named by the payload
 *   list_fds        result = the open fds from /proc/self/fd, ascending, space-separated
 *   connect         connects to 127.0.0.1:<payload> and writes "stolen"
 *   exec_shell      execve("/bin/sh")
 *   ptrace          PTRACE_ATTACH to pid <payload>
 *   kill            SIGKILL to pid <payload>
 *   raise_rlimits   setrlimit(RLIMIT_AS and RLIMIT_NOFILE, infinity)
 *   syscall_999     syscall(999)
 *   close_channel   closes fds 3 and 4 (the shared region and the doorbell), then echoes
 *   exit_mid_task   exit(0)
 *   stack_overflow  unbounded recursion
 *   abort           abort()
 *   write_file      appends 64 KiB blocks to the file opened in init (see below) for ever
 *   log_flood       <payload> lines through host->log and as many through stdout
 *   write_exec      writes machine code ("return 42") into memory and runs it, two ways: an
 *                   anonymous read-write-execute mapping, and a read-write one made
 *                   read-execute; result "rwx: <ran 42 | strerror>; rw then rx: <...>"
 *
 * Init follows the pool's plugin_config: "init_crash" in it segfaults, "init_hang" sleeps
 * for ever, and "write_path": "<path>" opens that existing file for appending (step 5 runs
 * before seccomp; write_file uses the fd). */
#define _GNU_SOURCE
#include <sandpool/plugin.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

static const char* const kTypes[] = {"echo",           "alloc_forever",
                                     "reserve_64g",    "fork_bomb",
                                     "thread_bomb",    "sleep_forever",
                                     "read_file",      "list_fds",
                                     "connect",        "exec_shell",
                                     "ptrace",         "kill",
                                     "raise_rlimits",  "syscall_999",
                                     "close_channel",  "exit_mid_task",
                                     "stack_overflow", "abort",
                                     "write_file",     "log_flood",
                                     "write_exec",     NULL};

#define MIB (1024UL * 1024UL)
#define BOMB_CAP 4096 /* the bombs stop here on their own if nothing else does */

static const sp_host_api* host;
static int write_fd = -1;

SP_EXPORT uint32_t sp_plugin_abi_version(void) { return SP_PLUGIN_ABI_VERSION; }
SP_EXPORT const char* const* sp_plugin_task_types(void) { return kTypes; }

static void sleep_forever(void) {
  for (;;) {
    struct timespec ts = {3600, 0};
    nanosleep(&ts, NULL);
  }
}

/* Opens the path given as "write_path": "<path>" in the config, if any. */
static int open_write_path(const char* config) {
  static const char key[] = "\"write_path\": \"";
  const char* at = strstr(config, key);
  char path[512];
  size_t n = 0;
  if (at == NULL) return 0;
  at += sizeof key - 1;
  while (at[n] != '\0' && at[n] != '"' && n + 1 < sizeof path) {
    path[n] = at[n];
    ++n;
  }
  path[n] = '\0';
  write_fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
  return write_fd < 0 ? 1 : 0;
}

SP_EXPORT int sp_plugin_init(const sp_host_api* h, const char* config_json, size_t config_len,
                             void** state) {
  (void)config_len;
  host = h;
  *state = NULL;
  if (strstr(config_json, "init_crash") != NULL) {
    volatile int* volatile nowhere = NULL;
    *nowhere = 1;
  }
  if (strstr(config_json, "init_hang") != NULL) sleep_forever();
  return open_write_path(config_json);
}

static int is_type(const sp_task* task, const char* name) {
  return task->type_len == strlen(name) && memcmp(task->type, name, task->type_len) == 0;
}

/* The payload as a NUL-terminated string in buf (cut to fit). */
static const char* payload_str(const sp_task* task, char* buf, size_t size) {
  size_t n = task->payload_len < size - 1 ? task->payload_len : size - 1;
  memcpy(buf, task->payload, n);
  buf[n] = '\0';
  return buf;
}

static long payload_long(const sp_task* task) {
  char buf[32];
  return strtol(payload_str(task, buf, sizeof buf), NULL, 10);
}

static int fail(sp_call* call, const char* msg) {
  host->set_error(call, msg, strlen(msg));
  return SP_FAIL;
}

static int text_result(sp_call* call, const char* text) {
  return host->write_result(call, text, strlen(text)) == 0 ? SP_OK : SP_FAIL;
}

static int alloc_forever(void) {
  for (;;) {
    char* block = (char*)malloc(MIB);
    if (block == NULL) abort();
    memset(block, 0xa5, MIB); /* resident, not only reserved */
  }
}

static int reserve_64g(sp_call* call) {
  const size_t size = (size_t)64 << 30;
  void* p =
      mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return text_result(call, "refused");
  return text_result(call, "reserved"); /* kept (never touched) until the worker goes */
}

static int fork_bomb(sp_call* call) {
  char msg[64];
  int n;
  for (n = 0; n < BOMB_CAP; ++n) {
    pid_t child = fork();
    if (child < 0) break;
    if (child == 0) sleep_forever();
  }
  snprintf(msg, sizeof msg, "fork refused after %d", n);
  return fail(call, msg);
}

static void* thread_sleeps(void* arg) {
  (void)arg;
  sleep_forever();
  return NULL;
}

static int thread_bomb(sp_call* call) {
  char msg[64];
  int n;
  for (n = 0; n < BOMB_CAP; ++n) {
    pthread_t t;
    if (pthread_create(&t, NULL, thread_sleeps, NULL) != 0) break;
  }
  snprintf(msg, sizeof msg, "threads refused after %d", n);
  return fail(call, msg);
}

static int read_file(const sp_task* task, sp_call* call) {
  char path[512], content[256], msg[600];
  ssize_t n;
  int fd = open(payload_str(task, path, sizeof path), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    snprintf(msg, sizeof msg, "open %s: %s", path, strerror(errno));
    return fail(call, msg);
  }
  n = read(fd, content, sizeof content);
  close(fd);
  if (n < 0) return fail(call, "read failed");
  return host->write_result(call, content, (size_t)n) == 0 ? SP_OK : SP_FAIL;
}

static int list_fds(sp_call* call) {
  char text[1024] = "";
  size_t used = 0;
  int fds[256], count = 0, i, j;
  struct dirent* e;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == NULL) return fail(call, "opendir /proc/self/fd failed");
  while ((e = readdir(dir)) != NULL && count < 256) {
    if (e->d_name[0] == '.') continue;
    if (atoi(e->d_name) == dirfd(dir)) continue; /* the listing itself */
    fds[count++] = atoi(e->d_name);
  }
  closedir(dir);
  for (i = 1; i < count; ++i) { /* insertion sort: a handful of fds */
    int v = fds[i];
    for (j = i; j > 0 && fds[j - 1] > v; --j) fds[j] = fds[j - 1];
    fds[j] = v;
  }
  for (i = 0; i < count && used + 16 < sizeof text; ++i) {
    used += (size_t)snprintf(text + used, sizeof text - used, i ? " %d" : "%d", fds[i]);
  }
  return text_result(call, text);
}

static int connect_out(const sp_task* task, sp_call* call) {
  struct sockaddr_in to;
  int s = socket(AF_INET, SOCK_STREAM, 0);
  if (s < 0) return fail(call, "socket refused");
  memset(&to, 0, sizeof to);
  to.sin_family = AF_INET;
  to.sin_port = htons((unsigned short)payload_long(task));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(s, (const struct sockaddr*)&to, sizeof to) != 0) return fail(call, "connect refused");
  if (write(s, "stolen", 6) != 6) return fail(call, "write refused");
  return text_result(call, "connected");
}

static int exec_shell(sp_call* call) {
  char* const argv[] = {(char*)"/bin/sh", (char*)"-c", (char*)"echo escaped", NULL};
  char* const envp[] = {NULL};
  execve("/bin/sh", argv, envp);
  return fail(call, "execve refused");
}

static int raise_rlimits(sp_call* call) {
  struct rlimit inf = {RLIM_INFINITY, RLIM_INFINITY};
  if (setrlimit(RLIMIT_AS, &inf) != 0 || setrlimit(RLIMIT_NOFILE, &inf) != 0) {
    return fail(call, "setrlimit refused");
  }
  return text_result(call, "raised");
}

static int close_channel(const sp_task* task, sp_call* call) {
  close(3);
  close(4);
  return host->write_result(call, task->payload, task->payload_len) == 0 ? SP_OK : SP_FAIL;
}

/* Never reached: the recursion's end the compiler cannot see through. */
static volatile int recursion_end = -1;

/* Not static and not inlined, so the compiler keeps the recursion; the array keeps every
 * frame large. */
SP_EXPORT __attribute__((noinline)) int hostile_recurse(int depth) {
  volatile char frame[4096];
  if (depth == recursion_end) return 0;
  frame[(unsigned)depth % sizeof frame] = (char)depth;
  return hostile_recurse(depth + 1) + frame[0];
}

static int write_file(sp_call* call) {
  static char block[64 * 1024];
  if (write_fd < 0) return fail(call, "no write_path in the plugin config");
  memset(block, 'w', sizeof block);
  for (;;) {
    if (write(write_fd, block, sizeof block) < 0) return fail(call, "write refused");
  }
}

static int log_flood(const sp_task* task, sp_call* call) {
  static const char line[] = "hostile: flooding the log";
  long i, n = payload_long(task);
  for (i = 0; i < n; ++i) {
    host->log(call, 2, line, sizeof line - 1);
    printf("hostile: flooding stdout %ld\n", i);
  }
  fflush(stdout);
  return text_result(call, "flooded");
}

/* "return 42" as machine code of this architecture; 0 bytes where the test does not know it. */
#if defined(__x86_64__)
static const unsigned char kReturn42[] = {0xb8, 42, 0, 0, 0, 0xc3}; /* mov eax, 42; ret */
#elif defined(__aarch64__)
static const unsigned char kReturn42[] = {0x40, 0x05, 0x80, 0x52,  /* mov w0, #42 */
                                          0xc0, 0x03, 0x5f, 0xd6}; /* ret */
#else
static const unsigned char kReturn42[] = {0};
#endif

/* Copies kReturn42 to `code` and calls it; "ran 42" (or what it returned). */
static void run_code(void* code, char* out, size_t out_len) {
  int (*fn)(void);
  memcpy(code, kReturn42, sizeof kReturn42);
  __builtin___clear_cache((char*)code, (char*)code + sizeof kReturn42);
  memcpy(&fn, &code, sizeof fn); /* ISO C has no object-to-function pointer cast */
  snprintf(out, out_len, "ran %d", fn());
}

static int write_exec(sp_call* call) {
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  char rwx[64], rx[64], text[160];
  void* p =
      mmap(NULL, page, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (sizeof kReturn42 < 2) return fail(call, "no machine code for this architecture");
  if (p == MAP_FAILED) {
    snprintf(rwx, sizeof rwx, "%s", strerror(errno));
  } else {
    run_code(p, rwx, sizeof rwx);
    munmap(p, page);
  }
  p = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return fail(call, "mmap read-write refused");
  memcpy(p, kReturn42, sizeof kReturn42);
  if (mprotect(p, page, PROT_READ | PROT_EXEC) != 0) {
    snprintf(rx, sizeof rx, "%s", strerror(errno));
  } else {
    int (*fn)(void);
    memcpy(&fn, &p, sizeof fn);
    snprintf(rx, sizeof rx, "ran %d", fn());
  }
  munmap(p, page);
  snprintf(text, sizeof text, "rwx: %s; rw then rx: %s", rwx, rx);
  return text_result(call, text);
}

SP_EXPORT int sp_plugin_handle(void* state, const sp_task* task, sp_call* call) {
  (void)state;
  if (is_type(task, "echo")) {
    return host->write_result(call, task->payload, task->payload_len) == 0 ? SP_OK : SP_FAIL;
  }
  if (is_type(task, "alloc_forever")) return alloc_forever();
  if (is_type(task, "reserve_64g")) return reserve_64g(call);
  if (is_type(task, "fork_bomb")) return fork_bomb(call);
  if (is_type(task, "thread_bomb")) return thread_bomb(call);
  if (is_type(task, "sleep_forever")) sleep_forever();
  if (is_type(task, "read_file")) return read_file(task, call);
  if (is_type(task, "list_fds")) return list_fds(call);
  if (is_type(task, "connect")) return connect_out(task, call);
  if (is_type(task, "exec_shell")) return exec_shell(call);
  if (is_type(task, "ptrace")) {
    if (ptrace(PTRACE_ATTACH, (pid_t)payload_long(task), NULL, NULL) != 0) {
      return fail(call, "ptrace refused");
    }
    return text_result(call, "attached");
  }
  if (is_type(task, "kill")) {
    if (kill((pid_t)payload_long(task), SIGKILL) != 0) return fail(call, "kill refused");
    return text_result(call, "killed");
  }
  if (is_type(task, "raise_rlimits")) return raise_rlimits(call);
  if (is_type(task, "syscall_999")) {
    if (syscall(999) < 0) return fail(call, "syscall 999 refused");
    return text_result(call, "syscall 999 returned");
  }
  if (is_type(task, "close_channel")) return close_channel(task, call);
  if (is_type(task, "exit_mid_task")) exit(0);
  if (is_type(task, "stack_overflow")) return hostile_recurse(0);
  if (is_type(task, "abort")) abort();
  if (is_type(task, "write_file")) return write_file(call);
  if (is_type(task, "log_flood")) return log_flood(task, call);
  if (is_type(task, "write_exec")) return write_exec(call);
  return fail(call, "unknown task type");
}
