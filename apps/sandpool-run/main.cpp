// sandpool-run: try a plugin with no service. Reads one payload per line from stdin (or
// takes --payload or --payload-file once, and then may write the result to --result-file),
// runs them through a real Pool, prints one line per task in input order. Exit: 0 all
// completed, 1 any did not (or its result could not be written), 2 bad usage or a plugin
// that cannot load.
#include <unistd.h>

#include <cstdint>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <sandpool/pool/pool.hpp>
#include <sandpool/units/units.hpp>

#include <sandpool/store/dead_letters.hpp>
#include "output.hpp"

namespace {

constexpr int kExitAllCompleted = 0;
constexpr int kExitSomeFailed = 1;
constexpr int kExitUsage = 2;

struct Args {
  std::string plugin;
  std::string type;
  std::uint32_t workers = 2;
  std::uint32_t concurrency = 8;
  std::string timeout = "30s";
  std::uint32_t retries = 3;
  bool json = false;
  std::string payload;
  bool payload_given = false;
  std::string payload_file;
  std::string result_file;  // with one payload: where a completed task's result goes
  // JSON text, or @PATH to read it from a file; empty: `{}`.
  std::string plugin_config;
  std::string worker;
  std::string log_level = "warn";
  std::string seccomp = "strict";
  std::string state_dir;
  // Limits: empty keeps the pool's default (docs/configuration.md, `limits`); 0 is none.
  std::string memory;
  std::string cpu_time;
  std::string file_size;
  std::optional<std::uint64_t> processes;
  std::optional<std::uint64_t> open_files;
  // What the plugin's init may reach besides its own files (sandbox.init).
  std::vector<std::string> init_read;
  bool init_network = false;
};

// Applies the limit flags to `o`; false (after saying why on stderr) when one is malformed.
bool apply_limits(const Args& a, sandpool::PoolOptions& o) {
  auto size = [](const char* flag, const std::string& text, std::uint64_t* out) {
    if (text.empty()) return true;
    auto v = sandpool::parse_size(text);
    if (!v) {
      std::cerr << "sandpool-run: " << flag << ": " << v.status().message() << "\n";
      return false;
    }
    *out = *v;
    return true;
  };
  if (!size("--memory", a.memory, &o.sandbox.limits.address_space) ||
      !size("--file-size", a.file_size, &o.sandbox.limits.file_size)) {
    return false;
  }
  if (!a.cpu_time.empty()) {
    auto v = sandpool::parse_duration(a.cpu_time);
    if (!v) {
      std::cerr << "sandpool-run: --cpu-time: " << v.status().message() << "\n";
      return false;
    }
    o.cpu_time = *v;
  }
  if (a.processes) o.sandbox.limits.processes = *a.processes;
  if (a.open_files) o.sandbox.limits.open_files = *a.open_files;
  for (const std::string& p : a.init_read) {
    o.sandbox.init.read_paths.push_back(std::filesystem::absolute(p).lexically_normal());
  }
  o.sandbox.init.network = a.init_network;
  return true;
}

struct Pending {
  std::uint64_t line;
  sandpool::Ticket ticket;
};

void add_options(CLI::App& app, Args& a) {
  app.add_option("--plugin", a.plugin, "plugin shared object (.so)")->required();
  app.add_option("--type", a.type, "task type (default: the plugin's first declared type)");
  app.add_option("--workers", a.workers, "worker processes")->check(CLI::Range(1, 1024));
  app.add_option("--concurrency", a.concurrency, "tasks that may wait in one worker's ring")
      ->check(CLI::Range(1, 4096));
  app.add_option("--timeout", a.timeout, "per-attempt timeout: 500ms, 2s, 1m (bare: seconds)");
  app.add_option("--retries", a.retries, "retries after the first attempt");
  app.add_flag("--json", a.json, "one JSON object per task");
  auto* payload = app.add_option("--payload", a.payload, "run one task with this payload");
  app.add_option("--payload-file", a.payload_file,
                 "run one task whose payload is this file's bytes, unchanged (binary-safe)")
      ->excludes(payload);
  app.add_option("--result-file", a.result_file,
                 "with --payload or --payload-file: write the completed task's result to this "
                 "file, bytes unchanged (an image), instead of printing it");
  app.add_option("--plugin-config", a.plugin_config,
                 "the plugin's configuration as a JSON object (a pool's plugin_config), or "
                 "@PATH to read it from a file (default {})");
  app.add_option("--worker", a.worker, "worker host executable (default: beside this program)");
  app.add_option("--seccomp", a.seccomp, "seccomp profile: strict, relaxed, off");
  app.add_option("--init-read", a.init_read,
                 "a path the plugin's init may read (sandbox.init.read_paths; repeat it), e.g. "
                 "the Python plugin's /usr/lib/python3.11 and its handler's directory");
  app.add_flag("--init-network", a.init_network,
               "the plugin's init may open sockets (sandbox.init.network)");
  app.add_option("--log-level", a.log_level, "debug, info, warn, error, off");
  app.add_option("--state-dir", a.state_dir,
                 "keep dead letters in DIR/dead_letters.db (SQLite) for inspection and replay");
  const sandpool::sandbox::ResourceLimits defaults;
  app.add_option("--memory", a.memory,
                 "memory per worker (RLIMIT_AS): 512MiB, 2GiB; 0: none (default " +
                     std::to_string(defaults.address_space >> 20) + "MiB)");
  app.add_option("--cpu-time", a.cpu_time,
                 "CPU time per task attempt: 500ms, 2s; 0: none (the default); the timeout "
                 "still applies");
  app.add_option("--file-size", a.file_size,
                 "largest file a worker may write (RLIMIT_FSIZE); 0: none (default " +
                     std::to_string(defaults.file_size >> 20) + "MiB)");
  app.add_option("--processes", a.processes,
                 "processes and threads of the workers' user (RLIMIT_NPROC); 0: none (default " +
                     std::to_string(defaults.processes) + ")");
  app.add_option("--open-files", a.open_files,
                 "open files per worker (RLIMIT_NOFILE); 0: none (default " +
                     std::to_string(defaults.open_files) + ")");
}

// Reads the whole file at `path` into *out, bytes unchanged; false (after saying why on
// stderr, naming `flag`) when it cannot be read.
bool read_file(const char* flag, const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::cerr << "sandpool-run: " << flag << ": cannot open '" << path << "'\n";
    return false;
  }
  out->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (in.bad()) {
    std::cerr << "sandpool-run: " << flag << ": cannot read '" << path << "'\n";
    return false;
  }
  return true;
}

