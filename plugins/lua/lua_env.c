#include "lua_env.h"

#include <string.h>

#include <lauxlib.h>
#include <lualib.h>

static const luaL_Reg kAllowedLibraries[] = {{LUA_GNAME, luaopen_base},
                                             {LUA_COLIBNAME, luaopen_coroutine},
                                             {LUA_TABLIBNAME, luaopen_table},
                                             {LUA_STRLIBNAME, luaopen_string},
                                             {LUA_MATHLIBNAME, luaopen_math},
                                             {LUA_UTF8LIBNAME, luaopen_utf8},
                                             {NULL, NULL}};

/* Globals of the base library that reach the file system. (require and the package, io,
 * os and debug libraries are never opened.) */
static const char* const kRemovedGlobals[] = {"dofile", "loadfile", NULL};

/* load(chunk [, chunkname [, mode [, env]]]) with mode forced to "t": a binary chunk is
 * refused by Lua's own check ("attempt to load a binary chunk (mode is 't')"). Asking for
 * another mode is an error rather than silently ignored. Upvalue 1: the base library's load.
 * The argument count is kept as given, because load() treats an absent env unlike a nil
 * one. */
static int text_only_load(lua_State* L) {
  int n = lua_gettop(L);
  if (n >= 3 && !lua_isnil(L, 3)) {
    const char* mode = luaL_checkstring(L, 3);
    if (strcmp(mode, "t") != 0) {
      return luaL_error(L, "load: only text chunks may be loaded (mode \"t\"), not \"%s\"", mode);
    }
  }
  if (n < 3) {
    lua_settop(L, 3);
    n = 3;
  }
  lua_pushliteral(L, "t");
  lua_replace(L, 3);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, n, LUA_MULTRET);
  return lua_gettop(L);
}

/* print(...) as Lua's, tab-separated, but into the manager's log (level 1, info) instead of
 * stdout. Upvalue 1: the lua_env_output. */
static int log_print(lua_State* L) {
  const lua_env_output* out = (const lua_env_output*)lua_touserdata(L, lua_upvalueindex(1));
  const int n = lua_gettop(L);
  luaL_Buffer b;
  size_t len;
  const char* text;
  int i;
  luaL_buffinit(L, &b);
  for (i = 1; i <= n; ++i) {
    if (i > 1) luaL_addchar(&b, '\t');
    luaL_tolstring(L, i, NULL); /* honours __tostring, like print */
    luaL_addvalue(&b);
  }
  luaL_pushresult(&b);
  text = lua_tolstring(L, -1, &len);
  if (out->host != NULL && out->call != NULL) out->host->log(out->call, 1, text, len);
  return 0;
}

/* setmetatable(t, mt) refusing a metatable with a __gc field. Lua runs finalizers with its
 * debug hooks off, so the instruction count could not stop one that loops; and Lua marks an
 * object for finalization only when its metatable has __gc as it is set (a field added later
 * is ignored), which this raw check sees. Upvalue 1: the base library's setmetatable. */
static int setmetatable_without_gc(lua_State* L) {
  if (lua_type(L, 2) == LUA_TTABLE) {
    lua_pushliteral(L, "__gc");
    if (lua_rawget(L, 2) != LUA_TNIL) {
      return luaL_error(L,
                        "setmetatable: __gc metamethods are not allowed (a finalizer runs "
                        "where the instruction limit cannot stop it)");
    }
    lua_pop(L, 1);
  }
  lua_settop(L, 2);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, 2, 1);
  return 1;
}

/* xpcall(f, handler, ...) whose handler is skipped once a limit is reached. The limit's
 * error is raised from the count hook, while Lua has hooks off, and Lua calls the message
 * handler right there: a handler that loops would run unchecked. Written in Lua so that
 * xpcall stays yieldable inside coroutines. Called with the base library's xpcall and the
 * limit_reached function. */
static const char kXpcallWrapper[] =
    "local xpcall, limit_reached = ...\n"
    "return function(f, handler, ...)\n"
    "  return xpcall(f, function(e)\n"
    "    if limit_reached() then return e end\n"
    "    return handler(e)\n"
    "  end, ...)\n"
    "end\n";

/* string.rep(s, n [, sep]) that answers "" at once when s and sep are both empty. Lua's own
 * loops n times copying nothing, in C where the instruction count cannot see it:
 * ('').rep('', 1 << 40) would run for an hour. Every other call builds its string through
 * the capped allocator, so its work is bounded by max_memory. Upvalue 1: Lua's string.rep. */
static int rep_bounded(lua_State* L) {
  size_t len, sep_len = 0;
  luaL_checklstring(L, 1, &len);
  luaL_checkinteger(L, 2);
  if (!lua_isnoneornil(L, 3)) luaL_checklstring(L, 3, &sep_len);
  if (len == 0 && sep_len == 0) {
    lua_pushliteral(L, "");
    return 1;
  }
  lua_settop(L, 3);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, 3, 1);
  return 1;
}

/* Warnings (a finalizer's error, warn()) go nowhere: a script cannot reach stderr. */
static void drop_warning(void* ud, const char* msg, int tocont) {
  (void)ud;
  (void)msg;
  (void)tocont;
}

void lua_env_open(lua_State* L, lua_env_output* out, lua_CFunction limit_reached) {
  const luaL_Reg* lib;
  const char* const* name;
  for (lib = kAllowedLibraries; lib->func != NULL; ++lib) {
    luaL_requiref(L, lib->name, lib->func, 1);
    lua_pop(L, 1);
  }
  for (name = kRemovedGlobals; *name != NULL; ++name) {
    lua_pushnil(L);
    lua_setglobal(L, *name);
  }
  lua_getglobal(L, "load");
  lua_pushcclosure(L, text_only_load, 1);
  lua_setglobal(L, "load");
  lua_pushlightuserdata(L, out);
  lua_pushcclosure(L, log_print, 1);
  lua_setglobal(L, "print");
  lua_getglobal(L, "setmetatable");
  lua_pushcclosure(L, setmetatable_without_gc, 1);
  lua_setglobal(L, "setmetatable");
  if (luaL_loadbufferx(L, kXpcallWrapper, sizeof kXpcallWrapper - 1, "=xpcall", "t") != LUA_OK) {
    lua_error(L);
  }
  lua_getglobal(L, "xpcall");
  lua_pushcfunction(L, limit_reached);
  lua_call(L, 2, 1);
  lua_setglobal(L, "xpcall");
  lua_getglobal(L, LUA_STRLIBNAME);
  lua_pushnil(L);
  lua_setfield(L, -2, "dump");
  lua_getfield(L, -1, "rep");
  lua_pushcclosure(L, rep_bounded, 1);
  lua_setfield(L, -2, "rep");
  lua_pop(L, 1);
  lua_setwarnf(L, drop_warning, NULL);
}
