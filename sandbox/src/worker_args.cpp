// The worker host's command line and environment. A private launch contract between the
// spawner and the worker host, so it is hand-parsed: every flag takes exactly one value, given
// either as the next argument ("--plugin /x.so", what to_argv emits) or inline ("--plugin=/x.so").
#include <sandpool/sandbox/worker_args.hpp>

#include <charconv>
#include <climits>
#include <cstdlib>
#include <iterator>
#include <set>
#include <string_view>
#include <utility>

namespace sandpool::sandbox {
namespace {

// Parses a plain unsigned decimal (no sign, blanks or base prefix) within [lo, hi].
Result<std::uint64_t> parse_number(std::string_view flag, std::string_view text, std::uint64_t lo,
                                   std::uint64_t hi) {
  std::uint64_t v = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec == std::errc::invalid_argument || ptr != end) {
    return Status::invalid(std::string(flag) + ": '" + std::string(text) +
                           "' is not an unsigned decimal number");
  }
  if (ec == std::errc::result_out_of_range || v < lo || v > hi) {
    return Status::invalid(std::string(flag) + ": " + std::string(text) + " is outside [" +
                           std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return v;
}

// Sets *out from a number flag; the bounds also keep the value inside T.
template <typename T>
Status set_number(T* out, std::string_view flag, std::string_view text, std::uint64_t lo,
                  std::uint64_t hi) {
  Result<std::uint64_t> v = parse_number(flag, text, lo, hi);
  if (!v) return v.status();
  *out = static_cast<T>(*v);
  return Status::ok();
}

Status require_nonempty(std::string_view flag, std::string_view value) {
  if (value.empty()) return Status::invalid(std::string(flag) + ": empty value");
  return Status::ok();
}

constexpr std::uint64_t kU64Max = UINT64_MAX;
constexpr std::uint64_t kHourMs = 3600u * 1000u;
constexpr std::uint64_t kMaxId = UINT32_MAX - 1;  // (uid_t)-1 means "unchanged" to setresuid

// One row per flag: its name, whether it may repeat, and how its value lands in WorkerArgs.
struct FlagSpec {
  std::string_view name;
  bool repeatable;
  Status (*apply)(WorkerArgs& a, std::string_view flag, std::string_view v);
};

constexpr FlagSpec kFlags[] = {
    {"--plugin", false,
     [](WorkerArgs& a, std::string_view f, std::string_view v) {
       SP_RETURN_IF_ERROR(require_nonempty(f, v));
       a.plugin_path = v;
       return Status::ok();
     }},
    // 0-2 are stdio: step 2 keeps them and points a closed one at /dev/null.
    {"--channel-fd", false,
     [](WorkerArgs& a, std::string_view f, std::string_view v) {
       return set_number(&a.channel_fd, f, v, 3, INT_MAX);
     }},
    {"--doorbell-fd", false,
     [](WorkerArgs& a, std::string_view f, std::string_view v) {
       return set_number(&a.doorbell_fd, f, v, 3, INT_MAX);
     }},
    {"--plugin-fd", false,
     [](WorkerArgs& a, std::string_view f, std::string_view v) {
       return set_number(&a.plugin_fd, f, v, 3, INT_MAX);
     }},
    {"--plugin-dir-fd", false,
     [](WorkerArgs& a, std::string_view f, std::string_view v) {
       return set_number(&a.plugin_dir_fd, f, v, 3, INT_MAX);
     }},
    {"--heartbeat-ms", false,
     [](WorkerArgs& a, std::string_view f, std::string_view v) {
       return set_number(&a.heartbeat_ms, f, v, 1, kHourMs);
     }},
    {"--max-result", false,
     [](WorkerArgs& a, std::string_view f, std::string_view v) {
       return set_number(&a.max_result, f, v, 0, kU64Max);
     }},
    {"--init-timeout-ms", false,
     [](WorkerArgs& a, std::string_view f, std::string_view v) {
       return set_number(&a.init_timeout_ms, f, v, 1, 24 * kHourMs);
     }},
    {"--parent-pid", false,
     [](WorkerArgs& a, std::string_view f, std::string_view v) {
       return set_number(&a.parent_pid, f, v, 1, INT_MAX);
     }},
    {"--gate-fd", false,
     [](WorkerArgs& a, std::string_view f, std::string_view v) {
       return set_number(&a.gate_fd, f, v, 3, INT_MAX);
     }},
    {"--manager-pidfd", false,
     [](WorkerArgs& a, std::string_view f, std::string_view v) {
       return set_number(&a.manager_pidfd, f, v, 3, INT_MAX);
     }},
    {"--seccomp", false,
     [](WorkerArgs& a, std::string_view f, std::string_view v) {
       std::optional<SeccompProfile> p = parse_profile(v);
       if (!p) {
         return Status::invalid(std::string(f) + ": unknown profile '" + std::string(v) +
                                "' (expected strict, relaxed or off)");
       }
       a.policy.profile = *p;
       return Status::ok();
     }},
    {"--allow-syscall", true,
     [](WorkerArgs& a, std::string_view f, std::string_view v) {
       SP_RETURN_IF_ERROR(require_nonempty(f, v));
       a.policy.allow_syscalls.emplace_back(v);
       return Status::ok();
     }},
    {"--rlimit-as", false,
     [](WorkerArgs& a, std::string_view f, std::string_view v) {
       return set_number(&a.policy.limits.address_space, f, v, 0, kU64Max);
     }},
    {"--rlimit-cpu", false,
     [](WorkerArgs& a, std::string_view f, std::string_view v) {
       return set_number(&a.policy.limits.cpu_seconds, f, v, 0, kU64Max);
     }},
    {"--rlimit-nofile", false,
     [](WorkerArgs& a, std::string_view f, std::string_view v) {
       return set_number(&a.policy.limits.open_files, f, v, 0, kU64Max);
     }},
    {"--rlimit-nproc", false,
     [](WorkerArgs& a, std::string_view f, std::string_view v) {
       return set_number(&a.policy.limits.processes, f, v, 0, kU64Max);
     }},
    {"--rlimit-fsize", false,
     [](WorkerArgs& a, std::string_view f, std::string_view v) {
       return set_number(&a.policy.limits.file_size, f, v, 0, kU64Max);
     }},
    {"--keep-env", true,
     [](WorkerArgs& a, std::string_view f, std::string_view v) {
       SP_RETURN_IF_ERROR(require_nonempty(f, v));
       if (v.find('=') != std::string_view::npos) {
         return Status::invalid(std::string(f) + ": '" + std::string(v) +
                                "' is not a variable name (contains '=')");
       }
       a.policy.keep_env.emplace_back(v);
       return Status::ok();
     }},
    // Step 4's identity: --run-as-uid and --run-as-gid together, groups repeated.
    {"--run-as-uid", false,
     [](WorkerArgs& a, std::string_view f, std::string_view v) {
       if (!a.policy.run_as) a.policy.run_as.emplace();
       return set_number(&a.policy.run_as->uid, f, v, 0, kMaxId);
     }},
    {"--run-as-gid", false,
     [](WorkerArgs& a, std::string_view f, std::string_view v) {
       if (!a.policy.run_as) a.policy.run_as.emplace();
       return set_number(&a.policy.run_as->gid, f, v, 0, kMaxId);
     }},
    {"--run-as-group", true,
     [](WorkerArgs& a, std::string_view f, std::string_view v) {
       if (!a.policy.run_as) a.policy.run_as.emplace();
       std::uint32_t g = 0;
       SP_RETURN_IF_ERROR(set_number(&g, f, v, 0, kMaxId));
       a.policy.run_as->groups.push_back(g);
       return Status::ok();
     }},
    {"--readonly-path", true,
     [](WorkerArgs& a, std::string_view f, std::string_view v) {
       SP_RETURN_IF_ERROR(require_nonempty(f, v));
       a.policy.readonly_paths.emplace_back(v);
       return Status::ok();
     }},
    {"--writable-path", true,
     [](WorkerArgs& a, std::string_view f, std::string_view v) {
       SP_RETURN_IF_ERROR(require_nonempty(f, v));
       a.policy.writable_paths.emplace_back(v);
       return Status::ok();
     }},
    {"--init-read-path", true,
     [](WorkerArgs& a, std::string_view f, std::string_view v) {
       SP_RETURN_IF_ERROR(require_nonempty(f, v));
       a.policy.init.read_paths.emplace_back(v);
       return Status::ok();
     }},
    {"--init-write-path", true,
     [](WorkerArgs& a, std::string_view f, std::string_view v) {
       SP_RETURN_IF_ERROR(require_nonempty(f, v));
       a.policy.init.write_paths.emplace_back(v);
       return Status::ok();
     }},
    {"--init-network", false,
     [](WorkerArgs& a, std::string_view f, std::string_view v) {
       if (v != "on")
         return Status::invalid(std::string(f) + ": expected on, got '" + std::string(v) + "'");
       a.policy.init.network = true;
       return Status::ok();
     }},
    {"--write-xor-execute", false,
     [](WorkerArgs& a, std::string_view f, std::string_view v) {
       if (v != "on" && v != "off") {
         return Status::invalid(std::string(f) + ": expected on or off, got '" + std::string(v) +
                                "'");
       }
       a.policy.write_xor_execute = v == "on";
       return Status::ok();
     }},
    {"--require", true,
     [](WorkerArgs& a, std::string_view f, std::string_view v) {
       SP_RETURN_IF_ERROR(require_nonempty(f, v));
       a.policy.require.emplace_back(v);
       return Status::ok();
     }},
};

const FlagSpec* find_flag(std::string_view name) {
  for (const FlagSpec& f : kFlags) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

}  // namespace

std::vector<std::string> to_argv(const WorkerArgs& args) {
  std::vector<std::string> out;
  auto add = [&out](std::string_view flag, std::string value) {
    out.emplace_back(flag);
    out.push_back(std::move(value));
  };
  add("--plugin", args.plugin_path);
  add("--channel-fd", std::to_string(args.channel_fd));
  add("--doorbell-fd", std::to_string(args.doorbell_fd));
  add("--plugin-fd", std::to_string(args.plugin_fd));
  add("--plugin-dir-fd", std::to_string(args.plugin_dir_fd));
  add("--heartbeat-ms", std::to_string(args.heartbeat_ms));
  add("--max-result", std::to_string(args.max_result));
  add("--init-timeout-ms", std::to_string(args.init_timeout_ms));
  if (args.parent_pid != 0) add("--parent-pid", std::to_string(args.parent_pid));
  if (args.gate_fd >= 0) add("--gate-fd", std::to_string(args.gate_fd));
  if (args.manager_pidfd >= 0) add("--manager-pidfd", std::to_string(args.manager_pidfd));
  add("--seccomp", std::string(profile_name(args.policy.profile)));
  for (const std::string& s : args.policy.allow_syscalls) add("--allow-syscall", s);
  const ResourceLimits& l = args.policy.limits;
  add("--rlimit-as", std::to_string(l.address_space));
  add("--rlimit-cpu", std::to_string(l.cpu_seconds));
  add("--rlimit-nofile", std::to_string(l.open_files));
  add("--rlimit-nproc", std::to_string(l.processes));
  add("--rlimit-fsize", std::to_string(l.file_size));
  for (const std::string& e : args.policy.keep_env) add("--keep-env", e);
  if (const std::optional<RunAs>& r = args.policy.run_as) {
    add("--run-as-uid", std::to_string(r->uid));
    add("--run-as-gid", std::to_string(r->gid));
    for (std::uint32_t g : r->groups) add("--run-as-group", std::to_string(g));
  }
  for (const std::string& p : args.policy.readonly_paths) add("--readonly-path", p);
  for (const std::string& p : args.policy.writable_paths) add("--writable-path", p);
  for (const std::string& r : args.policy.require) add("--require", r);
  for (const std::string& p : args.policy.init.read_paths) add("--init-read-path", p);
  for (const std::string& p : args.policy.init.write_paths) add("--init-write-path", p);
  if (args.policy.init.network) add("--init-network", "on");
  if (args.policy.write_xor_execute) {
    add("--write-xor-execute", *args.policy.write_xor_execute ? "on" : "off");
  }
  return out;
}

Result<WorkerArgs> parse_worker_argv(int argc, const char* const* argv) {
  WorkerArgs args;
  std::set<std::string_view> seen;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    std::string_view name = arg;
    std::string_view value;
    bool inline_value = false;
    if (std::size_t eq = arg.find('='); arg.starts_with("--") && eq != std::string_view::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      inline_value = true;
    }
    const FlagSpec* flag = find_flag(name);
    if (flag == nullptr) return Status::invalid("unknown flag '" + std::string(arg) + "'");
    if (!inline_value) {
      if (i + 1 >= argc) return Status::invalid(std::string(name) + ": missing value");
      value = argv[++i];
    }
    if (!flag->repeatable && !seen.insert(flag->name).second) {
      return Status::invalid(std::string(name) + ": given more than once");
    }
    SP_RETURN_IF_ERROR(flag->apply(args, flag->name, value));
  }
  if (args.plugin_path.empty()) return Status::invalid("missing --plugin");
  if (args.policy.run_as && (!seen.contains("--run-as-uid") || !seen.contains("--run-as-gid"))) {
    return Status::invalid("--run-as-uid and --run-as-gid go together");
  }
  const std::pair<const char*, int> fds[] = {
      {"--channel-fd", args.channel_fd}, {"--doorbell-fd", args.doorbell_fd},
      {"--plugin-fd", args.plugin_fd},   {"--plugin-dir-fd", args.plugin_dir_fd},
      {"--gate-fd", args.gate_fd},       {"--manager-pidfd", args.manager_pidfd}};
  for (std::size_t i = 0; i < std::size(fds); ++i) {
    for (std::size_t j = i + 1; j < std::size(fds); ++j) {
      if (fds[i].second >= 0 && fds[i].second == fds[j].second) {
        return Status::invalid(std::string(fds[i].first) + " and " + fds[j].first + " are both " +
                               std::to_string(fds[i].second));
      }
    }
  }
  return args;
}

bool same_launch(const WorkerArgs& a, const WorkerArgs& b) {
  return a.plugin_config_json == b.plugin_config_json && to_argv(a) == to_argv(b);
}

std::vector<std::string> worker_environment(const SandboxPolicy& policy) {
  std::vector<std::string> env;
  for (const std::string& name : policy.keep_env) {
    if (const char* value = std::getenv(name.c_str())) env.push_back(name + "=" + value);
  }
  return env;
}

}  // namespace sandpool::sandbox
