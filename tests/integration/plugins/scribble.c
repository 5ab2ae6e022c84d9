/* A hostile plugin for the tests: it finds its worker's shared region (while init may still
 * read /proc, before seccomp) and writes garbage over it from inside handle, ringing the
 * manager's doorbell (fd 4) so the manager looks. The payload says what:
 *   storm        fills the region's first page with 0xff again and again for 2 s, so the
 *                manager reads impossible ring positions and words
 *   poke O V     stores the u64 V at region offset O (an index, a flag, a header word)
 *   record R B H L K N
 *                appends a forged record to a ring and publishes it: the ring's offset
 *                and size are the header's u64 words at offsets R and B, its head word is
 *                at offset H; the record claims L payload bytes of kind K and is followed
 *                by N garbage bytes (head += 8 + N rounded up to 8)
 *   forge S H T  for T seconds burns CPU while it writes 0 into the header word at offset S
 *                (started_task: "nothing is running") and the current CLOCK_MONOTONIC ms
 *                into the one at offset H (heartbeat_ms) every loop: the words a worker
 *                writes, forged to look idle and alive; then returns
 *   noop         behaves
 * After a poke or a forged record the plugin waits (up to 30 s) instead of returning, so the
 * host's own result frame cannot overwrite the garbage before the manager has read it: the
 * manager must notice and kill the worker.
 * Offsets come from the test (offsetof on <sandpool/ipc/layout.hpp>), so this C file
 * needs no copy of the layout. */
#define _GNU_SOURCE
#include <sandpool/plugin.h>

#include <errno.h>
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

static void wait_to_be_killed(void) {
  const double until = now_s() + 30.0;
  while (now_s() < until) {
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
}

static void ring_doorbell(void) {
  const uint64_t one = 1;
  if (write(4, &one, sizeof one) < 0) return;
}

/* "record R B H L K N": see the top of the file. Returns 0, or -1 for a malformed payload. */
static int forge_record(const char* args) {
  unsigned long ring_at, bytes_at, head_at, length, kind, n, ring, bytes, head, i;
  uint32_t header[2];
  if (sscanf(args, "%lu %lu %lu %lu %lu %lu", &ring_at, &bytes_at, &head_at, &length, &kind, &n) !=
      6) {
    return -1;
  }
  memcpy(&ring, region + ring_at, sizeof ring);
  memcpy(&bytes, region + bytes_at, sizeof bytes);
  if (bytes == 0 || (bytes & (bytes - 1)) != 0) return -1;
  head = __atomic_load_n((uint64_t*)(region + head_at), __ATOMIC_ACQUIRE);
  header[0] = (uint32_t)length;
  header[1] = (uint32_t)kind; /* kind in the low 16 bits, flags 0 */
  memcpy(region + ring + (head & (bytes - 1)), header, sizeof header);
  for (i = 0; i < n; ++i) region[ring + ((head + 8 + i) & (bytes - 1))] = 0xa5;
  __atomic_store_n((uint64_t*)(region + head_at), head + 8 + ((n + 7) & ~7ul), __ATOMIC_RELEASE);
  ring_doorbell();
  return 0;
}

SP_EXPORT int sp_plugin_handle(void* state, const sp_task* task, sp_call* call) {
  char text[256];
  size_t len = task->payload_len < sizeof text - 1 ? task->payload_len : sizeof text - 1;
  (void)state;
  (void)call;
  memcpy(text, task->payload, len);
  text[len] = '\0';
  if (strncmp(text, "poke ", 5) == 0) {
    unsigned long offset, value;
    if (sscanf(text + 5, "%lu %lu", &offset, &value) != 2) return SP_FAIL;
    __atomic_store_n((uint64_t*)(region + offset), (uint64_t)value, __ATOMIC_RELEASE);
    ring_doorbell();
    wait_to_be_killed();
  }
  if (strncmp(text, "record ", 7) == 0) {
    if (forge_record(text + 7) != 0) return SP_FAIL;
    wait_to_be_killed();
  }
  if (strncmp(text, "forge ", 6) == 0) {
    unsigned long started_at, beat_at, seconds;
    double until;
    if (sscanf(text + 6, "%lu %lu %lu", &started_at, &beat_at, &seconds) != 3) return SP_FAIL;
    until = now_s() + (double)seconds;
    while (now_s() < until) {
      __atomic_store_n((uint64_t*)(region + started_at), (uint64_t)0, __ATOMIC_RELEASE);
      __atomic_store_n((uint64_t*)(region + beat_at), (uint64_t)(now_s() * 1000.0),
                       __ATOMIC_RELEASE);
    }
    return SP_OK;
  }
  if (task->payload_len == 5 && memcmp(task->payload, "storm", 5) == 0) {
    const double until = now_s() + 2.0;
    const uint64_t one = 1;
    while (now_s() < until) {
      memset(region, 0xff, 4096);
      /* EAGAIN: the doorbell's socket is full of rings the manager has yet to read. */
      if (write(4, &one, sizeof one) < 0 && errno != EAGAIN) break;
    }
  }
  return SP_OK;
}
