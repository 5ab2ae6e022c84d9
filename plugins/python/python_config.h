/* The python plugin's plugin_config (docs/plugin-guide.md, "python"), parsed once in init. */
#ifndef SANDPOOL_PYTHON_CONFIG_H
#define SANDPOOL_PYTHON_CONFIG_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct python_plugin_config {
  char* module;   /* the handler's module, "pkg.mod" (NUL-terminated) */
  char* function; /* the handler's name in it: a callable taking bytes */
  char** path;    /* directories put in front of sys.path, in order */
  size_t path_count;
  char** preload; /* modules imported at init besides the handler's */
  size_t preload_count;
  char** module_names;   /* modules given as source in plugin_config.modules, */
  char** module_sources; /* importable at init and after */
  size_t module_count;
  int late_imports; /* 1: imports after init go to the path finder (relaxed only) */
  int site;         /* 1: import site (Debian's dist-packages on sys.path) */
} python_plugin_config;

/* Parses the JSON object `json` (len bytes) into *out, defaults first. Returns 0, or -1
 * after writing a message naming the bad key into err (err_len bytes, NUL-terminated); *out
 * then holds nothing to free. */
int python_plugin_config_parse(const char* json, size_t len, python_plugin_config* out, char* err,
                               size_t err_len);

/* Frees what parse allocated; safe on a zeroed config. */
void python_plugin_config_free(python_plugin_config* config);

#ifdef __cplusplus
}
#endif

#endif /* SANDPOOL_PYTHON_CONFIG_H */
