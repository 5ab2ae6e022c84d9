#include "python_error.h"

#include <stdio.h>
#include <string.h>

/* str(o) as UTF-8 into buf, or `fallback` if that fails (the failure is cleared). */
static void str_into(PyObject* o, const char* fallback, char* buf, size_t len) {
  PyObject* s = o == NULL ? NULL : PyObject_Str(o);
  const char* text = s == NULL ? NULL : PyUnicode_AsUTF8(s);
  if (text == NULL) PyErr_Clear();
  snprintf(buf, len, "%s", text != NULL ? text : fallback);
  Py_XDECREF(s);
}

static PyObject* attr(PyObject* o, const char* name) {
  PyObject* v = o == NULL ? NULL : PyObject_GetAttrString(o, name);
  if (v == NULL) PyErr_Clear();
  return v;
}

/* "file:line, in function" of one traceback entry into buf; 1 when its file is real. */
static int describe_entry(PyObject* tb, char* buf, size_t len) {
  PyObject* line = attr(tb, "tb_lineno");
  PyObject* frame = attr(tb, "tb_frame");
  PyObject* code = attr(frame, "f_code");
  PyObject* file = attr(code, "co_filename");
  PyObject* name = attr(code, "co_name");
  char file_text[512];
  char name_text[128];
  const long lineno = line == NULL ? -1 : PyLong_AsLong(line);
  if (PyErr_Occurred()) PyErr_Clear();
  str_into(file, "?", file_text, sizeof file_text);
  str_into(name, "?", name_text, sizeof name_text);
  snprintf(buf, len, "%s:%ld, in %s", file_text, lineno, name_text);
  Py_XDECREF(line);
  Py_XDECREF(frame);
  Py_XDECREF(code);
  Py_XDECREF(file);
  Py_XDECREF(name);
  return file_text[0] != '<' && file_text[0] != '?';
}

/* The place the exception was raised, from its traceback; empty when it has none. */
static void describe_place(PyObject* tb, char* buf, size_t len) {
  char entry[700];
  buf[0] = '\0';
  Py_XINCREF(tb);
  while (tb != NULL && tb != Py_None) {
    PyObject* next = attr(tb, "tb_next");
    const int real = describe_entry(tb, entry, sizeof entry);
    if (real || buf[0] == '\0' || buf[0] == '<') snprintf(buf, len, "%s", entry);
    Py_DECREF(tb);
    tb = next;
  }
  Py_XDECREF(tb);
}

python_error_kind python_take_error(PyObject* retry_type, char* out, size_t out_len) {
  PyObject* type = NULL;
  PyObject* value = NULL;
  PyObject* tb = NULL;
  python_error_kind kind = PYTHON_ERROR_EXCEPTION;
  char name[128];
  char message[3000];
  char place[700];
  PyErr_Fetch(&type, &value, &tb);
  if (type == NULL) {
    snprintf(out, out_len, "python: an error without an exception");
    return kind;
  }
  PyErr_NormalizeException(&type, &value, &tb);
  if (PyErr_GivenExceptionMatches(type, PyExc_MemoryError)) {
    kind = PYTHON_ERROR_MEMORY;
  } else if (retry_type != NULL && PyErr_GivenExceptionMatches(type, retry_type)) {
    kind = PYTHON_ERROR_RETRY;
  }
  {
    PyObject* type_name = attr(type, "__name__");
    str_into(type_name, "Exception", name, sizeof name);
    Py_XDECREF(type_name);
  }
  str_into(value, "(str() of the exception failed)", message, sizeof message);
  describe_place(tb, place, sizeof place);
  snprintf(out, out_len, "%s%s%s%s%s%s", name, message[0] != '\0' ? ": " : "", message,
           place[0] != '\0' ? " (at " : "", place, place[0] != '\0' ? ")" : "");
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
  return kind;
}