// --plugin-config as the compact JSON text the plugin's init receives; false (after saying
// why on stderr) when it cannot be read or is not a JSON object, as poold's plugin_config
// must be a mapping.
bool plugin_config_json(const std::string& flag_value, std::string* out) {
  if (flag_value.empty()) {
    *out = "{}";
    return true;
  }
  std::string text = flag_value;
  if (flag_value.front() == '@' && !read_file("--plugin-config", flag_value.substr(1), &text)) {
    return false;
  }
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    std::cerr << "sandpool-run: --plugin-config: not valid JSON\n";
    return false;
  }
  if (!j.is_object()) {
    std::cerr << "sandpool-run: --plugin-config: expected a JSON object, got " << j.type_name()
              << "\n";
    return false;
  }
  *out = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return true;
}

// The pool the flags describe; nullopt after saying on stderr what is wrong with them.
std::optional<sandpool::PoolOptions> pool_options(const Args& a,
                                                  std::shared_ptr<spdlog::logger> logger) {
  auto timeout = sandpool::parse_duration(a.timeout);
  if (!timeout) {
    std::cerr << "sandpool-run: --timeout: " << timeout.status().message() << "\n";
    return std::nullopt;
  }
  auto profile = sandpool::sandbox::parse_profile(a.seccomp);
  if (!profile) {
    std::cerr << "sandpool-run: --seccomp: unknown profile '" << a.seccomp
              << "' (strict, relaxed, off)\n";
    return std::nullopt;
  }
  sandpool::PoolOptions opts;
  opts.name = "run";
  opts.plugin_path = a.plugin;
  opts.workers = a.workers;
  opts.concurrency = a.concurrency;
  opts.timeout = *timeout;
  opts.retries = a.retries;
  opts.worker_path = a.worker;
  opts.sandbox.profile = *profile;
  if (!apply_limits(a, opts)) return std::nullopt;
  if (!plugin_config_json(a.plugin_config, &opts.plugin_config_json)) return std::nullopt;
  opts.logger = logger;
  if (!a.state_dir.empty()) {
    sandpool::DeadLetterStoreOptions so;
    so.state_dir = a.state_dir;
    so.logger = std::move(logger);
    auto store = sandpool::DeadLetterStore::open(so);
    if (!store) {
      std::cerr << "sandpool-run: --state-dir: " << store.status().message() << "\n";
      return std::nullopt;
    }
    opts.dead_letter_store = std::move(store).value();
  }
  return opts;
}

