#include "crash_points.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include <sandpool/control/client.hpp>

extern char** environ;

namespace sandpool::crash_points {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr auto kPatience = 60s;  // for a poold to start or stop, a task to end

std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The last `n` bytes of a log, for a problem's message.
std::string tail_of(const fs::path& p, std::size_t n = 600) {
  const std::string s = slurp(p);
  return s.size() > n ? s.substr(s.size() - n) : s;
}

// A poold child process, output appended to `log`; killed (SIGKILL) and reaped when dropped
// while it still runs.
class Child {
 public:
  Child(const fs::path& bin, const fs::path& config, const fs::path& log,
        const std::vector<std::string>& env) {
    std::vector<std::string> args{bin.string(), "--config", config.string()};
    std::vector<std::string> environment;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string entry(*e);
      if (entry.rfind("SANDPOOL_SQLITE_FAULT", 0) != 0) environment.push_back(entry);
    }
    for (const std::string& e : env) environment.push_back(e);
    std::vector<char*> argv, envp;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : environment) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::error_code ec;
    log_from_ = fs::exists(log, ec) ? fs::file_size(log, ec) : 0;  // its own lines follow
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    pid_ = ::fork();  // the child makes only async-signal-safe calls before exec
    if (pid_ == 0) {
      if (fd >= 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
      }
      ::execve(argv[0], argv.data(), envp.data());
      ::_exit(127);
    }
    if (fd >= 0) ::close(fd);
    log_ = log;
  }
  ~Child() { kill(); }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  bool started() const { return pid_ > 0; }

  // Returns the exit code (or 128+signal) once the process has exited, nullopt while it runs.
  std::optional<int> poll_exit() {
    if (exit_code_ || pid_ <= 0) return exit_code_;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    return exit_code_;
  }
  // Waits up to kPatience for the exit; its code, or nullopt.
  std::optional<int> wait_exit() {
    const auto until = std::chrono::steady_clock::now() + kPatience;
    while (!poll_exit() && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(5ms);
    return exit_code_;
  }
  // True once the log says "poold ready"; false when the process exited first or kPatience
  // passed.
  bool wait_ready() {
    const auto until = std::chrono::steady_clock::now() + kPatience;
    while (std::chrono::steady_clock::now() < until) {
      if (slurp(log_).find("poold ready", log_from_) != std::string::npos) return true;
      if (poll_exit()) return false;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }
  void kill() {
    if (pid_ > 0 && !poll_exit()) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
      exit_code_ = 128 + SIGKILL;
    }
  }

 private:
  pid_t pid_ = -1;
  fs::path log_;
  std::uintmax_t log_from_ = 0;  // the log's size when this process started
  std::optional<int> exit_code_;
};

// The config of every run: three pools of one worker each, the journal on (sync: full, the
// default), shutdown_timeout 0.
std::string config_text(const fs::path& dir, const fs::path& plugins,
                        const std::string& unfinished) {
  std::string pools;
  for (const char* name : {"echo", "flaky", "sleep"}) {
    pools += std::string("  - name: ") + name +
             "\n    plugin: " + (plugins / (std::string("lib") + name + ".so")).string() +
             "\n    workers: {min: 1, max: 1, initial: 1}\n    task_defaults: {timeout: 1m}\n";
  }
  return "service:\n  socket: {path: " + (dir / "poold.sock").string() +
         "}\n  state_dir: " + (dir / "state").string() +
         "\n  http: {listen: 127.0.0.1:0}\n  log: {level: info}\n  shutdown_timeout: 0s\n"
         "  shutdown_unfinished: " +
         unfinished + "\npools:\n" + pools;
}

SubmitRequest request(std::string type, std::string payload) {
  SubmitRequest r;
  r.type = std::move(type);
  r.payload = std::move(payload);
  return r;
}

