/* chaos: what each task does is written at the head of its payload (sandpool-bench's soak
 * mixes them in one pool):
 *   e<data>   echo: the result is the whole payload.
 *   c<n><data> crash (SIGSEGV) on attempts 1..n (n one digit), echo on later attempts.
 *   s<ms>     sleep ms in steps of at most 10 ms, beating; stops early (SP_FAIL, "cancelled")
 *             when the task is cancelled.
 *   h<ms>     the same sleep, ignoring cancellation (the pool kills it after cancel_grace).
 * Anything else fails with SP_FAIL. Runs under the strict seccomp profile: clocks, sleeping
 * and the host's calls only. */
#define _POSIX_C_SOURCE 200809L
#include <time.h>

#include "example_plugin.h"

static const char* const kTypes[] = {"chaos", NULL};

#define STEP_NS 10000000LL                 /* 10 ms */
#define MAX_MS (24ULL * 3600ULL * 1000ULL) /* one day */

static long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void crash(void) {
  /* Both volatile, as in crash.c: the compiler may neither see the NULL nor drop the store. */
  volatile int* volatile target = NULL;
  *target = 42;
}

/* Parses payload[1..] as decimal milliseconds into *ms; -1 when it is not one. */
static int parse_ms(const sp_task* task, unsigned long long* ms) {
  sp_task rest = *task;
  rest.payload = task->payload + 1;
  rest.payload_len = task->payload_len - 1;
  return example_parse_decimal(&rest, MAX_MS, ms);
}

/* Sleeps ms, beating every step; with honour_cancel, returns SP_FAIL once cancelled. */
static int nap(void* state, sp_call* call, unsigned long long ms, int honour_cancel) {
  const sp_host_api* host = example_host(state);
  long long end = now_ns() + (long long)ms * 1000000LL, now;
  while ((now = now_ns()) < end) {
    long long next = now + STEP_NS < end ? now + STEP_NS : end;
    struct timespec ts;
    if (honour_cancel && host->cancelled(call))
      return example_fail(state, call, SP_FAIL, "cancelled");
    host->heartbeat(call);
    ts.tv_sec = (time_t)(next / 1000000000LL);
    ts.tv_nsec = (long)(next % 1000000000LL);
    /* An absolute deadline: a signal (EINTR) just means another turn of the loop. */
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
  }
  return example_result(state, call, "slept");
}

static int echo(void* state, const sp_task* task, sp_call* call) {
  if (example_host(state)->write_result(call, task->payload, task->payload_len) != 0) {
    return example_fail(state, call, SP_FAIL, "chaos: payload exceeds max_result");
  }
  return SP_OK;
}

SP_EXPORT uint32_t sp_plugin_abi_version(void) { return SP_PLUGIN_ABI_VERSION; }

SP_EXPORT int sp_plugin_init(const sp_host_api* host, const char* config_json, size_t config_len,
                             void** state) {
  (void)config_json;
  (void)config_len;
  return example_init(host, state);
}

SP_EXPORT int sp_plugin_handle(void* state, const sp_task* task, sp_call* call) {
  unsigned long long ms;
  if (task->payload_len == 0) return example_fail(state, call, SP_FAIL, "chaos: empty payload");
  switch (task->payload[0]) {
    case 'e':
      return echo(state, task, call);
    case 'c':
      if (task->payload_len < 2 || task->payload[1] < '0' || task->payload[1] > '9') break;
      if (task->attempt <= (uint32_t)(task->payload[1] - '0')) crash();
      return echo(state, task, call);
    case 's':
    case 'h':
      if (parse_ms(task, &ms) != 0) break;
      return nap(state, call, ms, task->payload[0] == 's');
    default:
      break;
  }
  return example_fail(state, call, SP_FAIL,
                      "chaos: payload must start with e, c<n>, s<ms> or h<ms>");
}

SP_EXPORT void sp_plugin_shutdown(void* state) { free(state); }

SP_EXPORT const char* const* sp_plugin_task_types(void) { return kTypes; }
