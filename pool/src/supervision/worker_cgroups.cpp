#include "supervision/worker_cgroups.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>

#include <sandpool/base/posix_call.hpp>
#include <sandpool/base/thread_annotations.hpp>

namespace sandpool::supervision {
namespace {

// A round kills what a cgroup lists and waits for it, then tries rmdir; another round is
// needed only for a fork that raced the kill (v1), or a cgroup the kernel still holds.
constexpr int kRemoveRounds = 12;
// How long SIGKILLed processes get to exit: generous, for a loaded machine; one that takes
// longer is stuck in the kernel, and its cgroup is left to the tree (see CgroupTree).
constexpr std::chrono::milliseconds kExitBound{10000};
constexpr std::uint64_t kCpuPeriodUs = 100000;
constexpr std::string_view kParentPrefix = "sandpool-";
constexpr std::string_view kManagerLeaf = "sandpool-manager";

std::string join(const std::string& dir, std::string_view name) {
  return dir + "/" + std::string(name);
}

// A pool name as a directory name: anything but [A-Za-z0-9_-] becomes '_'.
std::string dir_name(std::string_view pool) {
  std::string out(pool.empty() ? "pool" : pool);
  for (char& c : out) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-';
    if (!ok) c = '_';
  }
  return out;
}

bool is_errno(const Status& s, int err) { return !s && s.sys_errno() == err; }

// The manager's own parents in `base` named sandpool-<pid> whose pid is dead: what a
// SIGKILLed manager left behind.
void remove_stale_parents(CgroupFs& fs, const std::string& base, CgroupVersion v) {
  for (const std::string& name : fs.sub_dirs(base)) {
    if (name.rfind(kParentPrefix, 0) != 0) continue;
    const std::string_view digits = std::string_view(name).substr(kParentPrefix.size());
    pid_t pid = 0;
    auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), pid);
    if (ec != std::errc() || ptr != digits.data() + digits.size() || pid <= 0) continue;
    if (pid == ::getpid() || !fs.alive(pid)) (void)remove_cgroup(fs, join(base, name), v);
  }
}

// The processes of a cgroup, each opened (a pidfd) and confirmed a member after the open.
struct Members {
  std::vector<std::unique_ptr<OpenedProcess>> opened;
  Status unopened;  // the first member that could not be opened (EMFILE ...), if any
};

// Reads cgroup.procs, opens each pid, and keeps the processes that the file still lists
// after they were opened. A pid read from the file may have been freed and reused by another
// process before the open; a process opened that still has its pid when the file is read
// again is the member, and one that has exited since can no longer be signalled at all. (A
// member that moved itself out after the second read is still the worker's own process.)
Members open_members(CgroupFs& fs, const std::string& dir) {
  const std::string procs_file = join(dir, "cgroup.procs");
  Members out;
  auto listed = fs.read(procs_file);
  if (!listed) return out;  // gone, or unreadable: rmdir says which
  for (pid_t pid : parse_pids(*listed)) {
    auto p = fs.open_process(pid);
    if (!p) {
      if (out.unopened) out.unopened = p.status();
      continue;
    }
    if (*p) out.opened.push_back(std::move(p).value());
  }
  if (out.opened.empty()) return out;
  auto again = fs.read(procs_file);
  const std::vector<pid_t> still = again ? parse_pids(*again) : std::vector<pid_t>{};
  std::erase_if(out.opened, [&](const std::unique_ptr<OpenedProcess>& p) {
    return std::find(still.begin(), still.end(), p->pid()) == still.end();
  });
  return out;
}

// Waits until each of `processes` has exited, kExitBound at most; kTimeout names those left.
Status wait_exited(const std::vector<std::unique_ptr<OpenedProcess>>& processes) {
  const auto deadline = std::chrono::steady_clock::now() + kExitBound;
  std::string alive;
  for (const auto& p : processes) {
    // Past the deadline, each of the rest is only looked at.
    if (!p->wait_exited(deadline)) alive += (alive.empty() ? "" : " ") + std::to_string(p->pid());
  }
  if (alive.empty()) return Status::ok();
  return Status::error(Code::kTimeout, "SIGKILLed process(es) " + alive + " still alive after " +
                                           std::to_string(kExitBound.count()) + " ms");
}

// The tree system() hands out. Its mutex serialises system() with the end of that tree: a
// tree going away removes "sandpool-<pid>", which a new one for the same process may be
// creating at that moment.
struct SystemTree {
  Mutex mu;
  std::weak_ptr<CgroupTree> current GUARDED_BY(mu);
};
SystemTree& system_tree() {
  static SystemTree tree;
  return tree;
}

}  // namespace

