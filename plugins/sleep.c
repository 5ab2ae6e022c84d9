/* sleep: payload = decimal milliseconds ("250"), or microseconds with a "us" suffix ("200us",
 * for short tasks in benchmarks). Sleeps in steps of at most 10 ms, beating the heartbeat and
 * stopping early (SP_FAIL, "cancelled") when the task is cancelled. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <time.h>

#include "example_plugin.h"

/* The type it declares: "sleep", or another name it is built with (the sleep16 plugin, whose
 * 16-character type the memory bench queues: a record's size must not depend on it). */
#ifndef SLEEP_TASK_TYPE
#define SLEEP_TASK_TYPE "sleep"
#endif
static const char* const kTypes[] = {SLEEP_TASK_TYPE, NULL};

#define STEP_NS 10000000LL                 /* 10 ms */
#define MAX_MS (24ULL * 3600ULL * 1000ULL) /* one day */

static long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

SP_EXPORT uint32_t sp_plugin_abi_version(void) { return SP_PLUGIN_ABI_VERSION; }

SP_EXPORT int sp_plugin_init(const sp_host_api* host, const char* config_json, size_t config_len,
                             void** state) {
  (void)config_json;
  (void)config_len;
  return example_init(host, state);
}

SP_EXPORT int sp_plugin_handle(void* state, const sp_task* task, sp_call* call) {
  const sp_host_api* host = example_host(state);
  unsigned long long ms, us = 0;
  long long end, now;
  char text[64];
  sp_task digits = *task;
  const int micro = task->payload_len > 2 && task->payload[task->payload_len - 2] == 'u' &&
                    task->payload[task->payload_len - 1] == 's';
  if (micro) digits.payload_len -= 2;
  if (example_parse_decimal(&digits, micro ? MAX_MS * 1000ULL : MAX_MS, micro ? &us : &ms) != 0) {
    return example_fail(state, call, SP_FAIL,
                        "sleep: payload must be decimal milliseconds, or microseconds with us");
  }
  if (micro) ms = us / 1000ULL;
  end = now_ns() + (micro ? (long long)us * 1000LL : (long long)ms * 1000000LL);
  while ((now = now_ns()) < end) {
    long long next = now + STEP_NS < end ? now + STEP_NS : end;
    struct timespec ts;
    if (host->cancelled(call)) return example_fail(state, call, SP_FAIL, "cancelled");
    host->heartbeat(call);
    ts.tv_sec = (time_t)(next / 1000000000LL);
    ts.tv_nsec = (long)(next % 1000000000LL);
    /* An absolute deadline: a signal (EINTR) just means another turn of the loop. */
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
  }
  if (micro) {
    snprintf(text, sizeof text, "slept %llu us", us);
  } else {
    snprintf(text, sizeof text, "slept %llu ms", ms);
  }
  return example_result(state, call, text);
}

SP_EXPORT void sp_plugin_shutdown(void* state) { free(state); }

SP_EXPORT const char* const* sp_plugin_task_types(void) { return kTypes; }
