/* A test plugin that reports what the worker sees of the system, for the namespace tests.
 * The payload is a command and an optional argument; the result is its answer as text:
 *   echo X        X
 *   pid           getpid()
 *   procs         the numeric entries of /proc, comma-separated
 *   ifaces        the interfaces in /proc/net/dev, comma-separated
 *   connect PORT  "connected", or "error:<errno>" for a TCP connect to 127.0.0.1:PORT
 *   read PATH     "read:<first bytes>" or "error:<errno>"
 *   ls PATH       the entries of a directory, comma-separated, or "error:<errno>"
 *   write PATH    "wrote" after creating PATH, or "error:<errno>"
 *   fstype PATH   "tmpfs" or "other:<f_type>"
 *   hostname      gethostname()
 *   ids           "<uid> <gid>"
 *   fork          forks a child that sleeps forever; answers "forked"
 *   hang          never returns
 *   abort         abort() */
#define _GNU_SOURCE
#include <sandpool/plugin.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/vfs.h>
#include <unistd.h>

#define TMPFS_MAGIC_VALUE 0x01021994

static const char* const kTypes[] = {"probe", NULL};
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

static void append(char* out, size_t cap, const char* item) {
  size_t len = strlen(out);
  snprintf(out + len, cap - len, "%s%s", len ? "," : "", item);
}

static void list_dir(const char* path, int numeric_only, char* out, size_t cap) {
  DIR* d = opendir(path);
  struct dirent* e;
  if (d == NULL) {
    snprintf(out, cap, "error:%d", errno);
    return;
  }
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    if (numeric_only && (e->d_name[0] < '0' || e->d_name[0] > '9')) continue;
    append(out, cap, e->d_name);
  }
  closedir(d);
}

static void list_ifaces(char* out, size_t cap) {
  char line[512];
  FILE* f = fopen("/proc/net/dev", "r");
  if (f == NULL) {
    snprintf(out, cap, "error:%d", errno);
    return;
  }
  while (fgets(line, sizeof line, f) != NULL) {
    char* colon = strchr(line, ':');
    char* name = line;
    if (colon == NULL) continue; /* the two header lines */
    *colon = '\0';
    while (*name == ' ') ++name;
    append(out, cap, name);
  }
  fclose(f);
}

static void try_connect(const char* port, char* out, size_t cap) {
  struct sockaddr_in addr;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) {
    snprintf(out, cap, "error:%d", errno);
    return;
  }
  memset(&addr, 0, sizeof addr);
  addr.sin_family = AF_INET;
  addr.sin_port = htons((uint16_t)atoi(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr*)&addr, sizeof addr) == 0) {
    snprintf(out, cap, "connected");
  } else {
    snprintf(out, cap, "error:%d", errno);
  }
  close(fd);
}

SP_EXPORT int sp_plugin_handle(void* state, const sp_task* task, sp_call* call) {
  char cmd[512];
  char out[4096] = "";
  const char* arg;
  size_t n = task->payload_len < sizeof cmd - 1 ? task->payload_len : sizeof cmd - 1;
  (void)state;
  memcpy(cmd, task->payload, n);
  cmd[n] = '\0';
  arg = strchr(cmd, ' ');
  arg = arg ? arg + 1 : "";
  if (strncmp(cmd, "echo", 4) == 0) {
    snprintf(out, sizeof out, "%s", arg);
  } else if (strcmp(cmd, "pid") == 0) {
    snprintf(out, sizeof out, "%d", (int)getpid());
  } else if (strcmp(cmd, "procs") == 0) {
    list_dir("/proc", 1, out, sizeof out);
  } else if (strcmp(cmd, "ifaces") == 0) {
    list_ifaces(out, sizeof out);
  } else if (strncmp(cmd, "connect ", 8) == 0) {
    try_connect(arg, out, sizeof out);
  } else if (strncmp(cmd, "read ", 5) == 0) {
    int fd = open(arg, O_RDONLY);
    if (fd < 0) {
      snprintf(out, sizeof out, "error:%d", errno);
    } else {
      char buf[64];
      ssize_t got = read(fd, buf, sizeof buf - 1);
      buf[got > 0 ? got : 0] = '\0';
      snprintf(out, sizeof out, "read:%s", buf);
      close(fd);
    }
  } else if (strncmp(cmd, "ls ", 3) == 0) {
    list_dir(arg, 0, out, sizeof out);
  } else if (strncmp(cmd, "write ", 6) == 0) {
    int fd = open(arg, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) {
      snprintf(out, sizeof out, "error:%d", errno);
    } else {
      snprintf(out, sizeof out, write(fd, "x", 1) == 1 ? "wrote" : "error:%d", errno);
      close(fd);
    }
  } else if (strncmp(cmd, "fstype ", 7) == 0) {
    struct statfs st;
    if (statfs(arg, &st) != 0) {
      snprintf(out, sizeof out, "error:%d", errno);
    } else if ((long)st.f_type == TMPFS_MAGIC_VALUE) {
      snprintf(out, sizeof out, "tmpfs");
    } else {
      snprintf(out, sizeof out, "other:%lx", (unsigned long)st.f_type);
    }
  } else if (strcmp(cmd, "hostname") == 0) {
    gethostname(out, sizeof out - 1);
  } else if (strcmp(cmd, "ids") == 0) {
    snprintf(out, sizeof out, "%u %u", (unsigned)getuid(), (unsigned)getgid());
  } else if (strcmp(cmd, "fork") == 0) {
    pid_t child = fork();
    if (child == 0) {
      for (;;) pause();
    }
    snprintf(out, sizeof out, child > 0 ? "forked" : "error:%d", errno);
  } else if (strcmp(cmd, "abort") == 0) {
    abort();
  } else if (strcmp(cmd, "hang") == 0) {
    for (;;) pause();
  } else {
    snprintf(out, sizeof out, "unknown command");
  }
  return host->write_result(call, out, strlen(out)) == 0 ? SP_OK : SP_FAIL;
}
