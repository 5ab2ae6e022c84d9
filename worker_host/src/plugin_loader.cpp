#include "plugin_loader.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include <sandpool/ipc/messages.hpp>

#include "origin_libraries.hpp"

namespace sandpool::worker {
namespace {

Status plugin_error(const std::string& path, const std::string& what) {
  return Status::error(Code::kPlugin, "plugin '" + path + "' " + what);
}

// dlsym can legitimately return NULL for a symbol that exists; dlerror tells them apart.
void* find_symbol(void* lib, const char* name) {
  ::dlerror();
  void* sym = ::dlsym(lib, name);
  return ::dlerror() == nullptr ? sym : nullptr;
}

}  // namespace

void LoadedPlugin::DlCloser::operator()(void* handle) const { ::dlclose(handle); }

Status LoadedPlugin::load_libraries_beside(const PluginFile& file) {
  Result<DynamicNeeds> needs = read_dynamic_needs(file.fd);
  if (!needs) return plugin_error(file.name, "cannot be read: " + needs.status().message());
  const std::string dir = "/proc/self/fd/" + std::to_string(file.dir_fd) + "/";
  auto exists = [&](const std::string& relative) {
    struct stat st {};
    return ::fstatat(file.dir_fd, relative.c_str(), &st, 0) == 0 && S_ISREG(st.st_mode);
  };
  auto exists_abs = [](const std::string& path) { return ::access(path.c_str(), F_OK) == 0; };
  for (const std::string& relative : libraries_beside(*needs, exists, exists_abs)) {
    const std::string name = dir + relative;
    std::unique_ptr<void, DlCloser> lib(::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL));
    if (!lib) {
      const char* why = ::dlerror();
      return plugin_error(file.name, "needs " + relative + " beside it, which cannot be loaded: " +
                                         (why ? why : "dlopen failed"));
    }
    beside_.push_back(std::move(lib));
    beside_names_.push_back(name);
  }
  return Status::ok();
}

Result<LoadedPlugin> LoadedPlugin::load(const PluginFile& file) {
  const std::string& path = file.name;
  if (::fcntl(file.fd, F_GETFD) < 0 || ::fcntl(file.dir_fd, F_GETFD) < 0) {
    return Status::invalid("plugin '" + path + "': its file or directory fd is not open");
  }
  LoadedPlugin p;
  p.path_ = path;
  SP_RETURN_IF_ERROR(p.load_libraries_beside(file));
  // The magic link reopens the very file behind the fd: no path lookup, no permission on
  // the directories above it, no chance to swap it.
  p.loaded_as_ = "/proc/self/fd/" + std::to_string(file.fd);
  p.lib_.reset(::dlopen(p.loaded_as_.c_str(), RTLD_NOW | RTLD_LOCAL));
  if (!p.lib_) {
    const char* why = ::dlerror();
    return plugin_error(path, std::string("cannot be loaded: ") + (why ? why : "dlopen failed"));
  }

  auto required = [&](const char* name) -> Result<void*> {
    void* sym = find_symbol(p.lib_.get(), name);
    if (sym == nullptr)
      return plugin_error(path, std::string("lacks required symbol '") + name + "'");
    return sym;
  };
  Result<void*> abi = required("sp_plugin_abi_version");
  if (!abi) return abi.status();
  Result<void*> init = required("sp_plugin_init");
  if (!init) return init.status();
  Result<void*> handle = required("sp_plugin_handle");
  if (!handle) return handle.status();

  const uint32_t version = reinterpret_cast<AbiVersionFn>(*abi)();
  if (version != SP_PLUGIN_ABI_VERSION) {
    return plugin_error(path, "reports ABI version " + std::to_string(version) +
                                  "; this host implements ABI version " +
                                  std::to_string(SP_PLUGIN_ABI_VERSION));
  }
  p.init_fn_ = reinterpret_cast<InitFn>(*init);
  p.handle_fn_ = reinterpret_cast<HandleFn>(*handle);
  p.shutdown_fn_ = reinterpret_cast<ShutdownFn>(find_symbol(p.lib_.get(), "sp_plugin_shutdown"));
  p.task_types_fn_ =
      reinterpret_cast<TaskTypesFn>(find_symbol(p.lib_.get(), "sp_plugin_task_types"));
  return p;
}

Status LoadedPlugin::init(const sp_host_api* host, const std::string& config_json) {
  const int rc = init_fn_(host, config_json.c_str(), config_json.size(), &state_);
  if (rc != 0) {
    return Status::error(Code::kPlugin, "sp_plugin_init of '" + path_ + "' returned " +
                                            std::to_string(rc) + " (init failed)");
  }
  initialized_ = true;
  return Status::ok();
}

void LoadedPlugin::shutdown() {
  if (!initialized_) return;
  initialized_ = false;
  if (shutdown_fn_ != nullptr) shutdown_fn_(state_);
}

Result<std::vector<std::string>> LoadedPlugin::task_types() const {
  std::vector<std::string> types;
  if (task_types_fn_ == nullptr) return types;
  const char* const* list = task_types_fn_();
  for (std::size_t i = 0; list != nullptr && list[i] != nullptr; ++i) {
    if (i == ipc::kMaxListItems) {
      return plugin_error(
          path_, "declares more than " + std::to_string(ipc::kMaxListItems) + " task types");
    }
    if (list[i][0] == '\0') {
      return plugin_error(path_, "declares an empty task type (entry " + std::to_string(i) + ")");
    }
    types.emplace_back(list[i]);
  }
  return types;
}

}  // namespace sandpool::worker