Status remove_cgroup(CgroupFs& fs, const std::string& dir, CgroupVersion version) {
  Status last;
  for (int round = 0; round < kRemoveRounds; ++round) {
    // A sub-cgroup that cannot go (a process stuck in the kernel) keeps this one too; the
    // others are removed all the same.
    Status subs;
    for (const std::string& sub : fs.sub_dirs(dir)) {
      if (Status s = remove_cgroup(fs, join(dir, sub), version); !s && subs) subs = s;
    }
    if (!subs) return subs;
    // v2 (5.14+): one write kills the whole cgroup, forks in flight included, and the
    // processes are only waited for. v1, or an older v2: the members are SIGKILLed one by one
    // through their pidfds; a process forked meanwhile is killed next round (a SIGKILLed
    // process forks no more, so the rounds converge). Either way rmdir fails (EBUSY) until
    // each has left on its way out.
    const bool kernel_kills =
        version == CgroupVersion::kV2 && fs.write(join(dir, "cgroup.kill"), "1").is_ok();
    const Members members = open_members(fs, dir);
    if (!kernel_kills) {
      // Without cgroup.kill, a member that cannot be opened cannot be killed safely.
      if (!members.unopened.is_ok()) {
        return members.unopened.with_context("cgroup " + dir + " still populated (not signalled)");
      }
      for (const auto& m : members.opened) {
        if (Status s = m->kill(); !s) return s.with_context("cgroup " + dir);
      }
    }
    if (Status s = wait_exited(members.opened); !s) {
      return s.with_context("cgroup " + dir + " still populated");
    }
    last = fs.remove_dir(dir);
    if (last || is_errno(last, ENOENT)) return Status::ok();
    if (!is_errno(last, EBUSY)) return last;
    // Nothing to wait for, yet busy: give the kernel a moment.
    if (members.opened.empty()) fs.back_off(round);
  }
  return last.with_context("still populated after " + std::to_string(kRemoveRounds) + " rounds");
}

// ---- CgroupTree ------------------------------------------------------------------------

CgroupTree::CgroupTree(std::shared_ptr<CgroupFs> fs, CgroupLayout layout)
    : fs_(std::move(fs)), layout_(std::move(layout)) {}

CgroupTree::~CgroupTree() {
  const auto remove_parents = [this] {
    for (const std::string& p : parents()) (void)remove_cgroup(*fs_, p, layout_.version);
  };
  if (from_system_) {
    MutexLock lock(system_tree().mu);
    remove_parents();
  } else {
    remove_parents();
  }
}

std::vector<std::string> CgroupTree::parents() const {
  std::vector<std::string> out;
  for (const std::string* p : {&memory_parent_, &pids_parent_, &cpu_parent_}) {
    if (!p->empty() && std::find(out.begin(), out.end(), *p) == out.end()) out.push_back(*p);
  }
  return out;
}

Result<std::shared_ptr<CgroupTree>> CgroupTree::open(std::shared_ptr<CgroupFs> fs,
                                                     const CgroupLayout& layout,
                                                     const std::string& parent_name) {
  std::shared_ptr<CgroupTree> tree(new CgroupTree(std::move(fs), layout));
  SP_RETURN_IF_ERROR(tree->make_parents(parent_name));
  return tree;
}

