/* regex: a user's PCRE2 pattern over an input, matched (offsets of the match and its groups)
 * or replaced, with the JIT on and PCRE2's match limit, the interpreter's depth and heap
 * limits and the JIT's stack size from plugin_config. A limit reached is SP_LIMIT.
 * docs/plugin-guide.md, "regex", is the user's side of this. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <sandpool/plugin.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pcre2.h>

#include "regex_config.h"
#include "regex_request.h"

static const char* const kTypes[] = {"regex", NULL};

/* The largest result a replacement may build before write_result sees it. */
#define MAX_REPLACED_BYTES ((PCRE2_SIZE)256 << 20)

typedef struct regex_plugin {
  const sp_host_api* host;
  regex_plugin_config config;
  pcre2_match_context* match_context; /* the limits and the JIT stack */
  pcre2_jit_stack* jit_stack;
  int jit_reported; /* whether the first JIT compile's outcome was logged */
} regex_plugin;

/* One task's call: where errors and results go. */
typedef struct regex_call {
  const regex_plugin* plugin;
  sp_call* call;
} regex_call;

static int fail(const regex_call* c, int code, const char* msg) {
  c->plugin->host->set_error(c->call, msg, strlen(msg));
  return code;
}

/* A pcre2_match/pcre2_substitute error as the task's answer: a limit is SP_LIMIT. */
static int match_error(const regex_call* c, int rc) {
  const regex_plugin_config* k = &c->plugin->config;
  PCRE2_UCHAR text[256];
  char msg[512];
  pcre2_get_error_message(rc, text, sizeof text);
  switch (rc) {
    case PCRE2_ERROR_MATCHLIMIT:
      snprintf(msg, sizeof msg, "regex: %s (match_limit %" PRIu32 ")", (const char*)text,
               k->match_limit);
      return fail(c, SP_LIMIT, msg);
    case PCRE2_ERROR_DEPTHLIMIT:
      snprintf(msg, sizeof msg, "regex: %s (depth_limit %" PRIu32 ")", (const char*)text,
               k->depth_limit);
      return fail(c, SP_LIMIT, msg);
    case PCRE2_ERROR_HEAPLIMIT:
      snprintf(msg, sizeof msg, "regex: %s (heap_limit %" PRIu32 " KiB)", (const char*)text,
               k->heap_limit_kib);
      return fail(c, SP_LIMIT, msg);
    case PCRE2_ERROR_JIT_STACKLIMIT:
      snprintf(msg, sizeof msg, "regex: %s (jit_stack %" PRIu64 " bytes)", (const char*)text,
               k->jit_stack);
      return fail(c, SP_LIMIT, msg);
    default:
      snprintf(msg, sizeof msg, "regex: %s", (const char*)text);
      return fail(c, SP_FAIL, msg);
  }
}

/* Appends "start end" for the match and each group ("-1 -1" when unset), then a newline. */
static int write_offsets(const regex_call* c, pcre2_match_data* md, int pairs) {
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
  char line[64];
  int i;
  for (i = 0; i < pairs; ++i) {
    int n;
    if (ov[2 * i] == PCRE2_UNSET) {
      n = snprintf(line, sizeof line, "%s-1 -1", i == 0 ? "" : " ");
    } else {
      n = snprintf(line, sizeof line, "%s%zu %zu", i == 0 ? "" : " ", (size_t)ov[2 * i],
                   (size_t)ov[2 * i + 1]);
    }
    if (c->plugin->host->write_result(c->call, line, (size_t)n) != 0) return -1;
  }
  return c->plugin->host->write_result(c->call, "\n", 1);
}

/* The offset one character past `at`: one byte, or one UTF-8 sequence in UTF mode. */
static PCRE2_SIZE next_char(const regex_request* q, PCRE2_SIZE at) {
  ++at;
  if (q->compile_options & PCRE2_UTF) {
    while (at < q->subject_len && (q->subject[at] & 0xc0) == 0x80) ++at;
  }
  return at;
}

/* match (the first) or match-all (every one, empty matches advancing as Perl does). */
static int run_match(const regex_call* c, const regex_request* q, pcre2_code* code) {
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(code, NULL);
  PCRE2_SIZE offset = 0;
  uint32_t options = 0;
  int result = SP_OK;
  unsigned long matches = 0;
  if (md == NULL) return fail(c, SP_FAIL, "regex: out of memory");
  for (;;) {
    const PCRE2_SIZE* ov;
    const int rc = pcre2_match(code, q->subject, q->subject_len, offset, options, md,
                               c->plugin->match_context);
    if (rc == PCRE2_ERROR_NOMATCH) {
      if (options == 0 || offset >= q->subject_len) break;
      offset = next_char(q, offset); /* no non-empty match here: move on */
      options = 0;
      continue;
    }
    if (rc < 0) {
      result = match_error(c, rc);
      break;
    }
    ov = pcre2_get_ovector_pointer(md);
    if (ov[0] > ov[1]) {
      result = fail(c, SP_FAIL, "regex: \\K in an assertion put the match's start after its end");
      break;
    }
    if (write_offsets(c, md, rc) != 0) {
      result = SP_FAIL; /* the host named it: the result exceeds max_result */
      break;
    }
    if (q->command == REGEX_MATCH) break;
    if (++matches % 4096 == 0) {
      c->plugin->host->heartbeat(c->call);
      if (c->plugin->host->cancelled(c->call)) {
        result = fail(c, SP_FAIL, "cancelled");
        break;
      }
    }
    offset = ov[1];
    options = ov[0] == ov[1] ? PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED : 0;
  }
  pcre2_match_data_free(md);
  return result;
}

