#include "hostile_world.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>

#include "host_cgroups.hpp"

namespace sandpool::hostile {
namespace {

using sandpool::testing::kPatience;

constexpr int kOrdinaryTasks = 4;  // per pool that serves "echo", alongside each attack

// The shared memory objects (shm_open's and sem_open's files) in /dev/shm. Directories are
// not: the bench's Redis keeps its append-only file in one, and its bench test may run beside
// a hostile case (ctest -j2).
std::set<std::string> shm_entries() {
  std::set<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm", ec)) {
    if (!e.is_directory(ec)) names.insert(e.path().filename().string());
  }
  return names;
}

// Every process's parent, from /proc/<pid>/stat ("pid (comm) state ppid ...": comm may hold
// spaces and parentheses, so the fields are read after the last ')').
std::map<int, int> parent_of_every_process() {
  std::map<int, int> parent;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    // The whole file (a comm may hold a newline), through getline, not istreambuf_iterator:
    // a process that exits while its stat is read fails the read with ESRCH, which the
    // iterator throws and getline reports as a failed stream.
    std::ifstream in(e.path() / "stat");
    std::string stat;
    std::getline(in, stat, '\0');
    const auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 1));
    char state = 0;
    int ppid = 0;
    if (rest >> state >> ppid) parent[std::stoi(name)] = ppid;
  }
  return parent;
}

// "pid (comm) state S, parent P": what a stray-process failure shows.
std::string describe_process(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  const auto close = stat.rfind(')');
  if (close == std::string::npos) return std::to_string(pid) + " (gone)";
  std::istringstream rest(stat.substr(close + 1));
  char state = '?';
  int ppid = 0;
  rest >> state >> ppid;
  return stat.substr(0, close + 1) + " state " + state + ", parent " + std::to_string(ppid);
}

// Reaps every child of ours that has exited, and no other (WNOHANG): after the pools
// closed, those are orphans of workers, killed with their cgroups, that came to us.
void reap_dead_children() {
  for (;;) {
    siginfo_t info{};
    if (::waitid(P_ALL, 0, &info, WEXITED | WNOHANG) != 0) {
      if (errno == EINTR) continue;
      return;  // ECHILD: no child at all
    }
    if (info.si_pid == 0) return;  // children, but none exited
  }
}

// Submits an ordinary echo task whose payload names it; the test fails if it cannot.
Ticket submit_echo(Pool& pool, const std::string& payload) {
  auto t = pool.submit("echo", payload);
  if (!t) FAIL("submit echo: " << t.status().to_string());
  return std::move(t).value();
}

void require_completed_echo(Ticket& t, const std::string& payload) {
  REQUIRE(t.wait_for(kPatience));
  const TaskResult r = t.wait();
  INFO("ordinary task " << payload << ": " << to_string(r.state) << " " << r.error);
  CHECK(r.state == TaskState::kCompleted);
  CHECK(r.result == payload);
}

}  // namespace

std::string hostile_plugin(const std::string& name) {
  return std::string(SANDPOOL_HOSTILE_PLUGIN_DIR) + "/lib" + name + ".so";
}

std::string integration_plugin(const std::string& name) {
  return std::string(SANDPOOL_TEST_PLUGIN_DIR) + "/lib" + name + ".so";
}

std::string worker_host_plugin(const std::string& name) {
  return std::string(SANDPOOL_WH_TEST_PLUGIN_DIR) + "/lib" + name + ".so";
}

void skip_test(const std::string& reason) {
  std::fprintf(stderr, "SKIPPED: %s\n", reason.c_str());
  std::fflush(stderr);
  std::_Exit(kSkipExitCode);
}

void CapturedLog::sink_it_(const spdlog::details::log_msg& msg) {
  std::lock_guard lock(lines_mu_);
  lines_.emplace_back(msg.payload.data(), msg.payload.size());
}

std::vector<std::string> CapturedLog::lines() {
  std::lock_guard lock(lines_mu_);
  return lines_;
}

std::size_t CapturedLog::count(std::string_view needle) {
  std::lock_guard lock(lines_mu_);
  return static_cast<std::size_t>(std::count_if(lines_.begin(), lines_.end(), [&](const auto& l) {
    return l.find(needle) != std::string::npos;
  }));
}

PoolOptions hostile_options(const std::string& plugin_path) {
  PoolOptions o = sandpool::testing::pool_options("echo", 2);
  o.name = "hostile";
  o.plugin_path = plugin_path;
  o.concurrency = 1;
  o.retries = 0;
  o.sandbox.limits.address_space = 512ull << 20;
  return o;
}

HostileWorld::HostileWorld()
    : log_(std::make_shared<CapturedLog>()),
      logger_(std::make_shared<spdlog::logger>("hostile", log_)),
      shm_before_(shm_entries()) {
  logger_->set_level(spdlog::level::debug);
  // Orphans (a worker's forked children, once the worker is gone) are re-parented to us,
  // not to init, so close_and_check_clean() sees them.
  REQUIRE(::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0);
  PoolOptions o = sandpool::testing::pool_options("echo", 1);
  o.name = "sibling";
  o.logger = logger_;
  sibling_ = sandpool::testing::make_pool(std::move(o));
}

HostileWorld::~HostileWorld() = default;

Result<std::unique_ptr<Pool>> HostileWorld::try_start(PoolOptions hostile) {
  hostile.logger = logger_;
  return Pool::create(std::move(hostile));
}

Pool& HostileWorld::start(PoolOptions hostile) {
  auto p = try_start(std::move(hostile));
  if (!p) FAIL("Pool::create (hostile): " << p.status().to_string());
  return adopt(std::move(p).value());
}

