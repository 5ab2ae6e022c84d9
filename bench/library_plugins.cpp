// The `plugins` group: the plugins on real libraries (plugins/lua/, plugins/regex/,
// plugins/thumbnail/, plugins/python/), each on a typical input, through a pool of one sandboxed
// worker and, in the same run, through the same .so loaded into this process and called directly
// (sp_plugin_handle in a loop, no IPC, no sandbox): what isolation costs per task. Figures:
// `plugins <name>_pool`,
// `<name>_in_process` (tasks/s, the best of 3 alternated rounds) and
// `<name>_fraction_of_in_process` (ratio).
#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <sandpool/plugin.h>

#include "bench.hpp"
#include "sample_jpeg.h"

// The host's per-call context, as this in-process caller defines it: the result so far.
struct sp_call {
  std::string result;
  std::string error;
};

namespace sandpool::bench {
namespace {

using Clock = std::chrono::steady_clock;

// One library plugin's benchmark: its config and a task a user would send.
struct LibraryCase {
  const char* name;  // the plugin (lib<name>.so) and the figures' prefix
  const char* type;
  std::string config_json;
  std::string payload;
  std::string expected;  // the result, checked on every task; empty: the first in-process one
  std::uint64_t tasks = 20000;  // per round and way
};

// A world-readable copy of plugins/python/examples/ (the workers may drop to `nobody`, who
// cannot read a checkout under /root); removed with this process's other temporaries at exit.
std::string python_examples_copy() {
  static std::string dir = [] {
    char tmpl[] = "/tmp/sandpool_bench_python_XXXXXX";
    if (::mkdtemp(tmpl) == nullptr || ::chmod(tmpl, 0755) != 0) return std::string();
    std::error_code ec;
    const std::filesystem::path to = std::string(tmpl) + "/orders.py";
    std::filesystem::copy_file(SANDPOOL_PYTHON_EXAMPLES "/orders.py", to, ec);
    if (ec || ::chmod(to.c_str(), 0644) != 0) return std::string();
    std::atexit([] { std::filesystem::remove_all(python_examples_copy()); });
    return std::string(tmpl);
  }();
  return dir;
}

std::vector<LibraryCase> library_cases() {
  // lua: a named script counting the words of ~1 KiB of text.
  std::string text;
  while (text.size() < 1024) text += "the quick brown fox jumps over the lazy dog ";
  LibraryCase lua{"lua", "lua",
                  R"({"scripts": {"wc": "local n = 0 for _ in input:gmatch('%S+') do n = n + 1 )"
                  R"(end return n"}})",
                  "@wc" + std::string(1, '\0') + text, std::to_string((text.size() / 44) * 9)};
  // regex: every e-mail address in the same text with two planted, JIT on.
  const std::string subject = text + " write to bob@example.org or ann@example.net ";
  const std::string pattern = R"(\b([\w.]+)@([\w.]+)\.(\w+)\b)";
  std::string expected;
  for (const std::string address : {"bob@example.org", "ann@example.net"}) {
    const std::size_t at = subject.find(address);
    const std::size_t a = subject.find('@', at), dot = subject.find('.', a);
    expected += std::to_string(at) + " " + std::to_string(at + address.size()) + " " +
                std::to_string(at) + " " + std::to_string(a) + " " + std::to_string(a + 1) + " " +
                std::to_string(dot) + " " + std::to_string(dot + 1) + " " +
                std::to_string(at + address.size()) + "\n";
  }
  LibraryCase regex{"regex", "regex", "{}",
                    "match-all" + std::string(1, '\0') + pattern + std::string(1, '\0') + subject,
                    expected};
  // thumbnail: a 1024x768 photo-like JPEG (quality 85) to a PNG 128 pixels wide.
  std::uint8_t* jpeg = nullptr;
  std::size_t jpeg_len = 0;
  LibraryCase thumbnail{"thumbnail", "thumbnail", "{}", "", "", 600};
  if (bench_sample_jpeg(1024, 768, 85, &jpeg, &jpeg_len) == 0) {
    thumbnail.payload = "width=128 format=png" + std::string(1, '\0') +
                        std::string(reinterpret_cast<const char*>(jpeg), jpeg_len);
    std::free(jpeg);
  }
  // python: plugins/python/examples/orders.py, a Celery-style task body: a JSON order of 10
  // items in (~700 bytes), its total out as JSON.
  std::string order = R"({"id": "A17", "items": [)";
  for (int i = 0; i < 10; ++i) {
    order += std::string(i == 0 ? "" : ", ") + R"({"sku": "item-)" + std::to_string(i) +
             R"(", "name": "a thing of some kind", "price": 2.5, "qty": )" + std::to_string(i + 1) +
             "}";
  }
  order += "]}";
  const std::string examples = python_examples_copy();
  LibraryCase python{
      "python", "python", R"({"handler": "orders:handle", "path": [")" + examples + R"("]})",
      examples.empty() ? "" : order, R"({"id": "A17", "items": 10, "total": 137.5})"};
  return {lua, regex, thumbnail, python};
}