/* replace (the first match) or replace-all, through pcre2_substitute ($1, ${name}, $$). */
static int run_replace(const regex_call* c, const regex_request* q, pcre2_code* code) {
  uint32_t options = PCRE2_SUBSTITUTE_OVERFLOW_LENGTH;
  PCRE2_SIZE size = q->subject_len + q->subject_len / 2 + 256;
  int result = SP_OK;
  if (q->command == REGEX_REPLACE_ALL) options |= PCRE2_SUBSTITUTE_GLOBAL;
  for (;;) {
    PCRE2_SIZE out_len = size;
    PCRE2_UCHAR* out = (PCRE2_UCHAR*)malloc(size);
    int rc;
    if (out == NULL) return fail(c, SP_FAIL, "regex: out of memory for the result");
    rc = pcre2_substitute(code, q->subject, q->subject_len, 0, options, NULL,
                          c->plugin->match_context, q->replacement, q->replacement_len, out,
                          &out_len);
    if (rc == PCRE2_ERROR_NOMEMORY && out_len > size && out_len <= MAX_REPLACED_BYTES) {
      free(out);
      size = out_len; /* OVERFLOW_LENGTH: what it needs */
      continue;
    }
    if (rc == PCRE2_ERROR_NOMEMORY) {
      result = fail(c, SP_FAIL, "regex: the replaced text would exceed 256 MiB");
    } else if (rc < 0) {
      result = match_error(c, rc);
    } else if (c->plugin->host->write_result(c->call, out, out_len) != 0) {
      result = SP_FAIL;
    }
    free(out);
    return result;
  }
}

/* Compiles the task's pattern (and JIT-compiles it when configured); NULL after failing the
 * task with PCRE2's message and offset. */
static pcre2_code* compile(regex_plugin* s, const regex_call* c, const regex_request* q,
                           int* rc_out) {
  int err;
  PCRE2_SIZE at;
  pcre2_code* code = pcre2_compile(q->pattern, q->pattern_len, q->compile_options, &err, &at, NULL);
  if (code == NULL) {
    PCRE2_UCHAR text[256];
    char msg[400];
    pcre2_get_error_message(err, text, sizeof text);
    snprintf(msg, sizeof msg, "regex: pattern error at offset %zu: %s", (size_t)at,
             (const char*)text);
    *rc_out = fail(c, SP_FAIL, msg);
    return NULL;
  }
  if (s->config.jit) {
    const int jrc = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
    if (!s->jit_reported) {
      /* Once per worker: whether the sandbox let the JIT map executable memory. */
      PCRE2_UCHAR text[256];
      char msg[400];
      if (jrc == 0) {
        snprintf(msg, sizeof msg, "regex: the JIT compiles patterns");
      } else {
        pcre2_get_error_message(jrc, text, sizeof text);
        snprintf(msg, sizeof msg, "regex: JIT unavailable (%s); the interpreter matches",
                 (const char*)text);
      }
      s->host->log(c->call, jrc == 0 ? 1 : 2, msg, strlen(msg));
      s->jit_reported = 1;
    }
  }
  return code;
}

SP_EXPORT uint32_t sp_plugin_abi_version(void) { return SP_PLUGIN_ABI_VERSION; }

SP_EXPORT const char* const* sp_plugin_task_types(void) { return kTypes; }

SP_EXPORT int sp_plugin_init(const sp_host_api* host, const char* config_json, size_t config_len,
                             void** state) {
  char err[512];
  regex_plugin* s;
  if (host == NULL || host->abi_version != SP_PLUGIN_ABI_VERSION) return 1;
  s = (regex_plugin*)calloc(1, sizeof *s);
  if (s == NULL) return 2;
  s->host = host;
  if (regex_plugin_config_parse(config_json, config_len, &s->config, err, sizeof err) != 0) {
    host->log(NULL, 3, err, strlen(err));
    free(s);
    return 3;
  }
  s->match_context = pcre2_match_context_create(NULL);
  s->jit_stack = pcre2_jit_stack_create(32 * 1024, (PCRE2_SIZE)s->config.jit_stack, NULL);
  if (s->match_context == NULL || s->jit_stack == NULL) {
    static const char msg[] = "regex: out of memory in init";
    host->log(NULL, 3, msg, sizeof msg - 1);
    pcre2_match_context_free(s->match_context);
    pcre2_jit_stack_free(s->jit_stack);
    free(s);
    return 2;
  }
  pcre2_set_match_limit(s->match_context, s->config.match_limit);
  pcre2_set_depth_limit(s->match_context, s->config.depth_limit);
  pcre2_set_heap_limit(s->match_context, s->config.heap_limit_kib);
  pcre2_jit_stack_assign(s->match_context, NULL, s->jit_stack);
  *state = s;
  return 0;
}

SP_EXPORT int sp_plugin_handle(void* state, const sp_task* task, sp_call* call) {
  regex_plugin* s = (regex_plugin*)state;
  regex_call c;
  regex_request q;
  pcre2_code* code;
  char err[256];
  int rc = SP_FAIL;
  c.plugin = s;
  c.call = call;
  if (regex_request_parse(task->payload, task->payload_len, &q, err, sizeof err) != 0) {
    return fail(&c, SP_FAIL, err);
  }
  code = compile(s, &c, &q, &rc);
  if (code == NULL) return rc;
  if (q.command == REGEX_MATCH || q.command == REGEX_MATCH_ALL) {
    rc = run_match(&c, &q, code);
  } else {
    rc = run_replace(&c, &q, code);
  }
  pcre2_code_free(code);
  return rc;
}

SP_EXPORT void sp_plugin_shutdown(void* state) {
  regex_plugin* s = (regex_plugin*)state;
  pcre2_match_context_free(s->match_context);
  pcre2_jit_stack_free(s->jit_stack);
  free(s);
}