Status CgroupTree::make_parents(const std::string& parent_name) {
  CgroupFs& fs = *fs_;
  auto not_writable = [](const std::string& dir) {
    return Status::error(Code::kPermissionDenied,
                         "cgroup " + dir +
                             " is not writable: run poold as root, or as a systemd service "
                             "with Delegate=yes (cgroup v2)");
  };
  if (layout_.version == CgroupVersion::kV2) {
    const std::string& own = layout_.unified_dir;
    if (!fs.writable(own)) return not_writable(own);
    remove_stale_parents(fs, own, CgroupVersion::kV2);
    const std::string control = join(own, "cgroup.subtree_control");
    Status enabled = fs.write(control, "+memory +pids");
    if (is_errno(enabled, EBUSY)) {
      // "No internal processes": a cgroup with processes of its own cannot hand controllers
      // to its children. Move this process into a leaf of its own, then ask again.
      const std::string leaf = join(own, kManagerLeaf);
      if (Status s = fs.make_dir(leaf); !s && !is_errno(s, EEXIST)) return s;
      SP_RETURN_IF_ERROR(fs.write(join(leaf, "cgroup.procs"), std::to_string(::getpid())));
      enabled = fs.write(control, "+memory +pids");
    }
    SP_RETURN_IF_ERROR(enabled.with_context("enabling the memory and pids controllers"));
    const bool cpu = static_cast<bool>(fs.write(control, "+cpu"));  // optional: cpu_quota only
    const std::string parent = join(own, parent_name);
    SP_RETURN_IF_ERROR(fs.make_dir(parent));
    memory_parent_ = pids_parent_ = parent;
    Status sub = fs.write(join(parent, "cgroup.subtree_control"), "+memory +pids");
    if (sub && cpu && fs.write(join(parent, "cgroup.subtree_control"), "+cpu"))
      cpu_parent_ = parent;
    if (!sub) {
      (void)fs.remove_dir(parent);
      memory_parent_.clear();
      pids_parent_.clear();
      return sub;
    }
    return Status::ok();
  }
  // v1: a parent in the memory and pids hierarchies, and in cpu's when it can be had.
  struct Want {
    const char* controller;
    std::string* parent;
    bool required;
  };
  for (const Want& w : {Want{"memory", &memory_parent_, true}, Want{"pids", &pids_parent_, true},
                        Want{"cpu", &cpu_parent_, false}}) {
    auto it = layout_.v1_dirs.find(w.controller);
    if (it == layout_.v1_dirs.end()) {
      if (w.required)
        return Status::error(Code::kNotFound,
                             std::string("no ") + w.controller + " cgroup hierarchy");
      continue;
    }
    const std::string& own = it->second;
    if (!fs.writable(own)) {
      if (w.required) return not_writable(own);
      continue;
    }
    const std::string parent = join(own, parent_name);
    const bool shared = parent == memory_parent_ || parent == pids_parent_;  // co-mounted
    if (!shared) {
      remove_stale_parents(fs, own, CgroupVersion::kV1);
      if (Status s = fs.make_dir(parent); !s) {
        if (w.required) return s;
        continue;
      }
    }
    *w.parent = parent;
  }
  return Status::ok();
}

Result<std::shared_ptr<CgroupTree>> CgroupTree::system() {
  SystemTree& system = system_tree();
  MutexLock lock(system.mu);
  if (auto tree = system.current.lock()) return tree;
  auto fs = std::make_shared<PosixCgroupFs>();
  auto sources = read_cgroup_sources(*fs);
  if (!sources) return sources.status();
  auto layout = detect_cgroup_layout(*sources, *fs);
  if (!layout) return layout.status();
  auto tree = open(fs, *layout, std::string(kParentPrefix) + std::to_string(::getpid()));
  if (!tree) return tree.status();
  (*tree)->from_system_ = true;  // from here on it is not destroyed while the lock is held
  system.current = *tree;
  return tree;
}

