/* The most bytes a task's result may hold, as the host says in sp_task.max_result: what a
 * plugin that builds its result in memory checks before it builds, so that its work and its
 * memory are bounded by the output it may produce, not by what the input asks for. */
#ifndef SANDPOOL_PLUGINS_RESULT_BOUND_H
#define SANDPOOL_PLUGINS_RESULT_BOUND_H

#include <sandpool/plugin.h>

#include <stddef.h>
#include <stdint.h>

/* max_result's default (docs/configuration.md): assumed when the host does not say. */
#define SP_DEFAULT_MAX_RESULT ((uint64_t)8 << 20)

/* Returns the task's max_result: sp_task.max_result when the host set it (a host built
 * before that field, or a test's hand-made task, leaves it out or 0), else the default. */
static inline uint64_t sp_task_max_result(const sp_task* task) {
  if (task->size >= SP_TASK_HAS_MAX_RESULT && task->max_result != 0) return task->max_result;
  return SP_DEFAULT_MAX_RESULT;
}

#endif /* SANDPOOL_PLUGINS_RESULT_BOUND_H */
