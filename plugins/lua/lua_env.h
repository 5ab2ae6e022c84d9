/* The environment a script sees: the base, string, table, math, utf8 and coroutine
 * libraries, without what reaches outside the state or loads bytecode. */
#ifndef SANDPOOL_LUA_ENV_H
#define SANDPOOL_LUA_ENV_H

#include <sandpool/plugin.h>

#include <lua.h>

/* Where print() goes: host->log(call, 1, ...) (either may be NULL: print then drops). */
typedef struct lua_env_output {
  const sp_host_api* host;
  sp_call* call;
} lua_env_output;

/* Opens the allowed libraries into L's globals and removes or replaces the rest: no os,
 * io, debug, package, require, dofile, loadfile; load() compiles text only (mode "t");
 * string.dump is gone; setmetatable refuses __gc (finalizers run with hooks off); xpcall
 * skips its handler once `limit_reached` (a lua_CFunction returning a boolean) says so;
 * print() logs through `out`, which must outlive L. Raises a Lua error (out of memory) like
 * any API call: call it in protected mode. */
void lua_env_open(lua_State* L, lua_env_output* out, lua_CFunction limit_reached);

#endif /* SANDPOOL_LUA_ENV_H */
