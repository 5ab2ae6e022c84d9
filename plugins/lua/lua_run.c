#include "lua_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "lua_env.h"

/* The count hook fires every kHookEvery VM instructions: the instruction limit is exact to
 * that many, and the hook's cost (a C call) is paid once per that many instructions. */
#define HOOK_EVERY 1000
/* Cancellation is polled, and a heartbeat sent, every this many hook calls (1e5 instructions). */
#define POLL_EVERY_HOOKS 100

typedef enum trip { TRIP_NONE = 0, TRIP_INSTRUCTIONS, TRIP_MEMORY, TRIP_CANCELLED } trip;

/* One run's bookkeeping: the allocator's ud, and reached from every thread of the state
 * through its extra space (coroutines copy the main thread's). */
typedef struct run_state {
  lua_run_limits limits;
  size_t used;           /* bytes the allocator holds for Lua */
  int refused_once;      /* the last growing allocation was refused (Lua retries after a GC) */
  trip tripped;          /* the first limit reached; final, even if the script catches it */
  uint64_t instructions; /* counted in steps of HOOK_EVERY */
  unsigned hooks;
  lua_State* main;
  const lua_run_input* in;
  lua_env_output output;
} run_state;

static run_state* run_of(lua_State* L) { return *(run_state**)lua_getextraspace(L); }

static void count_hook(lua_State* L, lua_Debug* ar);

/* Once a limit is reached every thread stops at its next instruction: a script that catches
 * the error (pcall, coroutine.resume) gets it again at once, so it cannot go on. */
static void stop_every_instruction(lua_State* L) { lua_sethook(L, count_hook, LUA_MASKCOUNT, 1); }

static void count_hook(lua_State* L, lua_Debug* ar) {
  run_state* r = run_of(L);
  (void)ar;
  if (r->tripped == TRIP_NONE) {
    r->instructions += HOOK_EVERY;
    if (r->limits.max_instructions != 0 && r->instructions > r->limits.max_instructions) {
      r->tripped = TRIP_INSTRUCTIONS;
    } else if (++r->hooks % POLL_EVERY_HOOKS == 0 && r->in->host != NULL && r->in->call != NULL) {
      r->in->host->heartbeat(r->in->call);
      if (r->in->host->cancelled(r->in->call)) r->tripped = TRIP_CANCELLED;
    }
  }
  if (r->tripped == TRIP_NONE) return;
  stop_every_instruction(L);
  lua_pushliteral(L, "sandpool: limit reached");
  lua_error(L);
}

/* lua_Alloc with the memory cap. Lua answers a refused allocation with an emergency full
 * collection and one retry; only a refused retry trips the limit, so garbage near the cap
 * costs a collection, not the task. Shrinking and freeing never fail. */
static void* capped_alloc(void* ud, void* ptr, size_t osize, size_t nsize) {
  run_state* r = (run_state*)ud;
  void* p;
  if (ptr == NULL) osize = 0; /* then osize names the object's type, not a size */
  if (nsize == 0) {
    free(ptr);
    r->used -= osize;
    return NULL;
  }
  if (nsize > osize && r->limits.max_memory != 0 &&
      (nsize - osize > r->limits.max_memory || r->used + (nsize - osize) > r->limits.max_memory)) {
    if (r->refused_once && r->tripped == TRIP_NONE) {
      r->tripped = TRIP_MEMORY;
      if (r->main != NULL) stop_every_instruction(r->main);
    }
    r->refused_once = 1;
    return NULL;
  }
  p = realloc(ptr, nsize);
  if (p == NULL) return NULL; /* the worker's own limit: Lua raises "not enough memory" */
  if (nsize > osize) r->refused_once = 0;
  r->used = r->used - osize + nsize;
  return p;
}

/* limit_reached() for the environment's xpcall: true once any limit stopped the run. */
static int limit_reached(lua_State* L) {
  lua_pushboolean(L, run_of(L)->tripped != TRIP_NONE);
  return 1;
}

/* The protected part of a run: the environment, the chunk, the call, the result's type.
 * Leaves the result (a string or nil) on the stack. */
