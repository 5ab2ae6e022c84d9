#define _GNU_SOURCE /* dladdr */
#include "python_interp.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "python_error.h"
#include "python_module.h"

/* Refuses every import that the built-in and frozen importers and plugin_config.modules
 * cannot serve (they need no file), with an error that says what to do, in place of the
 * path finders. */
static const char kImportGuard[] =
    "import sys\n"
    "class _SandpoolImportGuard:\n"
    "    @classmethod\n"
    "    def find_spec(cls, name, path=None, target=None):\n"
    "        raise ModuleNotFoundError(\n"
    "            f'python: import of {name!r} refused: modules are imported at init only '\n"
    "            '(list it in plugin_config.preload; the worker reads no file after init '\n"
    "            'under the strict profile)', name=name)\n"
    "sys.meta_path[:] = [f for f in sys.meta_path\n"
    "                    if getattr(f, '__name__', '') in ('BuiltinImporter', "
    "'FrozenImporter', '_SandpoolConfigModules')]\n"
    "sys.meta_path.append(_SandpoolImportGuard)\n"
    "sys.path_importer_cache.clear()\n";

/* Extension modules (lib-dynload/NAME.so) take the interpreter's symbols from the global
 * scope, but the worker loads the plugin, and with it libpython, RTLD_LOCAL: load libpython
 * again, by its own path, RTLD_GLOBAL. */
static int make_libpython_global(char* err, size_t err_len) {
  Dl_info info;
  if (dladdr((void*)Py_None, &info) == 0 || info.dli_fname == NULL) {
    snprintf(err, err_len, "python: cannot find libpython (dladdr)");
    return -1;
  }
  if (dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD) == NULL) {
    const char* why = dlerror();
    snprintf(err, err_len, "python: cannot make %s global: %s", info.dli_fname,
             why != NULL ? why : "dlopen failed");
    return -1;
  }
  return 0;
}

static int status_failed(PyStatus status, const char* what, char* err, size_t err_len) {
  if (!PyStatus_Exception(status)) return 0;
  snprintf(err, err_len, "python: %s: %s%s%s", what, status.func != NULL ? status.func : "",
           status.func != NULL ? ": " : "", status.err_msg != NULL ? status.err_msg : "failed");
  return -1;
}

static int start_runtime(const python_plugin_config* c, char* err, size_t err_len) {
  PyPreConfig pre;
  PyConfig config;
  PyStatus status;
  PyPreConfig_InitIsolatedConfig(&pre);
  pre.utf8_mode = 1; /* the environment is cleared: no locale to follow */
  if (status_failed(Py_PreInitialize(&pre), "pre-initialize", err, err_len)) return -1;
  /* Isolated: no PYTHON* variables, no user site directory, no script directory or cwd on
   * sys.path (safe_path); no signal handlers of its own (the worker host owns them). */
  PyConfig_InitIsolatedConfig(&config);
  config.install_signal_handlers = 0;
  config.buffered_stdio = 0; /* print() reaches the manager's log line by line */
  config.write_bytecode = 0; /* no .pyc writes: the worker writes no file */
  config.site_import = c->site;
  config.user_site_directory = 0;
  config.pathconfig_warnings = 0;
  config.parse_argv = 0;
  /* Debian's prefix, as pkg-config names it: without it the prefix is searched for from the
   * worker's path, and on a merged-/usr system lands on "/" (sys.path "/lib/python3.11"). */
  status = PyConfig_SetString(&config, &config.program_name, L"python3");
  if (!PyStatus_Exception(status)) {
    status = PyConfig_SetBytesString(&config, &config.home, SANDPOOL_PYTHON_HOME);
  }
  if (!PyStatus_Exception(status)) status = Py_InitializeFromConfig(&config);
  PyConfig_Clear(&config);
  return status_failed(status, "start", err, err_len);
}

/* "python: <what>: <the raised exception>" into err. */
static void take_error(const char* what, char* err, size_t err_len) {
  char text[3500];
  python_take_error(python_module_retry_type(), text, sizeof text);
  snprintf(err, err_len, "python: %s: %s", what, text);
}

static int extend_path(const python_plugin_config* c, char* err, size_t err_len) {
  PyObject* path = PySys_GetObject("path"); /* borrowed */
  size_t i;
  if (path == NULL || !PyList_Check(path)) {
    snprintf(err, err_len, "python: sys.path is not a list");
    return -1;
  }
  for (i = 0; i < c->path_count; ++i) {
    PyObject* dir = PyUnicode_DecodeFSDefault(c->path[i]);
    const int rc = dir == NULL ? -1 : PyList_Insert(path, (Py_ssize_t)i, dir);
    Py_XDECREF(dir);
    if (rc != 0) {
      take_error("plugin_config.path", err, err_len);
      return -1;
    }
  }
  return 0;
}

static int import_named(const char* name, const char* what, char* err, size_t err_len) {
  PyObject* m = PyImport_ImportModule(name);
  char where[300];
  if (m != NULL) {
    Py_DECREF(m);
    return 0;
  }
  snprintf(where, sizeof where, "%s: cannot import '%s'", what, name);
  take_error(where, err, err_len);
  return -1;
}

