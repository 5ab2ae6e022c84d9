// The `plugins` group: the plugins on real libraries (plugins/lua/, plugins/regex/,
// plugins/thumbnail/), each on a typical input, through a pool of one sandboxed worker and, in the
// same run, through the same .so loaded into this process and called directly (sp_plugin_handle in
// a loop, no IPC, no sandbox): what isolation costs per task. Figures: `plugins <name>_pool`,
// `<name>_in_process` (tasks/s, the best of 3 alternated rounds) and
// `<name>_fraction_of_in_process` (ratio).
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
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
  return {lua, regex, thumbnail};
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

// Tasks/s of the same .so's sp_plugin_handle called in a loop on this thread. A case without
// an expected result takes the first one's (the pool's are then checked against it).
bool in_process_rate(const BenchOptions& o, LibraryCase& c, double* rate) {
  const std::uint64_t kInProcessTasks = c.tasks;
  const std::string path = plugin_path(o, c.name);
  void* so = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (so == nullptr) {
    std::cerr << "plugins: dlopen " << path << ": " << ::dlerror() << "\n";
    return false;
  }
  using Init = int (*)(const sp_host_api*, const char*, size_t, void**);
  using Handle = int (*)(void*, const sp_task*, sp_call*);
  using Shutdown = void (*)(void*);
  auto init = reinterpret_cast<Init>(::dlsym(so, "sp_plugin_init"));
  auto handle = reinterpret_cast<Handle>(::dlsym(so, "sp_plugin_handle"));
  auto shutdown = reinterpret_cast<Shutdown>(::dlsym(so, "sp_plugin_shutdown"));
  static const sp_host_api host{SP_PLUGIN_ABI_VERSION,
                                sizeof(sp_host_api),
                                write_result,
                                progress,
                                heartbeat,
                                set_error,
                                cancelled,
                                log};
  void* state = nullptr;
  if (init == nullptr || handle == nullptr ||
      init(&host, c.config_json.c_str(), c.config_json.size(), &state) != 0) {
    std::cerr << "plugins: " << c.name << ": init failed in process\n";
    ::dlclose(so);
    return false;
  }
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
    ok = handle(state, &task, &call) == SP_OK;
    if (ok && c.expected.empty()) c.expected = call.result;
    ok = ok && call.result == c.expected;
    if (!ok) std::cerr << "plugins: " << c.name << ": in process: " << call.error << "\n";
  }
  *rate = kInProcessTasks / std::chrono::duration<double>(Clock::now() - start).count();
  if (shutdown != nullptr) shutdown(state);
  ::dlclose(so);
  return ok;
}

}  // namespace

// Runs each way this many times, alternated, and keeps the best of each: the machine is
// shared, and a slow round says more about the neighbours than about the plugin.
constexpr int kRounds = 3;

bool run_library_plugins(const BenchOptions& o, Report& r) {
  for (LibraryCase& c : library_cases()) {
    if (c.payload.empty()) {
      std::cerr << "plugins: " << c.name << ": could not make its input\n";
      return false;
    }
    double in_process = 0, pooled = 0;
    for (int round = 0; round < kRounds; ++round) {
      double a = 0, b = 0;
      if (!in_process_rate(o, c, &a) || !pool_rate(o, c, &b)) return false;
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
