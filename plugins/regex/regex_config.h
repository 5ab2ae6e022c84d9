/* The regex plugin's plugin_config (docs/plugin-guide.md, "regex"), parsed once in init. */
#ifndef SANDPOOL_REGEX_CONFIG_H
#define SANDPOOL_REGEX_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct regex_plugin_config {
  uint32_t match_limit;    /* PCRE2's match limit; the JIT honours it too */
  uint32_t depth_limit;    /* interpreter only: the JIT ignores it */
  uint32_t heap_limit_kib; /* interpreter only: the JIT ignores it */
  int jit;                 /* compile each pattern with the JIT */
  uint64_t jit_stack;      /* the JIT's stack, bytes */
} regex_plugin_config;

#define REGEX_DEFAULT_MATCH_LIMIT 10000000u /* PCRE2's own default */
#define REGEX_DEFAULT_DEPTH_LIMIT 10000000u /* PCRE2's own default */
#define REGEX_DEFAULT_HEAP_LIMIT_KIB (64u * 1024u)
#define REGEX_DEFAULT_JIT_STACK (1u << 20)

/* Parses the JSON object `json` (len bytes) into *out, defaults first. Returns 0, or -1
 * after writing a message naming the bad key into err (NUL-terminated). */
int regex_plugin_config_parse(const char* json, size_t len, regex_plugin_config* out, char* err,
                              size_t err_len);

#ifdef __cplusplus
}
#endif

#endif /* SANDPOOL_REGEX_CONFIG_H */