Result<std::unique_ptr<WorkerCgroup>> CgroupTree::create(std::string_view pool,
                                                         const CgroupLimits& limits) {
  CgroupFs& fs = *fs_;
  const std::string name =
      dir_name(pool) + "-" + std::to_string(next_.fetch_add(1, std::memory_order_relaxed));
  if (limits.cpus > 0 && cpu_parent_.empty()) {
    return Status::error(Code::kNotFound,
                         "a CPU quota needs the cpu cgroup controller, which is not available "
                         "(not mounted, or not delegated)");
  }
  const std::uint64_t quota_us = static_cast<std::uint64_t>(
      std::max(1000.0, std::round(limits.cpus * static_cast<double>(kCpuPeriodUs))));

  std::vector<std::string> dirs;
  auto undo = [&](Status s) {
    for (const std::string& d : dirs) (void)fs.remove_dir(d);
    return s.with_context("cgroup for a worker of pool '" + std::string(pool) + "'");
  };
  auto add_dir = [&](const std::string& parent) -> Result<std::string> {
    const std::string dir = join(parent, name);
    if (std::find(dirs.begin(), dirs.end(), dir) != dirs.end()) return dir;  // co-mounted
    SP_RETURN_IF_ERROR(fs.make_dir(dir));
    dirs.push_back(dir);
    return dir;
  };
  auto memory = add_dir(memory_parent_);
  if (!memory) return undo(memory.status());
  auto pids = add_dir(pids_parent_);
  if (!pids) return undo(pids.status());
  std::string cpu;
  if (limits.cpus > 0) {
    auto d = add_dir(cpu_parent_);
    if (!d) return undo(d.status());
    cpu = *d;
  }

  Status s;
  const std::string bytes = std::to_string(limits.memory_bytes);
  if (version() == CgroupVersion::kV2) {
    if (limits.memory_bytes > 0) {
      s = fs.write(join(*memory, "memory.max"), bytes);
      // No swap to escape into; absent when the kernel has no swap accounting.
      if (Status sw = fs.write(join(*memory, "memory.swap.max"), "0"); s && !is_errno(sw, ENOENT)) {
        s = sw;
      }
    }
    // The OOM killer takes the whole worker (its forks too), not one process of it.
    if (Status g = fs.write(join(*memory, "memory.oom.group"), "1"); s && !is_errno(g, ENOENT)) {
      s = g;
    }
    if (s && limits.pids > 0) s = fs.write(join(*pids, "pids.max"), std::to_string(limits.pids));
    if (s && limits.cpus > 0) {
      s = fs.write(join(cpu, "cpu.max"),
                   std::to_string(quota_us) + " " + std::to_string(kCpuPeriodUs));
    }
  } else {
    if (limits.memory_bytes > 0) {
      s = fs.write(join(*memory, "memory.limit_in_bytes"), bytes);
      // memory+swap, where the kernel accounts swap: without it the worker could swap out.
      const std::string memsw = join(*memory, "memory.memsw.limit_in_bytes");
      if (s && fs.exists(memsw)) s = fs.write(memsw, bytes);
    }
    if (s && limits.pids > 0) s = fs.write(join(*pids, "pids.max"), std::to_string(limits.pids));
    if (s && limits.cpus > 0) {
      s = fs.write(join(cpu, "cpu.cfs_period_us"), std::to_string(kCpuPeriodUs));
      if (s) s = fs.write(join(cpu, "cpu.cfs_quota_us"), std::to_string(quota_us));
    }
  }
  if (!s) return undo(s);
  return std::unique_ptr<WorkerCgroup>(
      new WorkerCgroup(shared_from_this(), std::move(dirs), *memory, limits.memory_bytes > 0));
}

// ---- WorkerCgroup ----------------------------------------------------------------------

WorkerCgroup::WorkerCgroup(std::shared_ptr<CgroupTree> tree, std::vector<std::string> dirs,
                           std::string memory_dir, bool memory_limited)
    : tree_(std::move(tree)),
      dirs_(std::move(dirs)),
      memory_dir_(std::move(memory_dir)),
      memory_limited_(memory_limited) {}

WorkerCgroup::~WorkerCgroup() { (void)destroy(); }

Status WorkerCgroup::place(pid_t pid) {
  // v1 cgroup.procs moves every thread of the process, like v2's.
  for (const std::string& d : dirs_) {
    SP_RETURN_IF_ERROR(tree_->fs().write(join(d, "cgroup.procs"), std::to_string(pid)));
  }
  return Status::ok();
}

Result<UniqueFd> WorkerCgroup::open_for_clone() const {
  if (version() != CgroupVersion::kV2) {
    return Status::invalid("CLONE_INTO_CGROUP needs cgroup v2");
  }
  const std::string& dir = dirs_.front();
  auto fd = posix_call("open(" + dir + ")",
                       [&] { return ::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC); });
  if (!fd) return fd.status();
  return UniqueFd(*fd);
}

bool WorkerCgroup::oom_killed() const {
  CgroupFs& fs = tree_->fs();
  if (version() == CgroupVersion::kV2) {
    auto events = fs.read(join(memory_dir_, "memory.events"));
    return events && keyed_value(*events, "oom_kill") > 0;
  }
  if (auto control = fs.read(join(memory_dir_, "memory.oom_control"))) {
    const long long kills = keyed_value(*control, "oom_kill");
    if (kills >= 0) return kills > 0;
  }
  // Before 4.13 v1 counted no kills: the limit being hit is the best evidence there is.
  if (!memory_limited_) return false;
  auto failcnt = fs.read(join(memory_dir_, "memory.failcnt"));
  long long n = 0;
  return failcnt &&
         std::from_chars(failcnt->data(), failcnt->data() + failcnt->size(), n).ec == std::errc() &&
         n > 0;
}

Status WorkerCgroup::destroy() {
  if (destroyed_) return Status::ok();
  Status first;
  for (const std::string& d : dirs_) {
    Status s = remove_cgroup(tree_->fs(), d, version());
    if (first && !s) first = s;
  }
  destroyed_ = first.is_ok();
  return first;
}

}  // namespace sandpool::supervision
