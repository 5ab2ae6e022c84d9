/* clang-format off */
/* sandpool plugin ABI, version 1. Normative: see docs/plugin-guide.md.
 * A plugin is a shared object exporting the functions below. C99 and C++. */
#ifndef SANDPOOL_PLUGIN_H
#define SANDPOOL_PLUGIN_H

#include <stddef.h>
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif
#define SP_PLUGIN_ABI_VERSION 1u
#define SP_EXPORT __attribute__((visibility("default")))
enum { SP_OK = 0, SP_RETRY = 1, SP_FAIL = 2, SP_LIMIT = 3 };   /* handle's return values */

typedef struct sp_task {
  uint32_t size;            /* sizeof(sp_task) as built by the host; fields are only appended */
  uint32_t attempt;         /* 1 on the first try */
  uint64_t id;              /* unique per task, the same on every attempt and replay */
  const char *type;  size_t type_len;          /* not NUL-terminated */
  const uint8_t *payload; size_t payload_len;  /* valid until handle returns */
  int64_t deadline_ms;      /* ms left of the task's timeout when handle starts; -1: none */
  uint64_t max_result;      /* appended: the bytes write_result accepts for this task, in all;
                               present iff size >= SP_TASK_HAS_MAX_RESULT */
} sp_task;
#define SP_TASK_HAS_MAX_RESULT (offsetof(sp_task, max_result) + sizeof(uint64_t))

typedef struct sp_call sp_call;   /* the host's per-task context; invalid after handle returns */

typedef struct sp_host_api {
  uint32_t abi_version;
  uint32_t size;            /* sizeof(sp_host_api) as built by the host; members only appended */
  int  (*write_result)(sp_call *, const void *data, size_t len); /* appends; -1 past max_result */
  void (*progress)(sp_call *, const void *data, size_t len);     /* may be coalesced; a heartbeat too */
  void (*heartbeat)(sp_call *);
  void (*set_error)(sp_call *, const char *msg, size_t len);     /* reason for SP_RETRY/FAIL/LIMIT */
  int  (*cancelled)(sp_call *);                                  /* non-zero: stop soon */
  void (*log)(sp_call *, int level, const char *msg, size_t len);/* call may be NULL; 0 debug..3 error */
} sp_host_api;

SP_EXPORT uint32_t sp_plugin_abi_version(void);
SP_EXPORT int  sp_plugin_init(const sp_host_api *host, const char *config_json, size_t config_len,
                              void **state);                    /* 0 on success */
SP_EXPORT int  sp_plugin_handle(void *state, const sp_task *task, sp_call *call); /* SP_* */
SP_EXPORT void sp_plugin_shutdown(void *state);                 /* optional symbol */
SP_EXPORT const char *const *sp_plugin_task_types(void);        /* optional, NULL-terminated */
#ifdef __cplusplus
}
#endif

#endif /* SANDPOOL_PLUGIN_H */
