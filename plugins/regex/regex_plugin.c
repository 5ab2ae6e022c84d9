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

#include "common/result_bound.h"
#include "regex_config.h"
#include "regex_request.h"

static const char* const kTypes[] = {"regex", NULL};

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

/* A replacement's output, streamed into the task's result: every byte is counted against
 * max_result before it is built, so a replace bomb fails at the first match that would pass
 * it. The only buffer is one match's expanded replacement, at most what is left of
 * max_result. */
typedef struct replace_output {
  const regex_call* c;
  uint64_t max_result; /* the task's */
  int counting;        /* the first pass: count the bytes, hand nothing to write_result */
  uint64_t written;    /* bytes counted, or handed to write_result, so far */
  PCRE2_UCHAR* buffer; /* one match's replacement (and the NUL PCRE2 adds) */
  size_t buffer_size;
  /* Replacement bytes expanded, over every match: expanding reads all of the replacement even
   * when it expands to little ("$1" repeated over an empty group), so the reading is bounded
   * by max_result too. */
  uint64_t scanned;
} replace_output;

static int over_max_result(const replace_output* o) {
  char msg[160];
  snprintf(msg, sizeof msg, "regex: the replaced text would exceed max_result (%" PRIu64 " bytes)",
           o->max_result);
  return fail(o->c, SP_FAIL, msg);
}

/* Appends `len` bytes; SP_OK, or the task's failure when they would pass max_result. */
static int emit(replace_output* o, const void* data, size_t len) {
  if (len > o->max_result - o->written) return over_max_result(o);
  if (len == 0) return SP_OK;
  if (!o->counting && o->c->plugin->host->write_result(o->c->call, data, len) != 0) {
    return SP_FAIL; /* the host named it: the result exceeds max_result */
  }
  o->written += len;
  return SP_OK;
}

/* Expands the replacement for the match in `md` (pcre2_substitute with SUBSTITUTE_MATCHED and
 * REPLACEMENT_ONLY: PCRE2's own $1, ${name}, $$ syntax and errors) and appends it. PCRE2
 * builds a replacement a byte at a time (about 6 ns a byte for a group) and, without
 * OVERFLOW_LENGTH, stops at the first byte that does not fit the buffer: with OVERFLOW_LENGTH
 * it would go on through the whole would-be replacement (60,000 "$1" of a 5 MB group: 300 GB,
 * minutes). So the buffer is 64 KiB, then, for the first replacement that does not fit, what
 * is left of max_result: a replacement that would pass it costs at most max_result bytes of
 * work, and is refused. */
static int emit_replacement(replace_output* o, const regex_request* q, pcre2_code* code,
                            pcre2_match_data* md) {
  const uint32_t options = PCRE2_SUBSTITUTE_MATCHED | PCRE2_SUBSTITUTE_REPLACEMENT_ONLY;
  const uint64_t room = o->max_result - o->written + 1; /* + the NUL PCRE2 ends it with */
  for (;;) {
    PCRE2_SIZE out_len = o->buffer_size < room ? o->buffer_size : (PCRE2_SIZE)room;
    const int rc = pcre2_substitute(code, q->subject, q->subject_len, 0, options, md,
                                    o->c->plugin->match_context, q->replacement, q->replacement_len,
                                    o->buffer, &out_len);
    if (rc >= 0) {
      const int emitted = emit(o, o->buffer, out_len);
      o->scanned += q->replacement_len;
      if (emitted == SP_OK && o->scanned > o->max_result) {
        char msg[200];
        snprintf(msg, sizeof msg,
                 "regex: expanding the replacement at every match would read more than "
                 "max_result (%" PRIu64 " bytes) of it in all",
                 o->max_result);
        return fail(o->c, SP_FAIL, msg);
      }
      return emitted;
    }
    if (rc != PCRE2_ERROR_NOMEMORY) return match_error(o->c, rc);
    if (o->buffer_size >= room) return over_max_result(o);
    free(o->buffer);
    o->buffer_size = (size_t)room;
    o->buffer = (PCRE2_UCHAR*)malloc(o->buffer_size);
    if (o->buffer == NULL) {
      o->buffer_size = 0;
      return fail(o->c, SP_FAIL, "regex: out of memory for the result");
    }
  }
}

/* One pass of replace (the first match) or replace-all: the matches found as run_match finds
 * them (empty matches advancing one character, as pcre2_substitute's global mode and Perl
 * do), the subject between them copied, each match replaced, into `o`. */
static int replace_pass(replace_output* o, const regex_request* q, pcre2_code* code,
                        pcre2_match_data* md) {
  const regex_call* c = o->c;
  PCRE2_SIZE offset = 0; /* where the next match is looked for */
  PCRE2_SIZE copied = 0; /* the subject before this is in the result */
  uint32_t options = 0;
  unsigned long matches = 0;
  int result = SP_OK;
  o->written = 0;
  o->scanned = 0;
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
    if (ov[0] < copied) { /* \K in a lookbehind, before the previous match's end */
      result = match_error(c, PCRE2_ERROR_BADSUBSPATTERN);
      break;
    }
    result = emit(o, q->subject + copied, ov[0] - copied);
    if (result == SP_OK) result = emit_replacement(o, q, code, md);
    if (result != SP_OK) break;
    copied = ov[1];
    if (q->command == REGEX_REPLACE) break;
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
  if (result == SP_OK) result = emit(o, q->subject + copied, q->subject_len - copied);
  return result;
}

/* replace or replace-all in two passes: the first counts the replaced text's bytes into one
 * reused buffer (a match's replacement at a time) and touches no other memory; only a text
 * that fits max_result is built again, into the result. A replace bomb so fails in the first
 * pass: its cost is the reading and expanding up to max_result, not the page faults of
 * max_result bytes of result (on a VM, most of the cost). A text that fits costs two passes. */
static int run_replace(const regex_call* c, const regex_request* q, pcre2_code* code,
                       uint64_t max_result) {
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(code, NULL);
  replace_output o = {c, max_result, 1, 0, NULL, 0, 0};
  int result;
  if (md == NULL) return fail(c, SP_FAIL, "regex: out of memory");
  o.buffer_size = 64 * 1024;
  o.buffer = (PCRE2_UCHAR*)malloc(o.buffer_size);
  if (o.buffer == NULL) {
    pcre2_match_data_free(md);
    return fail(c, SP_FAIL, "regex: out of memory for the result");
  }
  result = replace_pass(&o, q, code, md);
  if (result == SP_OK) {
    o.counting = 0;
    result = replace_pass(&o, q, code, md);
  }
  free(o.buffer);
  pcre2_match_data_free(md);
  return result;
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
    rc = run_replace(&c, &q, code, sp_task_max_result(task));
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