Pool& HostileWorld::start_with_cgroups(PoolOptions hostile) {
  hostile.sandbox.cgroup = sandbox::CgroupMode::kRequired;
  auto p = try_start(std::move(hostile));
  if (!p) {
    // The pool's own words: "sandbox.cgroup is required, but per-worker cgroups are
    // unavailable: <the directory and why>" (not root, no controllers, no delegation).
    const std::string why = p.status().to_string();
    if (why.find("per-worker cgroups are unavailable") != std::string::npos) skip_test(why);
    FAIL("Pool::create (hostile, with cgroups): " << why);
  }
  return adopt(std::move(p).value());
}

Pool& HostileWorld::adopt(std::unique_ptr<Pool> hostile) {
  hostile_ = std::move(hostile);
  const auto& types = hostile_->task_types();
  serves_echo_ = std::find(types.begin(), types.end(), "echo") != types.end();
  return *hostile_;
}

TaskResult HostileWorld::attack(const std::string& type, std::string payload, SubmitOptions so) {
  REQUIRE(hostile_);
  auto attack = hostile_->submit(type, std::move(payload), std::move(so));
  if (!attack) FAIL("submit " << type << ": " << attack.status().to_string());
  std::vector<std::pair<Ticket, std::string>> ordinary;
  for (int i = 0; i < kOrdinaryTasks; ++i) {
    const std::string beside = "beside " + type + " " + std::to_string(i);
    ordinary.emplace_back(submit_echo(*sibling_, "sibling " + beside), "sibling " + beside);
    if (serves_echo_) {
      ordinary.emplace_back(submit_echo(*hostile_, "same pool " + beside), "same pool " + beside);
    }
  }
  REQUIRE(attack->wait_for(kPatience));
  TaskResult r = attack->wait();
  for (auto& [ticket, expected] : ordinary) require_completed_echo(ticket, expected);
  require_pools_serve();
  return r;
}

void HostileWorld::require_pools_serve() {
  Ticket t = submit_echo(*sibling_, "sibling still serves");
  require_completed_echo(t, "sibling still serves");
  if (hostile_ && serves_echo_) {
    Ticket h = submit_echo(*hostile_, "hostile pool still serves");
    require_completed_echo(h, "hostile pool still serves");
  }
}

void HostileWorld::close_and_check_clean() {
  if (hostile_) {
    hostile_->close();
    final_stats_ = hostile_->stats();
  }
  sibling_->close();
  hostile_.reset();
  sibling_.reset();
  // The pools have reaped their workers, and killed what those left in their cgroups and
  // waited for it to exit. An orphan of a worker came to us (the subreaper): a dead one is
  // ours to reap, a living one is a stray.
  reap_dead_children();
  const std::vector<int> left = descendants_of(::getpid());
  std::string seen;
  for (int pid : left) seen += "\n  " + describe_process(pid);
  INFO(left.size() << " stray process(es) below the test:" << seen);
  CHECK(left.empty());
  // Clear them away, so one failing case does not fail the next in the same run: killed,
  // they come to us (the subreaper) and are reaped here, until no child is left.
  for (int pid : left) ::kill(pid, SIGKILL);
  if (!left.empty()) {
    while (::waitpid(-1, nullptr, 0) > 0 || errno == EINTR) {
    }
  }
  // Every worker's cgroup went with its worker, and the pools' parent with the last pool.
  const std::vector<std::string> cgroups = worker_cgroup_roots_left();
  std::string found;
  for (const std::string& dir : cgroups) found += describe_cgroups(dir);
  INFO(cgroups.size() << " stray worker cgroup root(s):\n" << found);
  CHECK(cgroups.empty());
  for (const std::string& dir : cgroups) remove_cgroups(dir);
  std::string new_shm;
  for (const std::string& name : shm_entries()) {
    if (!shm_before_.count(name)) new_shm += " " + name;
  }
  INFO("new /dev/shm entries:" << new_shm);
  CHECK(new_shm.empty());
}

std::vector<int> descendants_of(int root) {
  const std::map<int, int> parent = parent_of_every_process();
  std::vector<int> found;
  std::vector<int> frontier{root};
  while (!frontier.empty()) {
    const int p = frontier.back();
    frontier.pop_back();
    for (const auto& [pid, ppid] : parent) {
      if (ppid == p) {
        found.push_back(pid);
        frontier.push_back(pid);
      }
    }
  }
  return found;
}

ProcessUsage process_usage(int pid) {
  const std::string dir = "/proc/" + std::to_string(pid);
  std::ifstream stat_file(dir + "/stat");
  std::string stat;
  std::getline(stat_file, stat);
  const auto close = stat.rfind(')');
  if (close == std::string::npos) FAIL("process " << pid << " is gone: no " << dir << "/stat");
  // After the comm: state (field 3) ... utime (14) and stime (15).
  std::istringstream rest(stat.substr(close + 2));
  std::vector<std::string> fields{std::istream_iterator<std::string>(rest),
                                  std::istream_iterator<std::string>()};
  REQUIRE(fields.size() > 12);
  const long ticks_per_second = ::sysconf(_SC_CLK_TCK);
  const std::uint64_t ticks = std::stoull(fields[11]) + std::stoull(fields[12]);
  ProcessUsage u;
  u.cpu = std::chrono::milliseconds(ticks * 1000 / static_cast<std::uint64_t>(ticks_per_second));
  std::ifstream status(dir + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmHWM:", 0) == 0) u.peak_rss = std::stoull(line.substr(6)) * 1024;  // kB
  }
  return u;
}

}  // namespace sandpool::hostile