/* Serves the modules of plugin_config.modules (the dict `_sources`, name to source) to
 * `import`, first on sys.meta_path, under the file name "plugin_config.modules.NAME" that a
 * traceback shows. They import each other in any order, and need no file after init. */
static const char kConfigModules[] =
    "import sys, importlib.util\n"
    "class _SandpoolConfigModules:\n"
    "    sources = _sources\n"
    "    @classmethod\n"
    "    def find_spec(cls, name, path=None, target=None):\n"
    "        if name not in cls.sources:\n"
    "            return None\n"
    "        return importlib.util.spec_from_loader(name, cls,\n"
    "                                               origin='plugin_config.modules.' + name)\n"
    "    @classmethod\n"
    "    def create_module(cls, spec):\n"
    "        return None\n"
    "    @classmethod\n"
    "    def exec_module(cls, module):\n"
    "        name = module.__name__\n"
    "        module.__file__ = 'plugin_config.modules.' + name\n"
    "        exec(compile(cls.sources[name], module.__file__, 'exec'), module.__dict__)\n"
    "sys.meta_path.insert(0, _SandpoolConfigModules)\n";

static int serve_config_modules(const python_plugin_config* c, char* err, size_t err_len) {
  PyObject* globals = PyDict_New();
  PyObject* sources = PyDict_New();
  PyObject* done = NULL;
  size_t i;
  int ok =
      globals != NULL && sources != NULL && PyDict_SetItemString(globals, "_sources", sources) == 0;
  for (i = 0; ok && i < c->module_count; ++i) {
    PyObject* text = PyUnicode_FromString(c->module_sources[i]);
    ok = text != NULL && PyDict_SetItemString(sources, c->module_names[i], text) == 0;
    Py_XDECREF(text);
  }
  if (ok) done = PyRun_String(kConfigModules, Py_file_input, globals, globals);
  Py_XDECREF(globals);
  Py_XDECREF(sources);
  if (done == NULL) {
    take_error("plugin_config.modules", err, err_len);
    return -1;
  }
  Py_DECREF(done);
  return 0;
}

static PyObject* find_handler(const python_plugin_config* c, char* err, size_t err_len) {
  PyObject* module;
  PyObject* fn;
  size_t i;
  if (import_named("sandpool", "the sandpool module", err, err_len) != 0) return NULL;
  if (c->module_count > 0 && serve_config_modules(c, err, err_len) != 0) return NULL;
  for (i = 0; i < c->preload_count; ++i) {
    if (import_named(c->preload[i], "plugin_config.preload", err, err_len) != 0) return NULL;
  }
  module = PyImport_ImportModule(c->module);
  if (module == NULL) {
    char where[300];
    snprintf(where, sizeof where, "plugin_config.handler: cannot import '%s'", c->module);
    take_error(where, err, err_len);
    return NULL;
  }
  fn = PyObject_GetAttrString(module, c->function);
  Py_DECREF(module);
  if (fn == NULL) {
    PyErr_Clear();
    snprintf(err, err_len, "python: plugin_config.handler: module '%s' has no '%s'", c->module,
             c->function);
    return NULL;
  }
  if (!PyCallable_Check(fn)) {
    snprintf(err, err_len,
             "python: plugin_config.handler: %s.%s is an object of type %s, not callable",
             c->module, c->function, Py_TYPE(fn)->tp_name);
    Py_DECREF(fn);
    return NULL;
  }
  return fn;
}

static int guard_imports(char* err, size_t err_len) {
  PyObject* globals = PyDict_New();
  PyObject* done;
  if (globals == NULL) {
    take_error("import guard", err, err_len);
    return -1;
  }
  done = PyRun_String(kImportGuard, Py_file_input, globals, globals);
  Py_DECREF(globals);
  if (done == NULL) {
    take_error("import guard", err, err_len);
    return -1;
  }
  Py_DECREF(done);
  return 0;
}

PyObject* python_interp_start(const python_plugin_config* c, char* err, size_t err_len) {
  PyObject* handler;
  if (Py_IsInitialized()) {
    snprintf(err, err_len,
             "python: an interpreter already runs in this process (one init per process)");
    return NULL;
  }
  if (make_libpython_global(err, err_len) != 0) return NULL;
  if (start_runtime(c, err, err_len) != 0) return NULL;
  /* From here the GIL is held; every path out releases it. */
  handler = extend_path(c, err, err_len) == 0 ? find_handler(c, err, err_len) : NULL;
  if (handler != NULL && !c->late_imports && guard_imports(err, err_len) != 0) {
    Py_CLEAR(handler);
  }
  (void)PyEval_SaveThread();
  return handler;
}

void python_interp_stop(void) {
  static const char* const kStreams[] = {"stdout", "stderr"};
  size_t i;
  (void)PyGILState_Ensure(); /* kept: no Python code runs after this in the worker */
  for (i = 0; i < sizeof kStreams / sizeof kStreams[0]; ++i) {
    PyObject* stream = PySys_GetObject(kStreams[i]); /* borrowed */
    PyObject* done = stream == NULL ? NULL : PyObject_CallMethod(stream, "flush", NULL);
    Py_XDECREF(done);
    PyErr_Clear();
  }
}
