// LoadedPlugin: a plugin .so loaded from the fd the manager opened, and checked against the
// ABI of <sandpool/plugin.h>: the required symbols, the ABI version, and the optional ones.
// Errors name the file and what is wrong ("... lacks required symbol 'sp_plugin_handle'").
//
// Ownership: owns the dlopen handle (dlclose on destruction; the worker itself never gets
// there, it leaves with _exit) and the plugin's state pointer. Move-only. handle() may be
// called from one thread at a time, as the ABI promises plugins.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <sandpool/plugin.h>
#include <sandpool/base/status.hpp>

namespace sandpool::worker {

// The plugin as the manager hands it over (worker_args.hpp): the file it opened and checked,
// and the directory it found it in. Not owned here.
struct PluginFile {
  std::string name;  // its path, for messages only: never opened
  int fd = -1;       // the file, open for reading
  int dir_fd = -1;   // its directory (O_PATH is enough)
};

class LoadedPlugin {
 public:
  // Loads the plugin from `file.fd` through /proc/self/fd/N, with RTLD_NOW | RTLD_LOCAL, so
  // a missing dependency fails here and not in the middle of a task, and the code loaded is
  // the file the manager checked whatever happens to its path meanwhile. The libraries it
  // expects under $ORIGIN are loaded first through `file.dir_fd` (origin_libraries.hpp).
  // Errors: kPlugin for a file dlopen refuses (naming the file and dlopen's reason), a
  // library beside it that does not load, a missing required symbol, or an ABI version other
  // than SP_PLUGIN_ABI_VERSION; kInvalidArgument when an fd is not open.
  static Result<LoadedPlugin> load(const PluginFile& file);

  // Calls sp_plugin_init once with the NUL-terminated JSON config. Returns a kPlugin error
  // "sp_plugin_init returned N" when it does not return 0.
  Status init(const sp_host_api* host, const std::string& config_json);
  // Calls sp_plugin_handle with the state init produced.
  int handle(const sp_task* task, sp_call* call) const { return handle_fn_(state_, task, call); }
  // Calls sp_plugin_shutdown when the plugin exports it and init succeeded; once.
  void shutdown();
  // The task types from sp_plugin_task_types, empty when the plugin does not export it.
  // Errors (kPlugin) for an empty name or more than ipc::kMaxListItems entries.
  Result<std::vector<std::string>> task_types() const;

  const std::string& path() const { return path_; }
  // The name the plugin was loaded under ("/proc/self/fd/6"): what dladdr and
  // dl_iterate_phdr report for it.
  const std::string& loaded_as() const { return loaded_as_; }
  // The names the libraries loaded from beside the plugin were loaded under
  // ("/proc/self/fd/7/libhelper.so"), in load order.
  const std::vector<std::string>& libraries_loaded_beside() const { return beside_names_; }

 private:
  struct DlCloser {
    void operator()(void* handle) const;
  };
  using AbiVersionFn = uint32_t (*)();
  using InitFn = int (*)(const sp_host_api*, const char*, size_t, void**);
  using HandleFn = int (*)(void*, const sp_task*, sp_call*);
  using ShutdownFn = void (*)(void*);
  using TaskTypesFn = const char* const* (*)();

  LoadedPlugin() = default;
  Status load_libraries_beside(const PluginFile& file);

  std::string path_;
  std::string loaded_as_;
  // Declared before lib_: closed after it (the plugin depends on them).
  std::vector<std::unique_ptr<void, DlCloser>> beside_;
  std::vector<std::string> beside_names_;
  std::unique_ptr<void, DlCloser> lib_;
  InitFn init_fn_ = nullptr;
  HandleFn handle_fn_ = nullptr;
  ShutdownFn shutdown_fn_ = nullptr;     // optional
  TaskTypesFn task_types_fn_ = nullptr;  // optional
  void* state_ = nullptr;
  bool initialized_ = false;
};

}  // namespace sandpool::worker
