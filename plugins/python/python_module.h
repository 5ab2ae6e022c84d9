/* The `sandpool` module a handler imports (built into the plugin, registered before the
 * interpreter starts): the Retry exception and the host API of the running task. One
 * interpreter per process, one task at a time: the running task is plain static state,
 * touched only with the GIL held. */
#ifndef SANDPOOL_PYTHON_MODULE_H
#define SANDPOOL_PYTHON_MODULE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <sandpool/plugin.h>

/* Registers the module as a built-in (PyImport_AppendInittab): call before the interpreter
 * starts. `host` must outlive the interpreter. Returns 0, or -1 when Python refused. */
int python_module_register(const sp_host_api* host);

/* The running task, seen by sandpool.log/progress/heartbeat/cancelled/attempt/task_id;
 * end_task forgets it (those calls then refuse or go to the log without a call). */
void python_module_begin_task(const sp_task* task, sp_call* call);
void python_module_end_task(void);

/* sandpool.Retry (borrowed), or NULL before the module was imported. */
PyObject* python_module_retry_type(void);

#endif /* SANDPOOL_PYTHON_MODULE_H */