// Polls `done` every 10 ms for up to kPatience.
template <class F>
bool poll_until(F done) {
  const auto until = std::chrono::steady_clock::now() + kPatience;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

std::optional<Client> connect(const fs::path& dir) {
  auto c = Client::connect((dir / "poold.sock").string());
  if (!c) return std::nullopt;
  return std::move(c).value();
}

// The letters the store holds for `task_id`.
std::optional<std::uint64_t> letters_of(Client& c, std::uint64_t task_id) {
  ops::DlqListArgs args;
  args.limit = 10000;
  auto l = c.dlq_list(args);
  if (!l) return std::nullopt;
  std::uint64_t n = 0;
  for (const auto& e : l->entries) n += e.task.id == task_id ? 1 : 0;
  return n;
}

// What one run of a scenario saw: the ids of the tasks the client was told were accepted
// (for a replay: the letter's task), and whether a call failed (poold died under it).
struct Outcome {
  std::vector<std::uint64_t> acked;
  bool cut = false;
};

// One run of the path's scenario against a poold that may die at any write.
Outcome scenario(Path path, const fs::path& dir, Child& poold) {
  Outcome o;
  auto c = connect(dir);
  if (!c) {
    o.cut = true;
    return o;
  }
  switch (path) {
    case Path::kFinish:
    case Path::kDeadLetter: {
      SubmitRequest r =
          path == Path::kFinish ? request("echo", "crash point") : request("flaky", "");
      if (path == Path::kDeadLetter) r.options.retries = 0;
      auto s = c->submit(r);
      if (!s) {
        o.cut = true;
        return o;
      }
      o.acked.push_back(s->id);
      o.cut = !c->wait(s->id, kPatience);
      return o;
    }
    case Path::kStopKeep: {
      auto s = c->submit(request("sleep", "400"));
      if (!s) {
        o.cut = true;
        return o;
      }
      o.acked.push_back(s->id);
      (void)poll_until([&] {
        auto t = c->task(s->id);
        o.cut = !t;
        return !t || t->state == "running";
      });
      if (!o.cut) (void)c->shutdown();
      (void)poold.wait_exit();
      return o;
    }
    case Path::kReplay: {
      auto l = c->dlq_list();
      if (!l || l->entries.size() != 1) {
        o.cut = true;
        return o;
      }
      const std::uint64_t task_id = l->entries[0].task.id;
      o.acked.push_back(task_id);
      ops::DlqSelector sel;
      sel.id = l->entries[0].letter_id;
      o.cut = !c->dlq_replay(sel) || !c->wait(task_id, kPatience);
      return o;
    }
  }
  return o;
}

// Prepares the state dir every run of `path` starts from, in `dir`: a store created by the
// plain poold and, for a replay, one letter.
bool prepare(Path path, const Setup& s, const fs::path& dir, std::vector<std::string>* problems) {
  fs::create_directories(dir);
  const bool replay = path == Path::kReplay;
  std::ofstream(dir / "poold.yaml")
      << config_text(dir, s.plugin_dir, replay ? "dead_letter" : "keep");
  Child poold(s.poold, dir / "poold.yaml", dir / "poold.log", {});
  if (!poold.wait_ready()) {
    problems->push_back("prepare: poold did not start: " + tail_of(dir / "poold.log"));
    return false;
  }
  auto c = connect(dir);
  if (!c) {
    problems->push_back("prepare: cannot connect");
    return false;
  }
  if (replay) {
    auto t = c->submit(request("sleep", "300"));
    if (!t || !poll_until([&] {
          auto a = c->task(t->id);
          return a && a->state == "running";
        })) {
      problems->push_back("prepare: the sleep task did not run");
      return false;
    }
  }
  (void)c->shutdown();
  if (poold.wait_exit() != 0) {
    problems->push_back("prepare: poold did not stop cleanly: " + tail_of(dir / "poold.log"));
    return false;
  }
  if (replay) {
    Child again(s.poold, dir / "poold.yaml", dir / "poold.log", {});
    auto letters = again.wait_ready() ? connect(dir) : std::nullopt;
    bool one = false;
    if (letters) {
      auto l = letters->dlq_list();
      one = l && l->entries.size() == 1;
      (void)letters->shutdown();
    }
    (void)again.wait_exit();
    if (!one) {
      problems->push_back("prepare: the stop left no single letter");
      return false;
    }
  }
  // Every later run uses shutdown_unfinished: keep (the default).
  std::ofstream(dir / "poold.yaml") << config_text(dir, s.plugin_dir, "keep");
  return true;
}

// A fresh copy of the prepared state in `run`; returns the config path.
fs::path copy_prepared(const fs::path& prepared, const fs::path& run, const Setup& s) {
  std::error_code ec;
  fs::remove_all(run, ec);
  fs::create_directories(run);
  fs::copy(prepared / "state", run / "state", fs::copy_options::recursive, ec);
  fs::remove(run / "state" / "poold.lock", ec);
  std::ofstream(run / "poold.yaml") << config_text(run, s.plugin_dir, "keep");
  return run / "poold.yaml";
}

std::uint64_t read_count(const fs::path& p) {
  std::uint64_t n = 0;
  std::ifstream(p) >> n;
  return n;
}

// Checks, with the plain poold on the run's state dir, that each task of `ids` is in exactly
// one place; adds what is wrong to the report.
void check(const std::string& label, const std::vector<std::uint64_t>& ids, const fs::path& run,
           const Setup& s, PathReport* r) {
  Child poold(s.poold, run / "poold.yaml", run / "check.log", {});
  if (!poold.wait_ready()) {
    r->problems.push_back(label + ": poold did not start after it: " + tail_of(run / "check.log"));
    return;
  }
  auto c = connect(run);
  if (!c) {
    r->problems.push_back(label + ": cannot connect to poold after it");
    return;
  }
  for (const std::uint64_t id : ids) {
    const std::string task = label + ": task " + std::to_string(id);
    auto t = c->wait(id, kPatience);  // an open task runs to its end first
    auto letters = letters_of(*c, id);
    if (!letters) {
      r->problems.push_back(task + ": dlq list failed");
      continue;
    }
    if (!t) {
      if (*letters == 0) {
        ++r->lost;
        r->problems.push_back(task + " is lost: " + t.status().to_string() + ", no letter");
      } else if (*letters > 1) {
        ++r->dup;
        r->problems.push_back(task + " has " + std::to_string(*letters) + " letters");
      }
      continue;
    }
    std::uint64_t places = *letters;
    if (t->state == "completed" || t->state == "cancelled") {
      places += 1;
      std::uint64_t ok = 0;  // a completed task's history holds its one ok attempt
      for (const auto& a : t->account.history) ok += a.outcome == "ok" ? 1 : 0;
      if (ok > 1) {
        ++r->dup;
        r->problems.push_back(task + " completed " + std::to_string(ok) + " times");
      }
    } else if (t->state != "dead_lettered") {
      r->problems.push_back(task + " is still " + t->state + " after " +
                            std::to_string(kPatience.count()) + " s");
      continue;
    }
    if (places == 0) {
      ++r->lost;
      r->problems.push_back(task + " is lost: " + t->state + " with no letter");
    } else if (places > 1) {
      ++r->dup;
      r->problems.push_back(task + " is in " + std::to_string(places) + " places: " + t->state +
                            " and " + std::to_string(*letters) + " letters");
    }
  }
}

}  // namespace

