// LoadedPlugin: a plugin .so opened with dlopen and checked against the ABI of
// <sandpool/plugin.h>: the required symbols, the ABI version, and the optional ones.
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
#include <sandpool/status.hpp>

namespace sandpool::worker {

class LoadedPlugin {
 public:
  // Opens `path` (which must contain a '/': a bare name would be searched for in the
  // library path) with RTLD_NOW | RTLD_LOCAL, so a missing dependency fails here and not
  // in the middle of a task. Errors: kNotFound for a missing file; kPlugin for a file
  // dlopen refuses, a missing required symbol, or an ABI version other than
  // SP_PLUGIN_ABI_VERSION; kInvalidArgument for a bare name.
  static Result<LoadedPlugin> load(const std::string& path);

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

  std::string path_;
  std::unique_ptr<void, DlCloser> lib_;
  InitFn init_fn_ = nullptr;
  HandleFn handle_fn_ = nullptr;
  ShutdownFn shutdown_fn_ = nullptr;     // optional
  TaskTypesFn task_types_fn_ = nullptr;  // optional
  void* state_ = nullptr;
  bool initialized_ = false;
};

}  // namespace sandpool::worker
