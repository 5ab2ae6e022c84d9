/* One task's Lua run: a fresh lua_State in the sandboxed environment, with the instruction
 * count and the memory cap of the pool's plugin_config. Not thread-safe; one run at a time. */
#ifndef SANDPOOL_LUA_RUN_H
#define SANDPOOL_LUA_RUN_H

#include <sandpool/plugin.h>

#include <stddef.h>
#include <stdint.h>

typedef enum lua_run_outcome {
  LUA_RUN_OK = 0,       /* the result holds the script's return value */
  LUA_RUN_ERROR,        /* the script failed (syntax or run time): message holds why */
  LUA_RUN_INSTRUCTIONS, /* stopped at max_instructions */
  LUA_RUN_MEMORY,       /* stopped at max_memory */
  LUA_RUN_CANCELLED     /* the submitter cancelled */
} lua_run_outcome;

typedef struct lua_run_limits {
  uint64_t max_instructions; /* 0: none */
  uint64_t max_memory;       /* 0: none */
} lua_run_limits;

/* What a script needs to run, and where the host API reaches (host and call may be NULL:
 * the script's print() then goes nowhere and cancellation is never seen). */
typedef struct lua_run_input {
  const char* source;
  size_t source_len;
  const char* chunk_name; /* "=script": errors read "script:3: ..." */
  const uint8_t* input;
  size_t input_len;
  const sp_host_api* host;
  sp_call* call;
} lua_run_input;

/* Runs the script in a new state and closes it. On LUA_RUN_OK, result_writer(ctx, data,
 * len) gets the result (a string, a number's text, or nothing for nil) and its return value
 * is returned as `*writer_status`. On other outcomes `message` (message_len bytes) holds a
 * NUL-terminated explanation. */
lua_run_outcome lua_run_script(const lua_run_input* in, const lua_run_limits* limits,
                               int (*result_writer)(void* ctx, const void* data, size_t len),
                               void* ctx, int* writer_status, char* message, size_t message_len);

/* Compiles `source` in a scratch state without running it: 0, or -1 with the syntax error
 * in message. For checking named scripts at init. */
int lua_run_check_syntax(const char* source, size_t source_len, const char* chunk_name,
                         char* message, size_t message_len);

#endif /* SANDPOOL_LUA_RUN_H */
