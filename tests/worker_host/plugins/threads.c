/* A plugin with threads of its own, for the hung-task backtrace of every thread: init starts
 * two helper threads that park in a condition wait nobody signals, and a task spins forever
 * in the task thread. The functions are exported and never inlined, so dladdr names them. */
#define _POSIX_C_SOURCE 200809L
#include <sandpool/plugin.h>

#include <pthread.h>
#include <stddef.h>

static const char* const kTypes[] = {"spin", NULL};
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_never = PTHREAD_COND_INITIALIZER;

SP_EXPORT uint32_t sp_plugin_abi_version(void) { return SP_PLUGIN_ABI_VERSION; }
SP_EXPORT const char* const* sp_plugin_task_types(void) { return kTypes; }

SP_EXPORT __attribute__((noinline)) void threads_helper_park(void) {
  pthread_mutex_lock(&g_lock);
  for (;;) pthread_cond_wait(&g_never, &g_lock);
}

static void* helper_main(void* arg) {
  (void)arg;
  threads_helper_park();
  return NULL;
}

SP_EXPORT int sp_plugin_init(const sp_host_api* host, const char* config_json, size_t config_len,
                             void** state) {
  int i;
  (void)host;
  (void)config_json;
  (void)config_len;
  *state = NULL;
  for (i = 0; i < 2; ++i) {
    pthread_t t;
    if (pthread_create(&t, NULL, helper_main, NULL) != 0) return 1;
    pthread_detach(t);
  }
  return 0;
}

SP_EXPORT __attribute__((noinline)) void threads_task_spin(void) {
  volatile unsigned long spins = 0;
  for (;;) spins++;
}

SP_EXPORT int sp_plugin_handle(void* state, const sp_task* task, sp_call* call) {
  (void)state;
  (void)task;
  (void)call;
  threads_task_spin();
  return SP_OK;
}
