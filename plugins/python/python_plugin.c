/* python: runs a Python function, named in plugin_config as "module:function", on each
 * task's payload, in CPython embedded in the worker (Debian's libpython3.11). The module is
 * imported in init, before the sandbox closes; a task calls handle(payload: bytes) and its
 * return value (bytes, str or None) is the result; an exception is the task's error,
 * sandpool.Retry asks for a retry, MemoryError is a resource_limit. docs/plugin-guide.md,
 * "python", is the user's side of this. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <sandpool/plugin.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "python_config.h"
#include "python_error.h"
#include "python_interp.h"
#include "python_module.h"

static const char* const kTypes[] = {"python", NULL};

typedef struct python_plugin {
  const sp_host_api* host;
  python_plugin_config config;
  PyObject* handler; /* touched with the GIL held only */
} python_plugin;

static int fail(const python_plugin* s, sp_call* call, int code, const char* msg) {
  s->host->set_error(call, msg, strlen(msg));
  return code;
}

/* The handler's return value into the result; SP_OK, or SP_FAIL after set_error. */
static int write_value(const python_plugin* s, sp_call* call, PyObject* value) {
  const char* data = NULL;
  Py_ssize_t len = 0;
  Py_buffer view;
  int rc = SP_OK;
  char msg[300];
  view.obj = NULL;
  if (value == Py_None) return SP_OK;
  if (PyUnicode_Check(value)) {
    data = PyUnicode_AsUTF8AndSize(value, &len);
    if (data == NULL) {
      PyErr_Clear();
      return fail(s, call, SP_FAIL,
                  "python: the handler returned a str that is not valid Unicode (lone "
                  "surrogates): encode it yourself");
    }
  } else if (PyObject_CheckBuffer(value)) {
    if (PyObject_GetBuffer(value, &view, PyBUF_SIMPLE) != 0) {
      PyErr_Clear();
      snprintf(msg, sizeof msg,
               "python: the handler returned a %.100s that is not one contiguous buffer: return "
               "bytes(...) of it",
               Py_TYPE(value)->tp_name);
      return fail(s, call, SP_FAIL, msg);
    }
    data = (const char*)view.buf;
    len = view.len;
  } else {
    PyErr_Clear();
    snprintf(msg, sizeof msg,
             "python: the handler returned an object of type %.100s (expected bytes, bytearray, "
             "memoryview, str or None)",
             Py_TYPE(value)->tp_name);
    return fail(s, call, SP_FAIL, msg);
  }
  /* -1: past max_result, and the host has already failed the attempt with that. */
  if (len > 0 && s->host->write_result(call, data, (size_t)len) != 0) rc = SP_FAIL;
  if (view.obj != NULL) PyBuffer_Release(&view);
  return rc;
}

/* The raised exception as the attempt's outcome and error. */
static int exception_outcome(const python_plugin* s, sp_call* call) {
  char text[4096];
  char limit[4096];
  switch (python_take_error(python_module_retry_type(), text, sizeof text)) {
    case PYTHON_ERROR_RETRY:
      return fail(s, call, SP_RETRY, text);
    case PYTHON_ERROR_MEMORY:
      snprintf(limit, sizeof limit,
               "python: out of memory, the worker's limits.memory reached: %.3900s", text);
      return fail(s, call, SP_LIMIT, limit);
    case PYTHON_ERROR_EXCEPTION:
      break;
  }
  return fail(s, call, SP_FAIL, text);
}

SP_EXPORT uint32_t sp_plugin_abi_version(void) { return SP_PLUGIN_ABI_VERSION; }

SP_EXPORT const char* const* sp_plugin_task_types(void) { return kTypes; }

/* Parses plugin_config, starts the interpreter and imports the handler's module (and the
 * preloads): all the files Python reads are read here, before the sandbox closes. */
SP_EXPORT int sp_plugin_init(const sp_host_api* host, const char* config_json, size_t config_len,
                             void** state) {
  char err[4096];
  python_plugin* s;
  if (host == NULL || host->abi_version != SP_PLUGIN_ABI_VERSION) return 1;
  s = (python_plugin*)calloc(1, sizeof *s);
  if (s == NULL) return 2;
  s->host = host;
  if (python_plugin_config_parse(config_json, config_len, &s->config, err, sizeof err) != 0) {
    host->log(NULL, 3, err, strlen(err));
    free(s);
    return 3;
  }
  if (!Py_IsInitialized() && python_module_register(host) != 0) {
    static const char kMsg[] = "python: cannot register the sandpool module";
    host->log(NULL, 3, kMsg, sizeof kMsg - 1);
    python_plugin_config_free(&s->config);
    free(s);
    return 4;
  }
  s->handler = python_interp_start(&s->config, err, sizeof err);
  if (s->handler == NULL) {
    host->log(NULL, 3, err, strlen(err));
    python_plugin_config_free(&s->config);
    free(s);
    return 5;
  }
  *state = s;
  return 0;
}

SP_EXPORT int sp_plugin_handle(void* state, const sp_task* task, sp_call* call) {
  const python_plugin* s = (const python_plugin*)state;
  PyGILState_STATE gil = PyGILState_Ensure();
  PyObject* payload;
  PyObject* value;
  int rc;
  python_module_begin_task(task, call);
  payload = PyBytes_FromStringAndSize((const char*)task->payload, (Py_ssize_t)task->payload_len);
  value = payload == NULL ? NULL : PyObject_CallOneArg(s->handler, payload);
  Py_XDECREF(payload);
  if (value == NULL) {
    rc = exception_outcome(s, call);
  } else {
    rc = write_value(s, call, value);
    Py_DECREF(value);
  }
  python_module_end_task();
  PyGILState_Release(gil);
  return rc;
}

SP_EXPORT void sp_plugin_shutdown(void* state) {
  python_plugin* s = (python_plugin*)state;
  python_interp_stop();
  python_plugin_config_free(&s->config);
  free(s);
}