// Tasks/s through a pool of one worker (strict seccomp), all submitted, then all awaited.
bool pool_rate(const BenchOptions& o, const LibraryCase& c, double* rate) {
  const std::uint64_t kPoolTasks = c.tasks;
  PoolOptions opts = pool_options(o, plugin_path(o, c.name), 1, 64);
  opts.plugin_config_json = c.config_json;
  auto pool = start_pool(opts);
  if (!pool) return false;
  std::vector<Ticket> tickets;
  tickets.reserve(kPoolTasks);
  const auto start = Clock::now();
  for (std::uint64_t i = 0; i < kPoolTasks; ++i) {
    for (;;) {
      auto t = pool->submit(c.type, c.payload);
      if (t) {
        tickets.push_back(std::move(t).value());
        break;
      }
      if (t.status().code() != Code::kQueueFull) {
        std::cerr << "plugins: submit: " << t.status().to_string() << "\n";
        return false;
      }
      pool->wait_idle();
    }
  }
  for (Ticket& t : tickets) {
    const TaskResult r = t.wait();
    if (r.state != TaskState::kCompleted || r.result != c.expected) {
      std::cerr << "plugins: " << c.name << ": task ended " << to_string(r.state) << ": " << r.error
                << (r.result.size() > 200 ? std::to_string(r.result.size()) + " bytes" : r.result)
                << "\n";
      return false;
    }
  }
  *rate = kPoolTasks / std::chrono::duration<double>(Clock::now() - start).count();
  pool->close();
  return true;
}

// The host API for calling a plugin in this process.
int write_result(sp_call* call, const void* data, size_t len) {
  call->result.append(static_cast<const char*>(data), len);
  return 0;
}
void progress(sp_call*, const void*, size_t) {}
void heartbeat(sp_call*) {}
void set_error(sp_call* call, const char* msg, size_t len) { call->error.assign(msg, len); }
int cancelled(sp_call*) { return 0; }
// Warnings and errors only: the figures stay readable.
void log(sp_call*, int level, const char* msg, size_t len) {
  if (level >= 2) std::cerr << "plugins: plugin says: " << std::string(msg, len) << "\n";
}

