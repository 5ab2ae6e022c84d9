/* A hostile plugin that writes terminal escape sequences and forged log lines into the
 * manager's log, through every channel a worker's text reaches it by (tests/hostile/
 * log_forge_test.cpp). Strict C99 against <sandpool/plugin.h> only.
 *
 * Types:
 *   echo        result = payload
 *   forge_log   host->log (info and error) and stdout lines carrying ESC sequences, BEL,
 *               a NUL and a newline followed by a forged log line; result "forged"
 *
 * Init: "init_forge" in the pool's plugin_config logs a forged error line and fails, so the
 * pool's start error carries the plugin's words. */
#define _GNU_SOURCE
#include <sandpool/plugin.h>

#include <stdio.h>
#include <string.h>

static const char* const kTypes[] = {"echo", "forge_log", NULL};
static const sp_host_api* host;

/* ESC[2J clears the screen, OSC 0 sets the terminal's title, BEL ends it; the newline starts
 * a line that looks like one of the manager's own. */
static const char kForged[] =
    "forged by the plugin \x1b[2J\x1b]0;pwned\x07 tail\n"
    "2030-01-01 00:00:00.000 [critical] poold: forged line";

SP_EXPORT uint32_t sp_plugin_abi_version(void) { return SP_PLUGIN_ABI_VERSION; }
SP_EXPORT const char* const* sp_plugin_task_types(void) { return kTypes; }

SP_EXPORT int sp_plugin_init(const sp_host_api* h, const char* config_json, size_t config_len,
                             void** state) {
  (void)config_len;
  host = h;
  *state = NULL;
  if (strstr(config_json, "init_forge") != NULL) {
    host->log(NULL, 3, kForged, sizeof kForged - 1);
    return 1;
  }
  return 0;
}

SP_EXPORT int sp_plugin_handle(void* state, const sp_task* task, sp_call* call) {
  static const char nul_line[] = "stdout with a \0 NUL and \x1b[31mcolour\x1b[0m\n";
  (void)state;
  if (task->type_len == 4 && memcmp(task->type, "echo", 4) == 0) {
    return host->write_result(call, task->payload, task->payload_len) == 0 ? SP_OK : SP_FAIL;
  }
  host->log(call, 1, kForged, sizeof kForged - 1);
  host->log(call, 3, kForged, sizeof kForged - 1);
  fwrite(nul_line, 1, sizeof nul_line - 1, stdout);
  fflush(stdout);
  return host->write_result(call, "forged", 6) == 0 ? SP_OK : SP_FAIL;
}