// Submits payloads and prints their results in input order, as they end.
class OrderedRun {
 public:
  OrderedRun(sandpool::Pool& pool, std::string type, bool json, std::string result_file)
      : pool_(pool), type_(std::move(type)), json_(json), result_file_(std::move(result_file)) {}

  // Submits one payload; false (after saying why on stderr) when the pool refuses it for
  // another reason than a full queue (which only waits for the oldest result).
  bool submit(std::string payload) {
    ++line_no_;
    for (;;) {
      auto t = pool_.submit(type_, payload);
      if (t) {
        pending_.push_back({line_no_, std::move(t).value()});
        return true;
      }
      // A full queue is back-pressure: print the oldest result, then try again.
      if (t.status().code() == sandpool::Code::kQueueFull && !pending_.empty()) {
        print_oldest();
        continue;
      }
      std::cerr << "sandpool-run: line " << line_no_ << ": " << t.status().message() << "\n";
      return false;
    }
  }

  // Prints what is already done, so a long stream shows progress in order.
  void print_done() {
    while (!pending_.empty() && pending_.front().ticket.done()) print_oldest();
  }

  // Waits for and prints every result left; true when every task completed.
  bool finish() {
    while (!pending_.empty()) print_oldest();
    std::cout.flush();
    return all_completed_;
  }

 private:
  void print_oldest() {
    Pending p = std::move(pending_.front());
    pending_.pop_front();
    const sandpool::TaskResult r = p.ticket.wait();
    all_completed_ &= r.state == sandpool::TaskState::kCompleted;
    std::string_view written;
    if (!result_file_.empty() && r.state == sandpool::TaskState::kCompleted) {
      if (write_result(r.result)) {
        written = result_file_;
      } else {
        all_completed_ = false;
      }
    }
    std::cout << (json_ ? sandpool::run::json_line(p.line, r, written)
                        : sandpool::run::text_line(p.line, r, written))
              << '\n';
  }

  // Writes the result to result_file_; false (after saying why on stderr) when it cannot.
  bool write_result(const std::string& result) {
    std::ofstream out(result_file_, std::ios::binary | std::ios::trunc);
    out.write(result.data(), static_cast<std::streamsize>(result.size()));
    out.close();
    if (!out) {
      std::cerr << "sandpool-run: --result-file: cannot write '" << result_file_ << "'\n";
      return false;
    }
    return true;
  }

  sandpool::Pool& pool_;
  const std::string type_;
  const bool json_;
  const std::string result_file_;
  std::deque<Pending> pending_;
  std::uint64_t line_no_ = 0;
  bool all_completed_ = true;
};

}  // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App app{"Run tasks through a sandpool plugin without a service.", "sandpool-run"};
  add_options(app, a);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return e.get_exit_code() == 0 ? rc : kExitUsage;
  }
  a.payload_given = app.get_option("--payload")->count() > 0;
  if (app.get_option("--payload-file")->count() > 0) {
    if (!read_file("--payload-file", a.payload_file, &a.payload)) return kExitUsage;
    a.payload_given = true;
  }
  if (!a.result_file.empty() && !a.payload_given) {
    std::cerr << "sandpool-run: --result-file needs one task: --payload or --payload-file\n";
    return kExitUsage;
  }

  auto logger = spdlog::stderr_color_mt("sandpool-run");
  logger->set_level(spdlog::level::from_str(a.log_level));
  std::optional<sandpool::PoolOptions> opts = pool_options(a, logger);
  if (!opts) return kExitUsage;
  auto pool = sandpool::Pool::create(*opts);
  if (!pool) {
    std::cerr << "sandpool-run: " << pool.status().message() << "\n";
    return kExitUsage;
  }

  OrderedRun run(**pool, a.type.empty() ? (*pool)->task_types().front() : a.type, a.json,
                 a.result_file);
  bool usage_error = false;
  if (a.payload_given) {
    usage_error = !run.submit(a.payload);
  } else {
    std::string line;
    while (std::getline(std::cin, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (!run.submit(std::move(line))) {
        usage_error = true;
        break;
      }
      run.print_done();
    }
  }
  const bool all_completed = run.finish();
  (*pool)->close();
  if (opts->dead_letter_store) {
    if (sandpool::Status s = opts->dead_letter_store->close(); !s) {
      std::cerr << "sandpool-run: dead letters not all written: " << s.message() << "\n";
      return kExitSomeFailed;
    }
  }
  if (usage_error) return kExitUsage;
  return all_completed ? kExitAllCompleted : kExitSomeFailed;
}
