/* lua: runs a user's Lua 5.4 script on an input, in a fresh state per task, with an
 * instruction count and a memory cap (SP_LIMIT when reached). The payload is the script,
 * or "@name" for a script of plugin_config.scripts, then optionally a NUL byte and the input
 * (any bytes). docs/plugin-guide.md, "lua", is the user's side of this. */
#include <sandpool/plugin.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lua_config.h"
#include "lua_run.h"

static const char* const kTypes[] = {"lua", NULL};

typedef struct lua_plugin {
  const sp_host_api* host;
  lua_plugin_config config;
} lua_plugin;

/* The payload split at its first NUL: what names or is the script, and the input. */
typedef struct payload_parts {
  const char* script;
  size_t script_len;
  const uint8_t* input;
  size_t input_len;
} payload_parts;

static payload_parts split_payload(const sp_task* task) {
  payload_parts p;
  const uint8_t* nul = (const uint8_t*)memchr(task->payload, '\0', task->payload_len);
  p.script = (const char*)task->payload;
  if (nul == NULL) {
    p.script_len = task->payload_len;
    p.input = task->payload + task->payload_len;
    p.input_len = 0;
  } else {
    p.script_len = (size_t)(nul - task->payload);
    p.input = nul + 1;
    p.input_len = task->payload_len - p.script_len - 1;
  }
  return p;
}

static int write_result(void* ctx, const void* data, size_t len) {
  void** pair = (void**)ctx;
  const sp_host_api* host = (const sp_host_api*)pair[0];
  return host->write_result((sp_call*)pair[1], data, len);
}

static int fail(const lua_plugin* s, sp_call* call, int code, const char* msg) {
  s->host->set_error(call, msg, strlen(msg));
  return code;
}

SP_EXPORT uint32_t sp_plugin_abi_version(void) { return SP_PLUGIN_ABI_VERSION; }

SP_EXPORT const char* const* sp_plugin_task_types(void) { return kTypes; }

/* Parses plugin_config and compiles every named script once, so a broken one stops the pool
 * at start with its syntax error rather than failing each task. */
SP_EXPORT int sp_plugin_init(const sp_host_api* host, const char* config_json, size_t config_len,
                             void** state) {
  char err[512];
  size_t i;
  lua_plugin* s;
  if (host == NULL || host->abi_version != SP_PLUGIN_ABI_VERSION) return 1;
  s = (lua_plugin*)calloc(1, sizeof *s);
  if (s == NULL) return 2;
  s->host = host;
  if (lua_plugin_config_parse(config_json, config_len, &s->config, err, sizeof err) != 0) {
    host->log(NULL, 3, err, strlen(err));
    free(s);
    return 3;
  }
  for (i = 0; i < s->config.script_count; ++i) {
    char chunk[80];
    const lua_named_script* script = &s->config.scripts[i];
    snprintf(chunk, sizeof chunk, "=%s", script->name);
    if (lua_run_check_syntax(script->source, script->source_len, chunk, err, sizeof err) != 0) {
      char line[640];
      snprintf(line, sizeof line, "lua: plugin_config: scripts.%s: %s", script->name, err);
      host->log(NULL, 3, line, strlen(line));
      lua_plugin_config_free(&s->config);
      free(s);
      return 4;
    }
  }
  *state = s;
  return 0;
}

SP_EXPORT int sp_plugin_handle(void* state, const sp_task* task, sp_call* call) {
  const lua_plugin* s = (const lua_plugin*)state;
  const payload_parts parts = split_payload(task);
  lua_run_input in;
  lua_run_limits limits;
  char message[4096];
  char chunk[80] = "=script";
  void* ctx[2];
  int written = 0;
  lua_run_outcome outcome;
  memset(&in, 0, sizeof in);
  if (parts.script_len > 0 && parts.script[0] == '@') {
    const lua_named_script* named =
        lua_plugin_config_find(&s->config, parts.script + 1, parts.script_len - 1);
    if (named == NULL) {
      snprintf(message, sizeof message, "lua: no script named '%.*s' in plugin_config.scripts",
               (int)(parts.script_len - 1 > 200 ? 200 : parts.script_len - 1), parts.script + 1);
      return fail(s, call, SP_FAIL, message);
    }
    in.source = named->source;
    in.source_len = named->source_len;
    snprintf(chunk, sizeof chunk, "=%s", named->name);
  } else if (!s->config.allow_payload_scripts) {
    return fail(s, call, SP_FAIL,
                "lua: this pool runs only its named scripts (payload \"@name\"): "
                "plugin_config.allow_payload_scripts is false");
  } else {
    in.source = parts.script;
    in.source_len = parts.script_len;
  }
  in.chunk_name = chunk;
  in.input = parts.input;
  in.input_len = parts.input_len;
  in.host = s->host;
  in.call = call;
  limits.max_instructions = s->config.max_instructions;
  limits.max_memory = s->config.max_memory;
  ctx[0] = (void*)s->host;
  ctx[1] = call;
  outcome = lua_run_script(&in, &limits, write_result, ctx, &written, message, sizeof message);
  switch (outcome) {
    case LUA_RUN_OK:
      return written == 0 ? SP_OK : SP_FAIL; /* the host already named a result too large */
    case LUA_RUN_INSTRUCTIONS:
    case LUA_RUN_MEMORY:
      return fail(s, call, SP_LIMIT, message);
    case LUA_RUN_ERROR:
    case LUA_RUN_CANCELLED:
      break;
  }
  return fail(s, call, SP_FAIL, message);
}

SP_EXPORT void sp_plugin_shutdown(void* state) {
  lua_plugin* s = (lua_plugin*)state;
  lua_plugin_config_free(&s->config);
  free(s);
}
