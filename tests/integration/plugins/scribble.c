/* A hostile plugin for the tests: it finds its worker's shared region (while init may still
 * read /proc, before seccomp) and, on "storm", fills the region's first page with 0xff bytes
 * again and again while ringing the manager's doorbell (fd 4), so the manager reads
 * impossible ring positions and words. "noop" behaves. */
#define _GNU_SOURCE
#include <sandpool/plugin.h>

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char* const kTypes[] = {"scribble", NULL};
static unsigned char* region;

SP_EXPORT uint32_t sp_plugin_abi_version(void) { return SP_PLUGIN_ABI_VERSION; }
SP_EXPORT const char* const* sp_plugin_task_types(void) { return kTypes; }

SP_EXPORT int sp_plugin_init(const sp_host_api* host, const char* config_json, size_t config_len,
                             void** state) {
  char line[512];
  FILE* maps = fopen("/proc/self/maps", "r");
  (void)config_json;
  (void)config_len;
  *state = NULL;
  if (maps == NULL) return 1;
  while (fgets(line, sizeof line, maps) != NULL) {
    unsigned long start = 0;
    if (strstr(line, "memfd:sandpool-region") != NULL && sscanf(line, "%lx-", &start) == 1) {
      region = (unsigned char*)start;
      break;
    }
  }
  fclose(maps);
  if (region == NULL) {
    static const char msg[] = "scribble: shared region not found in /proc/self/maps";
    host->log(NULL, 3, msg, sizeof msg - 1);
    return 1;
  }
  return 0;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

SP_EXPORT int sp_plugin_handle(void* state, const sp_task* task, sp_call* call) {
  (void)state;
  (void)call;
  if (task->payload_len == 5 && memcmp(task->payload, "storm", 5) == 0) {
    const double until = now_s() + 2.0;
    const uint64_t one = 1;
    while (now_s() < until) {
      memset(region, 0xff, 4096);
      if (write(4, &one, sizeof one) < 0) break;
    }
  }
  return SP_OK;
}
