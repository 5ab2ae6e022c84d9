/* A regex task's payload, split into its fields (docs/plugin-guide.md, "regex"):
 *   <command>[/<flags>] NUL <pattern> NUL <subject>                  (match, match-all)
 *   <command>[/<flags>] NUL <pattern> NUL <replacement> NUL <subject> (replace, replace-all)
 * The subject is everything after the last field's NUL, byte for byte. */
#ifndef SANDPOOL_REGEX_REQUEST_H
#define SANDPOOL_REGEX_REQUEST_H

#include <stddef.h>
#include <stdint.h>

typedef enum regex_command {
  REGEX_MATCH,
  REGEX_MATCH_ALL,
  REGEX_REPLACE,
  REGEX_REPLACE_ALL
} regex_command;

typedef struct regex_request {
  regex_command command;
  uint32_t compile_options; /* PCRE2_CASELESS ... from the flags */
  const uint8_t* pattern;
  size_t pattern_len;
  const uint8_t* replacement; /* replace, replace-all */
  size_t replacement_len;
  const uint8_t* subject;
  size_t subject_len;
} regex_request;

/* Splits the payload into *out (pointers into it). Returns 0, or -1 with why in err. */
int regex_request_parse(const uint8_t* payload, size_t len, regex_request* out, char* err,
                        size_t err_len);

#endif /* SANDPOOL_REGEX_REQUEST_H */
