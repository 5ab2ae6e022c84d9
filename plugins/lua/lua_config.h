/* The lua plugin's plugin_config (docs/plugin-guide.md, "lua"), parsed once in init. */
#ifndef SANDPOOL_LUA_CONFIG_H
#define SANDPOOL_LUA_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One script of plugin_config.scripts: a task runs it with the payload "@name\0input". */
typedef struct lua_named_script {
  char* name;   /* NUL-terminated */
  char* source; /* NUL-terminated too, but may hold NULs: use source_len */
  size_t source_len;
} lua_named_script;

typedef struct lua_plugin_config {
  uint64_t max_instructions; /* VM instructions per task; 0: no limit */
  uint64_t max_memory;       /* bytes the Lua allocator may hold per task; 0: no limit */
  int allow_payload_scripts; /* 0: only named scripts run */
  lua_named_script* scripts;
  size_t script_count;
} lua_plugin_config;

#define LUA_PLUGIN_DEFAULT_MAX_INSTRUCTIONS 100000000ULL /* ~0.3 to 1 s of a busy loop */
#define LUA_PLUGIN_DEFAULT_MAX_MEMORY (64ULL << 20)

/* Parses the JSON object `json` (len bytes) into *out, defaults first. Returns 0, or -1
 * after writing a message naming the bad key into err (err_len bytes, NUL-terminated); *out
 * then holds nothing to free. */
int lua_plugin_config_parse(const char* json, size_t len, lua_plugin_config* out, char* err,
                            size_t err_len);

/* Frees what parse allocated; safe on a zeroed config. */
void lua_plugin_config_free(lua_plugin_config* config);

/* The named script, or NULL. */
const lua_named_script* lua_plugin_config_find(const lua_plugin_config* config, const char* name,
                                               size_t name_len);

#ifdef __cplusplus
}
#endif

#endif /* SANDPOOL_LUA_CONFIG_H */
