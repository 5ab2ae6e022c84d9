#define PCRE2_CODE_UNIT_WIDTH 8
#include "regex_request.h"

#include <stdio.h>
#include <string.h>

#include <pcre2.h>

/* The next field of [*at, end) up to a NUL; advances *at past the NUL. 0, or -1 without one. */
static int next_field(const uint8_t** at, const uint8_t* end, const uint8_t** field, size_t* len) {
  const uint8_t* nul = (const uint8_t*)memchr(*at, '\0', (size_t)(end - *at));
  if (nul == NULL) return -1;
  *field = *at;
  *len = (size_t)(nul - *at);
  *at = nul + 1;
  return 0;
}

static int parse_command(const uint8_t* text, size_t len, regex_request* out) {
  static const struct {
    const char* name;
    regex_command command;
  } kCommands[] = {{"match", REGEX_MATCH},
                   {"match-all", REGEX_MATCH_ALL},
                   {"replace", REGEX_REPLACE},
                   {"replace-all", REGEX_REPLACE_ALL}};
  const uint8_t* slash = (const uint8_t*)memchr(text, '/', len);
  const size_t name_len = slash == NULL ? len : (size_t)(slash - text);
  size_t i;
  int found = 0;
  for (i = 0; i < sizeof kCommands / sizeof kCommands[0]; ++i) {
    if (strlen(kCommands[i].name) == name_len && memcmp(kCommands[i].name, text, name_len) == 0) {
      out->command = kCommands[i].command;
      found = 1;
    }
  }
  if (!found) return -1;
  out->compile_options = 0;
  for (i = name_len + 1; slash != NULL && i < len; ++i) {
    switch (text[i]) {
      case 'i':
        out->compile_options |= PCRE2_CASELESS;
        break;
      case 'm':
        out->compile_options |= PCRE2_MULTILINE;
        break;
      case 's':
        out->compile_options |= PCRE2_DOTALL;
        break;
      case 'x':
        out->compile_options |= PCRE2_EXTENDED;
        break;
      case 'u':
        out->compile_options |= PCRE2_UTF | PCRE2_UCP;
        break;
      default:
        return -2;
    }
  }
  return 0;
}

int regex_request_parse(const uint8_t* payload, size_t len, regex_request* out, char* err,
                        size_t err_len) {
  const uint8_t* at = payload;
  const uint8_t* end = payload + len;
  const uint8_t* command;
  size_t command_len;
  int rc;
  memset(out, 0, sizeof *out);
  if (next_field(&at, end, &command, &command_len) != 0) {
    snprintf(err, err_len,
             "regex: the payload is <command> NUL <pattern> NUL [<replacement> NUL] <subject>; "
             "found no NUL");
    return -1;
  }
  rc = parse_command(command, command_len, out);
  if (rc != 0) {
    snprintf(err, err_len,
             rc == -1 ? "regex: unknown command '%.*s' (match, match-all, replace, replace-all)"
                      : "regex: unknown flag in '%.*s' (i, m, s, x, u)",
             (int)(command_len > 64 ? 64 : command_len), (const char*)command);
    return -1;
  }
  if (next_field(&at, end, &out->pattern, &out->pattern_len) != 0) {
    snprintf(err, err_len, "regex: no NUL after the pattern");
    return -1;
  }
  if ((out->command == REGEX_REPLACE || out->command == REGEX_REPLACE_ALL) &&
      next_field(&at, end, &out->replacement, &out->replacement_len) != 0) {
    snprintf(err, err_len, "regex: %s needs <replacement> NUL before the subject",
             out->command == REGEX_REPLACE ? "replace" : "replace-all");
    return -1;
  }
  out->subject = at;
  out->subject_len = (size_t)(end - at);
  return 0;
}