// The same .so loaded into this process and initialised once, for all rounds: an embedded
// interpreter (python) can be started only once per process.
class InProcessPlugin {
 public:
  InProcessPlugin(const BenchOptions& o, const LibraryCase& c) {
    const std::string path = plugin_path(o, c.name);
    so_ = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (so_ == nullptr) {
      std::cerr << "plugins: dlopen " << path << ": " << ::dlerror() << "\n";
      return;
    }
    using Init = int (*)(const sp_host_api*, const char*, size_t, void**);
    auto init = reinterpret_cast<Init>(::dlsym(so_, "sp_plugin_init"));
    handle_ = reinterpret_cast<Handle>(::dlsym(so_, "sp_plugin_handle"));
    shutdown_ = reinterpret_cast<Shutdown>(::dlsym(so_, "sp_plugin_shutdown"));
    static const sp_host_api host{SP_PLUGIN_ABI_VERSION,
                                  sizeof(sp_host_api),
                                  write_result,
                                  progress,
                                  heartbeat,
                                  set_error,
                                  cancelled,
                                  log};
    if (init == nullptr || handle_ == nullptr ||
        init(&host, c.config_json.c_str(), c.config_json.size(), &state_) != 0) {
      std::cerr << "plugins: " << c.name << ": init failed in process\n";
      handle_ = nullptr;
    }
  }
  ~InProcessPlugin() {
    if (handle_ != nullptr && shutdown_ != nullptr) shutdown_(state_);
    if (so_ != nullptr) ::dlclose(so_);
  }
  InProcessPlugin(const InProcessPlugin&) = delete;
  InProcessPlugin& operator=(const InProcessPlugin&) = delete;

  bool ready() const { return handle_ != nullptr; }
  int handle(const sp_task* task, sp_call* call) const { return handle_(state_, task, call); }

 private:
  using Handle = int (*)(void*, const sp_task*, sp_call*);
  using Shutdown = void (*)(void*);
  void* so_ = nullptr;
  Handle handle_ = nullptr;
  Shutdown shutdown_ = nullptr;
  void* state_ = nullptr;
};

// Tasks/s of the plugin's sp_plugin_handle called in a loop on this thread. A case without
// an expected result takes the first one's (the pool's are then checked against it).
bool in_process_rate(const InProcessPlugin& plugin, LibraryCase& c, double* rate) {
  const std::uint64_t kInProcessTasks = c.tasks;
  sp_task task{};
  task.size = sizeof task;
  task.type = c.type;
  task.type_len = std::char_traits<char>::length(c.type);
  task.payload = reinterpret_cast<const std::uint8_t*>(c.payload.data());
  task.payload_len = c.payload.size();
  task.deadline_ms = -1;
  bool ok = true;
  const auto start = Clock::now();
  for (std::uint64_t i = 0; i < kInProcessTasks && ok; ++i) {
    sp_call call;
    task.id = i + 1;
    task.attempt = 1;
    ok = plugin.handle(&task, &call) == SP_OK;
    if (ok && c.expected.empty()) c.expected = call.result;
    ok = ok && call.result == c.expected;
    if (!ok) std::cerr << "plugins: " << c.name << ": in process: " << call.error << "\n";
  }
  *rate = kInProcessTasks / std::chrono::duration<double>(Clock::now() - start).count();
  return ok;
}

}  // namespace

// Runs each way this many times, alternated, and keeps the best of each: the machine is
// shared, and a slow round says more about the neighbours than about the plugin.
constexpr int kPluginRounds = 3;

bool run_library_plugins(const BenchOptions& o, Report& r) {
  for (LibraryCase& c : library_cases()) {
    if (c.payload.empty()) {
      std::cerr << "plugins: " << c.name << ": could not make its input\n";
      return false;
    }
    const InProcessPlugin plugin(o, c);
    if (!plugin.ready()) return false;
    double in_process = 0, pooled = 0;
    for (int round = 0; round < kPluginRounds; ++round) {
      double a = 0, b = 0;
      if (!in_process_rate(plugin, c, &a) || !pool_rate(o, c, &b)) return false;
      in_process = std::max(in_process, a);
      pooled = std::max(pooled, b);
    }
    const std::string name = c.name;
    r.add("plugins", name + "_pool", pooled, "tasks/s");
    r.add("plugins", name + "_in_process", in_process, "tasks/s");
    r.add("plugins", name + "_fraction_of_in_process", pooled / in_process, "ratio");
  }
  return true;
}

}  // namespace sandpool::bench
