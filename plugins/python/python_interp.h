/* The embedded CPython of a worker: started once in init with an isolated configuration,
 * the handler's module and the preloads imported, imports after init refused (unless
 * late_imports), and the GIL released until a task takes it. */
#ifndef SANDPOOL_PYTHON_INTERP_H
#define SANDPOOL_PYTHON_INTERP_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stddef.h>

#include "python_config.h"

/* Starts the interpreter and returns the handler (a new reference), the GIL released; or
 * NULL after writing why into err (err_len bytes): "python: <what>: <exception>". Once per
 * process (CPython cannot be started twice reliably). */
PyObject* python_interp_start(const python_plugin_config* config, char* err, size_t err_len);

/* Flushes sys.stdout and sys.stderr; the interpreter is not finalized (the worker exits
 * next, and finalizing would close files, which the strict profile forbids). */
void python_interp_stop(void);

#endif /* SANDPOOL_PYTHON_INTERP_H */
