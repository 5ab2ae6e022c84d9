/* alloc: payload = decimal MiB to allocate and touch. The memory is kept until the worker
 * exits, across tasks (a deliberate leak): for testing memory limits and recycling. */
#include <stdio.h>

#include "example_plugin.h"

static const char* const kTypes[] = {"alloc", NULL};

#define MIB (1024UL * 1024UL)
#define MAX_MIB (1024ULL * 1024ULL) /* 1 TiB: far past any sane limit */

/* One held MiB; the block's first bytes link it to the previously held one. */
typedef struct block {
  struct block* next;
} block;

typedef struct alloc_state {
  example_state base; /* first: example_host() reads it */
  block* held;
  unsigned long long held_mib;
} alloc_state;

SP_EXPORT uint32_t sp_plugin_abi_version(void) { return SP_PLUGIN_ABI_VERSION; }

SP_EXPORT int sp_plugin_init(const sp_host_api* host, const char* config_json, size_t config_len,
                             void** state) {
  alloc_state* s;
  (void)config_json;
  (void)config_len;
  if (host == NULL || host->abi_version != SP_PLUGIN_ABI_VERSION) return 1;
  s = (alloc_state*)calloc(1, sizeof *s);
  if (s == NULL) return 2;
  s->base.host = host;
  *state = s;
  return 0;
}

SP_EXPORT int sp_plugin_handle(void* state, const sp_task* task, sp_call* call) {
  alloc_state* s = (alloc_state*)state;
  unsigned long long mib, i;
  char text[96];
  if (example_parse_decimal(task, MAX_MIB, &mib) != 0) {
    return example_fail(state, call, SP_FAIL, "alloc: payload must be decimal MiB");
  }
  for (i = 0; i < mib; ++i) {
    block* b = (block*)malloc(MIB);
    if (b == NULL) {
      snprintf(text, sizeof text, "alloc: out of memory after %llu of %llu MiB (holding %llu MiB)",
               i, mib, s->held_mib);
      return example_fail(state, call, SP_FAIL, text);
    }
    memset(b, 0xa5, MIB); /* touch every page: resident, not just reserved */
    b->next = s->held;
    s->held = b;
    ++s->held_mib;
    s->base.host->heartbeat(call);
  }
  snprintf(text, sizeof text, "allocated %llu MiB, holding %llu MiB", mib, s->held_mib);
  return example_result(state, call, text);
}

SP_EXPORT void sp_plugin_shutdown(void* state) {
  alloc_state* s = (alloc_state*)state;
  while (s->held != NULL) {
    block* next = s->held->next;
    free(s->held);
    s->held = next;
  }
  free(s);
}

SP_EXPORT const char* const* sp_plugin_task_types(void) { return kTypes; }