static int run_protected(lua_State* L) {
  run_state* r = (run_state*)lua_touserdata(L, 1);
  const lua_run_input* in = r->in;
  int type;
  lua_settop(L, 0);
  lua_env_open(L, &r->output, limit_reached);
  if (luaL_loadbufferx(L, in->source, in->source_len, in->chunk_name, "t") != LUA_OK) {
    return lua_error(L);
  }
  lua_pushlstring(L, (const char*)in->input, in->input_len);
  lua_pushvalue(L, -1);
  lua_setglobal(L, "input");
  lua_call(L, 1, 1); /* the input is also the chunk's `...` */
  type = lua_type(L, -1);
  if (type == LUA_TNUMBER) {
    lua_tolstring(L, -1, NULL);
  } else if (type != LUA_TSTRING && type != LUA_TNIL) {
    return luaL_error(L, "the script returned a %s (expected a string, a number or nothing)",
                      lua_typename(L, type));
  }
  return 1;
}

/* The error value at the top of L as text (no metamethod runs). */
static void copy_error(lua_State* L, char* message, size_t message_len) {
  const char* text = lua_tostring(L, -1);
  if (text != NULL) {
    snprintf(message, message_len, "%s", text);
  } else {
    snprintf(message, message_len, "(error object is a %s value)", luaL_typename(L, -1));
  }
}

static lua_run_outcome tripped_outcome(const run_state* r, char* message, size_t message_len) {
  switch (r->tripped) {
    case TRIP_INSTRUCTIONS:
      snprintf(message, message_len, "lua: instruction limit reached (%llu instructions)",
               (unsigned long long)r->limits.max_instructions);
      return LUA_RUN_INSTRUCTIONS;
    case TRIP_MEMORY:
      snprintf(message, message_len, "lua: memory limit reached (%llu bytes)",
               (unsigned long long)r->limits.max_memory);
      return LUA_RUN_MEMORY;
    case TRIP_CANCELLED:
      snprintf(message, message_len, "cancelled");
      return LUA_RUN_CANCELLED;
    case TRIP_NONE:
      break;
  }
  return LUA_RUN_OK;
}

lua_run_outcome lua_run_script(const lua_run_input* in, const lua_run_limits* limits,
                               int (*result_writer)(void* ctx, const void* data, size_t len),
                               void* ctx, int* writer_status, char* message, size_t message_len) {
  run_state r;
  lua_State* L;
  int status;
  lua_run_outcome outcome;
  memset(&r, 0, sizeof r);
  r.limits = *limits;
  r.in = in;
  r.output.host = in->host;
  r.output.call = in->call;
  message[0] = '\0';
  *writer_status = 0;
  L = lua_newstate(capped_alloc, &r);
  if (L == NULL) {
    r.tripped = TRIP_MEMORY;
    return tripped_outcome(&r, message, message_len);
  }
  r.main = L;
  *(run_state**)lua_getextraspace(L) = &r;
  lua_sethook(L, count_hook, LUA_MASKCOUNT, HOOK_EVERY);
  lua_pushcfunction(L, run_protected);
  lua_pushlightuserdata(L, &r);
  status = lua_pcall(L, 1, 1, 0);
  outcome = tripped_outcome(&r, message, message_len);
  if (outcome == LUA_RUN_OK && status == LUA_ERRMEM) {
    r.tripped = TRIP_MEMORY; /* refused without a retry (no collection possible) */
    outcome = tripped_outcome(&r, message, message_len);
  }
  if (outcome == LUA_RUN_OK && status != LUA_OK) {
    copy_error(L, message, message_len);
    outcome = LUA_RUN_ERROR;
  }
  if (outcome == LUA_RUN_OK) {
    size_t len = 0;
    const char* data = lua_isnil(L, -1) ? "" : lua_tolstring(L, -1, &len);
    *writer_status = result_writer(ctx, data, len);
  }
  /* Finalizers (__gc) run here, still under the hook and the cap. */
  lua_close(L);
  return outcome;
}

int lua_run_check_syntax(const char* source, size_t source_len, const char* chunk_name,
                         char* message, size_t message_len) {
  lua_State* L = luaL_newstate();
  int rc = 0;
  if (L == NULL) {
    snprintf(message, message_len, "lua: out of memory");
    return -1;
  }
  if (luaL_loadbufferx(L, source, source_len, chunk_name, "t") != LUA_OK) {
    copy_error(L, message, message_len);
    rc = -1;
  }
  lua_close(L);
  return rc;
}