const char* path_name(Path p) {
  switch (p) {
    case Path::kFinish:
      return "finish";
    case Path::kDeadLetter:
      return "dead_letter";
    case Path::kStopKeep:
      return "stop_keep";
    case Path::kReplay:
      return "replay";
  }
  return "?";
}

PathReport run_crash_points(Path path, const Setup& s) {
  PathReport r;
  r.path = path;
  const fs::path base = s.scratch / path_name(path);
  const fs::path prepared = base / "prepared";
  if (!prepare(path, s, prepared, &r.problems)) return r;

  // The unfaulted run: K, and the path must hold without a crash too.
  {
    const fs::path run = base / "count";
    const fs::path config = copy_prepared(prepared, run, s);
    std::vector<std::uint64_t> ids;
    {
      Child poold(s.poold_faults, config, run / "poold.log",
                  {"SANDPOOL_SQLITE_FAULT_COUNT=" + (run / "points").string()});
      if (!poold.wait_ready()) {
        r.problems.push_back("count: poold_faults did not start: " + tail_of(run / "poold.log"));
        return r;
      }
      ids = scenario(path, run, poold).acked;
      r.write_points = read_count(run / "points");
    }
    check("no crash", ids, run, s, &r);
  }

  std::vector<std::uint64_t> points;
  const std::uint64_t k = r.write_points;
  if (s.max_points == 0 || k <= s.max_points) {
    for (std::uint64_t n = 1; n <= k; ++n) points.push_back(n);
  } else {
    for (std::uint64_t i = 0; i < s.max_points; ++i) {
      points.push_back(1 + i * (k - 1) / (s.max_points - 1));
    }
  }
  for (const std::uint64_t n : points) {
    const std::string label = "crash@" + std::to_string(n);
    const fs::path run = base / "run";
    const fs::path config = copy_prepared(prepared, run, s);
    std::vector<std::uint64_t> ids;
    {
      Child poold(s.poold_faults, config, run / "poold.log", {"SANDPOOL_SQLITE_FAULT=" + label});
      if (!poold.wait_ready()) {
        r.problems.push_back(label + ": poold_faults did not start: " + tail_of(run / "poold.log"));
        continue;
      }
      const Outcome o = scenario(path, run, poold);
      ids = o.acked;
      if (o.cut) (void)poold.wait_exit();  // it died under a call: reap it, see how
      if (poold.poll_exit() == 9) ++r.crashed;
    }
    ++r.points_run;
    check(label, ids, run, s, &r);
  }
  return r;
}

}  // namespace sandpool::crash_points
