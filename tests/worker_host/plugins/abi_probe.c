/* The ABI probe: compiled as strict C99 against <sandpool/plugin.h> with hidden visibility
 * (the compile test), and used by the tests to exercise every host API member. The task
 * type selects what handle does:
 *   echo         result = payload
 *   return       returns the payload's decimal value (e.g. 7: not an SP_* code)
 *   error/retry  set_error(payload), then SP_FAIL / SP_RETRY
 *   limit        set_error(payload), then SP_LIMIT
 *   deadline     result = deadline_ms in decimal
 *   task         result = "id=<id> attempt=<n> type=<type> size=<sizeof sp_task>"
 *   log          host->log(call, 1, payload); log-null: host->log(NULL, 2, payload)
 *   wait-cancel  beats until cancelled() (at most 30 s), then SP_FAIL "cancelled"
 * Init: a config containing "hang" never returns; one containing "fail" returns 5. */
#define _POSIX_C_SOURCE 200809L
#include <sandpool/plugin.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char* const kTypes[] = {"echo", "return", "error",    "retry",       "deadline",
                                     "task", "log",    "log-null", "wait-cancel", NULL};

typedef struct probe {
  const sp_host_api* host;
} probe;

static int is_type(const sp_task* task, const char* name) {
  return task->type_len == strlen(name) && memcmp(task->type, name, task->type_len) == 0;
}

static int text_result(const probe* p, sp_call* call, const char* text) {
  return p->host->write_result(call, text, strlen(text)) == 0 ? SP_OK : SP_FAIL;
}

SP_EXPORT uint32_t sp_plugin_abi_version(void) { return SP_PLUGIN_ABI_VERSION; }

SP_EXPORT int sp_plugin_init(const sp_host_api* host, const char* config_json, size_t config_len,
                             void** state) {
  probe* p;
  if (host->abi_version != SP_PLUGIN_ABI_VERSION || host->size < sizeof(sp_host_api)) return 1;
  if (config_json[config_len] != '\0') return 2; /* the ABI promises NUL termination */
  if (strstr(config_json, "hang") != NULL) {
    for (;;) {
      struct timespec ts = {1, 0};
      nanosleep(&ts, NULL);
    }
  }
  if (strstr(config_json, "fail") != NULL) return 5;
  p = (probe*)malloc(sizeof *p);
  if (p == NULL) return 3;
  p->host = host;
  *state = p;
  return 0;
}

SP_EXPORT int sp_plugin_handle(void* state, const sp_task* task, sp_call* call) {
  const probe* p = (const probe*)state;
  char text[160];
  if (is_type(task, "echo")) {
    return p->host->write_result(call, task->payload, task->payload_len) == 0 ? SP_OK : SP_FAIL;
  }
  if (is_type(task, "return")) {
    memcpy(text, task->payload, task->payload_len < 32 ? task->payload_len : 31);
    text[task->payload_len < 32 ? task->payload_len : 31] = '\0';
    return atoi(text);
  }
  if (is_type(task, "error") || is_type(task, "retry")) {
    p->host->set_error(call, (const char*)task->payload, task->payload_len);
    return is_type(task, "error") ? SP_FAIL : SP_RETRY;
  }
  if (is_type(task, "limit")) {
    p->host->set_error(call, (const char*)task->payload, task->payload_len);
    return SP_LIMIT;
  }
  if (is_type(task, "deadline")) {
    snprintf(text, sizeof text, "%lld", (long long)task->deadline_ms);
    return text_result(p, call, text);
  }
  if (is_type(task, "task")) {
    snprintf(text, sizeof text, "id=%llu attempt=%u type=%.*s size=%u",
             (unsigned long long)task->id, (unsigned)task->attempt, (int)task->type_len, task->type,
             (unsigned)task->size);
    return text_result(p, call, text);
  }
  if (is_type(task, "log") || is_type(task, "log-null")) {
    const int with_call = is_type(task, "log");
    p->host->log(with_call ? call : NULL, with_call ? 1 : 2, (const char*)task->payload,
                 task->payload_len);
    return SP_OK;
  }
  if (is_type(task, "wait-cancel")) {
    int i;
    for (i = 0; i < 3000; ++i) {
      struct timespec ts = {0, 10000000L};
      if (p->host->cancelled(call)) break;
      p->host->heartbeat(call);
      nanosleep(&ts, NULL);
    }
    p->host->set_error(call, "cancelled", 9);
    return SP_FAIL;
  }
  p->host->set_error(call, "abi_probe: unknown task type", 28);
  return SP_FAIL;
}

SP_EXPORT void sp_plugin_shutdown(void* state) { free(state); }

SP_EXPORT const char* const* sp_plugin_task_types(void) { return kTypes; }
