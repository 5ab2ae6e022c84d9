/* The scribbling plugin of the hostile suite (tests/hostile/scribble_test.cpp, issue 40): a
 * handler that writes over every shared writable mapping of its worker (the shared region),
 * then returns SP_OK as if nothing happened. Strict C99 against <sandpool/plugin.h> only.
 *
 * Types:
 *   scribble     pseudo-random bytes (seeded by the task id) over every mapping
 *   scribble_ff  all-ones over every mapping
 *   scribble_at  "OFFSET": 0xa5 over the 8 bytes at that offset of the shared region only
 *                (offsetof from the test: a word the manager never looks at, so only the
 *                worker's own check can find it)
 *   upper        result = the payload in upper case (a well-behaved task)
 *   act          "TYPE REST": runs TYPE with REST as its payload (sandpool-run takes one type
 *                per run, so a mixed stream goes through this one)
 *
 * Init lists the mappings from /proc/self/maps (before seccomp: handle cannot open it). */
#define _GNU_SOURCE
#include <sandpool/plugin.h>

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#define MAX_MAPPINGS 16

static const char* const kTypes[] = {"scribble", "scribble_ff", "scribble_at",
                                     "upper",    "act",         NULL};
static const sp_host_api* host;
static unsigned char* mapping_start[MAX_MAPPINGS];
static size_t mapping_size[MAX_MAPPINGS];
static int mappings;
static unsigned char* region; /* the worker's shared region (memfd:sandpool-region) */
static size_t region_size;

SP_EXPORT uint32_t sp_plugin_abi_version(void) { return SP_PLUGIN_ABI_VERSION; }
SP_EXPORT const char* const* sp_plugin_task_types(void) { return kTypes; }

SP_EXPORT int sp_plugin_init(const sp_host_api* h, const char* config_json, size_t config_len,
                             void** state) {
  char line[512];
  FILE* maps = fopen("/proc/self/maps", "r");
  (void)config_json;
  (void)config_len;
  host = h;
  *state = NULL;
  if (maps == NULL) return 1;
  while (fgets(line, sizeof line, maps) != NULL && mappings < MAX_MAPPINGS) {
    unsigned long start = 0, end = 0;
    char perms[8] = "";
    if (sscanf(line, "%lx-%lx %7s", &start, &end, perms) != 3) continue;
    if (perms[1] != 'w' || perms[3] != 's') continue; /* shared and writable only */
    mapping_start[mappings] = (unsigned char*)start;
    mapping_size[mappings] = (size_t)(end - start);
    if (strstr(line, "memfd:sandpool-region") != NULL) {
      region = mapping_start[mappings];
      region_size = mapping_size[mappings];
    }
    ++mappings;
  }
  fclose(maps);
  if (mappings == 0) {
    static const char msg[] = "scribbler: no shared writable mapping in /proc/self/maps";
    host->log(NULL, 3, msg, sizeof msg - 1);
    return 1;
  }
  return 0;
}

static int is(const char* type, size_t type_len, const char* name) {
  return type_len == strlen(name) && memcmp(type, name, type_len) == 0;
}

/* xorshift64: garbage that differs from task to task, reproducible from the id. */
static void scribble(uint64_t seed) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  int m;
  for (m = 0; m < mappings; ++m) {
    size_t i;
    for (i = 0; i + sizeof x <= mapping_size[m]; i += sizeof x) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      memcpy(mapping_start[m] + i, &x, sizeof x);
    }
  }
}

static void scribble_ff(void) {
  int m;
  for (m = 0; m < mappings; ++m) memset(mapping_start[m], 0xff, mapping_size[m]);
}

static int run(const char* type, size_t type_len, const unsigned char* payload, size_t len,
               const sp_task* task, sp_call* call) {
  if (is(type, type_len, "scribble")) {
    scribble(task->id);
    return SP_OK;
  }
  if (is(type, type_len, "scribble_ff")) {
    scribble_ff();
    return SP_OK;
  }
  if (is(type, type_len, "scribble_at")) {
    char text[32];
    size_t n = len < sizeof text - 1 ? len : sizeof text - 1;
    unsigned long offset;
    memcpy(text, payload, n);
    text[n] = '\0';
    if (region == NULL || sscanf(text, "%lu", &offset) != 1 || offset + 8 > region_size) {
      return SP_FAIL;
    }
    memset(region + offset, 0xa5, 8);
    return SP_OK;
  }
  if (is(type, type_len, "upper")) {
    char out[256];
    size_t i, n = len < sizeof out ? len : sizeof out;
    for (i = 0; i < n; ++i) out[i] = (char)toupper(payload[i]);
    return host->write_result(call, out, n) == 0 ? SP_OK : SP_FAIL;
  }
  if (is(type, type_len, "act")) {
    size_t word = 0;
    while (word < len && payload[word] != ' ') ++word;
    if (is((const char*)payload, word, "act")) return SP_FAIL; /* no recursion */
    return run((const char*)payload, word, payload + (word < len ? word + 1 : len),
               word < len ? len - word - 1 : 0, task, call);
  }
  {
    static const char msg[] = "unknown task type";
    host->set_error(call, msg, sizeof msg - 1);
  }
  return SP_FAIL;
}

SP_EXPORT int sp_plugin_handle(void* state, const sp_task* task, sp_call* call) {
  (void)state;
  return run(task->type, task->type_len, task->payload, task->payload_len, task, call);
}
