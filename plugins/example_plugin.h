/* Helpers shared by the example plugins. Header-only (static functions), so every plugin
 * stays one self-contained .so; a third-party plugin needs nothing but <sandpool/plugin.h>. */
#ifndef SANDPOOL_EXAMPLE_PLUGIN_H
#define SANDPOOL_EXAMPLE_PLUGIN_H

#include <sandpool/plugin.h>

#include <stdlib.h>
#include <string.h>

/* What every example plugin keeps between init and shutdown: the host's table, which is
 * only handed to init. */
typedef struct example_state {
  const sp_host_api* host;
} example_state;

/* sp_plugin_init for plugins without configuration: any JSON (at least "{}") is accepted.
 * Refuses a host of another ABI version, explaining why through the host's log. */
static inline int example_init(const sp_host_api* host, void** state) {
  example_state* s;
  if (host == NULL || host->abi_version != SP_PLUGIN_ABI_VERSION) return 1;
  s = (example_state*)malloc(sizeof *s);
  if (s == NULL) {
    static const char msg[] = "out of memory in init";
    host->log(NULL, 3, msg, sizeof msg - 1);
    return 2;
  }
  s->host = host;
  *state = s;
  return 0;
}

static inline const sp_host_api* example_host(void* state) { return ((example_state*)state)->host; }

/* Sets the attempt's error to the NUL-terminated msg and returns `code` (SP_RETRY/SP_FAIL). */
static inline int example_fail(void* state, sp_call* call, int code, const char* msg) {
  example_host(state)->set_error(call, msg, strlen(msg));
  return code;
}

/* Writes the NUL-terminated text as (part of) the result; SP_OK, or SP_FAIL when the
 * host refuses it (past max_result). */
static inline int example_result(void* state, sp_call* call, const char* text) {
  if (example_host(state)->write_result(call, text, strlen(text)) != 0) return SP_FAIL;
  return SP_OK;
}

/* Parses the payload as a plain unsigned decimal no larger than max. Returns 0 on
 * success, -1 for anything else (empty, signs, blanks, other characters, too large). */
static inline int example_parse_decimal(const sp_task* task, unsigned long long max,
                                        unsigned long long* out) {
  unsigned long long v = 0;
  size_t i;
  if (task->payload_len == 0) return -1;
  for (i = 0; i < task->payload_len; ++i) {
    unsigned d;
    if (task->payload[i] < '0' || task->payload[i] > '9') return -1;
    d = (unsigned)(task->payload[i] - '0');
    if (v > (max - d) / 10) return -1;
    v = v * 10 + d;
  }
  *out = v;
  return 0;
}

#endif /* SANDPOOL_EXAMPLE_PLUGIN_H */
