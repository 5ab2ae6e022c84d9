/* A raised Python exception as one line of text for the task's error. GIL held. */
#ifndef SANDPOOL_PYTHON_ERROR_H
#define SANDPOOL_PYTHON_ERROR_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stddef.h>

typedef enum python_error_kind {
  PYTHON_ERROR_EXCEPTION = 0, /* any other exception: the task's error */
  PYTHON_ERROR_RETRY,         /* sandpool.Retry or a subclass */
  PYTHON_ERROR_MEMORY         /* MemoryError or a subclass */
} python_error_kind;

/* Takes the raised exception (the error indicator is clear afterwards) and writes
 * "Type: message (at file:line, in function)" into out (out_len bytes, NUL-terminated).
 * The place is the innermost frame of the traceback whose file is a real one (not
 * "<frozen ...>" or "<string>"), else the innermost; no source file is read, so this runs
 * under the strict profile. `retry_type` may be NULL. Returns the exception's kind. */
python_error_kind python_take_error(PyObject* retry_type, char* out, size_t out_len);

#endif /* SANDPOOL_PYTHON_ERROR_H */
