#include "python_module.h"

#include <string.h>

static const sp_host_api* g_host;
static sp_call* g_call;       /* NULL outside handle */
static const sp_task* g_task; /* NULL outside handle */
static PyObject* g_retry;     /* sandpool.Retry, owned by the module too */

/* The text of a str or the bytes of a bytes-like object; -1 with a TypeError otherwise. */
static int text_or_bytes(PyObject* o, Py_buffer* view, const char** data, Py_ssize_t* len) {
  view->obj = NULL;
  if (PyUnicode_Check(o)) {
    *data = PyUnicode_AsUTF8AndSize(o, len);
    return *data == NULL ? -1 : 0;
  }
  if (PyObject_GetBuffer(o, view, PyBUF_SIMPLE) != 0) return -1;
  *data = (const char*)view->buf;
  *len = view->len;
  return 0;
}

static int require_task(const char* what) {
  if (g_call != NULL) return 0;
  PyErr_Format(PyExc_RuntimeError, "sandpool.%s: no task is running (call it from the handler)",
               what);
  return -1;
}

static PyObject* sp_log(PyObject* self, PyObject* args, PyObject* kwargs) {
  static char* kwlist[] = {"message", "level", NULL};
  PyObject* message;
  int level = 1;
  Py_buffer view;
  const char* data;
  Py_ssize_t len;
  (void)self;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|i:log", kwlist, &message, &level)) {
    return NULL;
  }
  if (level < 0 || level > 3) {
    PyErr_SetString(PyExc_ValueError, "sandpool.log: level is 0 (debug) to 3 (error)");
    return NULL;
  }
  if (text_or_bytes(message, &view, &data, &len) != 0) return NULL;
  g_host->log(g_call, level, data, (size_t)len);
  if (view.obj != NULL) PyBuffer_Release(&view);
  Py_RETURN_NONE;
}

static PyObject* sp_progress(PyObject* self, PyObject* data_obj) {
  Py_buffer view;
  const char* data;
  Py_ssize_t len;
  (void)self;
  if (require_task("progress") != 0) return NULL;
  if (text_or_bytes(data_obj, &view, &data, &len) != 0) return NULL;
  g_host->progress(g_call, data, (size_t)len);
  if (view.obj != NULL) PyBuffer_Release(&view);
  Py_RETURN_NONE;
}

static PyObject* sp_heartbeat(PyObject* self, PyObject* unused) {
  (void)self;
  (void)unused;
  if (require_task("heartbeat") != 0) return NULL;
  g_host->heartbeat(g_call);
  Py_RETURN_NONE;
}

static PyObject* sp_cancelled(PyObject* self, PyObject* unused) {
  (void)self;
  (void)unused;
  if (require_task("cancelled") != 0) return NULL;
  return PyBool_FromLong(g_host->cancelled(g_call) != 0);
}

static PyObject* sp_attempt(PyObject* self, PyObject* unused) {
  (void)self;
  (void)unused;
  if (require_task("attempt") != 0) return NULL;
  return PyLong_FromUnsignedLong(g_task->attempt);
}

static PyObject* sp_task_id(PyObject* self, PyObject* unused) {
  (void)self;
  (void)unused;
  if (require_task("task_id") != 0) return NULL;
  return PyLong_FromUnsignedLongLong(g_task->id);
}

static PyMethodDef kMethods[] = {
    {"log", (PyCFunction)(void (*)(void))sp_log, METH_VARARGS | METH_KEYWORDS,
     "log(message, level=1): a line in the manager's log (0 debug .. 3 error)."},
    {"progress", sp_progress, METH_O,
     "progress(data): a progress update (bytes or str) to the submitter."},
    {"heartbeat", sp_heartbeat, METH_NOARGS, "heartbeat(): proves liveness."},
    {"cancelled", sp_cancelled, METH_NOARGS,
     "cancelled(): True once the submitter cancelled the task: stop soon."},
    {"attempt", sp_attempt, METH_NOARGS, "attempt(): 1 on the task's first try."},
    {"task_id", sp_task_id, METH_NOARGS,
     "task_id(): the task's id, the same on every attempt and replay."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef kModule = {
    PyModuleDef_HEAD_INIT,
    "sandpool",
    "The host of a sandpool task: Retry, log, progress, heartbeat, cancelled, attempt, "
    "task_id.",
    -1,
    kMethods,
    NULL,
    NULL,
    NULL,
    NULL};

static PyObject* init_module(void) {
  PyObject* m = PyModule_Create(&kModule);
  if (m == NULL) return NULL;
  if (g_retry == NULL) {
    g_retry = PyErr_NewExceptionWithDoc(
        "sandpool.Retry",
        "Raise it to have the task retried after the pool's backoff (outcome `error`); its "
        "text is the attempt's error.",
        NULL, NULL);
    if (g_retry == NULL) {
      Py_DECREF(m);
      return NULL;
    }
  }
  if (PyModule_AddObjectRef(m, "Retry", g_retry) != 0) {
    Py_DECREF(m);
    return NULL;
  }
  return m;
}

int python_module_register(const sp_host_api* host) {
  g_host = host;
  return PyImport_AppendInittab("sandpool", init_module);
}

void python_module_begin_task(const sp_task* task, sp_call* call) {
  g_task = task;
  g_call = call;
}

void python_module_end_task(void) {
  g_task = NULL;
  g_call = NULL;
}

PyObject* python_module_retry_type(void) { return g_retry; }
