// A cgroup tree in a temporary directory, and a CgroupFs that plays the kernel's part on it:
// a new cgroup gets the files this version's kernel would make, a populated cgroup cannot be
// removed, cgroup.kill and killing an opened process empty cgroup.procs. Everything else is the
// real PosixCgroupFs doing real file I/O.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "supervision/cgroup_fs.hpp"
#include "supervision/cgroup_layout.hpp"

namespace sandpool::testing {

class FakeCgroupKernel final : public supervision::PosixCgroupFs {
 public:
  explicit FakeCgroupKernel(supervision::CgroupVersion v) : version_(v) {}

  Status make_dir(const std::string& path) override {
    SP_RETURN_IF_ERROR(PosixCgroupFs::make_dir(path));
    for (const std::string& f : files_for(path)) {
      if (missing.count(f) == 0) touch(path + "/" + f, "");
    }
    return Status::ok();
  }
  Status remove_dir(const std::string& path) override {
    if (!std::filesystem::exists(path)) return Status::from_errno(ENOENT, "rmdir(" + path + ")");
    auto procs = read(path + "/cgroup.procs");
    if ((procs && !supervision::parse_pids(*procs).empty()) || busy_removals > 0) {
      if (busy_removals > 0) --busy_removals;
      return Status::from_errno(EBUSY, "rmdir(" + path + ")");
    }
    std::filesystem::remove_all(path);
    return Status::ok();
  }
  Status write(const std::string& path, std::string_view value) override {
    if (refuse.count(path) != 0) return Status::from_errno(refuse_errno, "write(" + path + ")");
    const std::string dir = std::filesystem::path(path).parent_path();
    const std::string name = std::filesystem::path(path).filename();
    if (name == "cgroup.subtree_control" && dir != hierarchy_root && !pids_in(dir).empty()) {
      return Status::from_errno(EBUSY, "write(" + path + ")");  // no internal processes
    }
    if (name == "cgroup.procs") {  // a move: out of every other cgroup of the hierarchy
      const pid_t pid = std::stoi(std::string(value));
      if (!std::filesystem::exists(path)) return Status::from_errno(ENOENT, "open(" + path + ")");
      leave(pid, path);
      touch(path, text_of(pids_in(dir)) + std::to_string(pid) + "\n");
      return Status::ok();
    }
    SP_RETURN_IF_ERROR(PosixCgroupFs::write(path, value));
    if (name == "cgroup.kill" && value == "1") {
      for (pid_t p : pids_in(dir)) killed.push_back(p);
      // A real kill takes a moment: the dying stay listed until they have exited.
      if (!kill_takes_time) touch(dir + "/cgroup.procs", "");
    }
    return Status::ok();
  }
  // The process that has `pid` now: a member of the tree, an outsider that took over the
  // pid of a member that exited (`reused`), or none.
  Result<std::unique_ptr<supervision::OpenedProcess>> open_process(pid_t pid) override {
    if (unopenable.count(pid) != 0) {
      return Status::from_errno(EMFILE, "pidfd_open(" + std::to_string(pid) + ")");
    }
    const bool outsider = reused.count(pid) != 0;
    if (outsider) {
      leave(pid, "");  // the member that had it exited before the open
    } else if (!listed_anywhere(pid)) {
      return std::unique_ptr<supervision::OpenedProcess>();
    }
    return std::unique_ptr<supervision::OpenedProcess>(new Process(*this, pid, outsider));
  }
  // Returns false iff the pid is immortal.
  bool kill_one(pid_t pid, bool record = true) {
    if (record) killed.push_back(pid);
    if (immortal.count(pid) != 0) return false;
    auto child = fork_on_kill.find(pid);
    for (auto& e : std::filesystem::recursive_directory_iterator(root)) {
      if (e.path().filename() != "cgroup.procs") continue;
      std::vector<pid_t> kept = pids_in(e.path().parent_path());
      // The dead leave every cgroup they were in; a fork that raced the kill takes its place.
      if (std::erase(kept, pid) != 0 && child != fork_on_kill.end()) kept.push_back(child->second);
      touch(e.path(), text_of(kept));
    }
    if (child != fork_on_kill.end()) fork_on_kill.erase(child);
    return true;
  }
  bool writable(const std::string& dir) const override { return read_only.count(dir) == 0; }
  bool alive(pid_t pid) const override { return live.count(pid) != 0; }
  void back_off(int) override { ++back_offs; }

  bool listed_anywhere(pid_t pid) const {
    for (auto& e : std::filesystem::recursive_directory_iterator(root)) {
      if (e.path().filename() != "cgroup.procs") continue;
      for (pid_t p : pids_in(e.path().parent_path())) {
        if (p == pid) return true;
      }
    }
    return false;
  }
  std::vector<pid_t> pids_in(const std::string& dir) const {
    auto text = read(dir + "/cgroup.procs");
    return text ? supervision::parse_pids(*text) : std::vector<pid_t>{};
  }
  // Removes pid from every cgroup.procs of the hierarchy `except` is in (v1 has one per
  // controller: /sys/fs/cgroup/<name>), except `except` itself.
  void leave(pid_t pid, const std::string& except) {
    std::string scope = root;
    const std::string top = root + "/sys/fs/cgroup/";
    if (version_ == supervision::CgroupVersion::kV1 && !except.empty() &&
        except.rfind(top, 0) == 0) {
      scope = top + except.substr(top.size(), except.find('/', top.size()) - top.size());
    }
    for (auto& e : std::filesystem::recursive_directory_iterator(scope)) {
      if (e.path().filename() != "cgroup.procs" || e.path() == except) continue;
      std::vector<pid_t> kept = pids_in(e.path().parent_path());
      std::erase(kept, pid);
      touch(e.path(), text_of(kept));
    }
  }
  static std::string text_of(const std::vector<pid_t>& pids) {
    std::string out;
    for (pid_t p : pids) out += std::to_string(p) + "\n";
    return out;
  }
  static void touch(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::trunc) << text;
  }

  std::string root;                     // the tree's top directory, for kill_one()'s sweep
  std::string hierarchy_root;           // v2: the root cgroup, exempt from "no internal processes"
  std::set<std::string> read_only;      // directories writable() denies
  std::set<std::string> missing;        // files this kernel does not make in a new cgroup
  std::set<pid_t> immortal;             // pids that kill_one() does not remove
  std::map<pid_t, pid_t> fork_on_kill;  // killing the key leaves the value (a fork) behind
  std::set<std::string> refuse;         // writes to these paths fail with refuse_errno
  int refuse_errno = EACCES;
  std::set<pid_t> live;          // pids alive() reports
  std::set<pid_t> reused;        // pids a member had, and an outsider has by the time of the open
  std::set<pid_t> unopenable;    // pids open_process() fails for (EMFILE)
  bool kill_takes_time = false;  // cgroup.kill leaves the processes listed until waited for
  std::vector<pid_t> killed;     // by cgroup.kill or through an opened process
  std::vector<pid_t> signalled;  // through an opened process, members and outsiders
  std::vector<pid_t> outsiders_signalled;
  int back_offs = 0;
  int busy_removals = 0;  // rmdirs refused (EBUSY) though nothing is listed, before one works

 private:
  class Process final : public supervision::OpenedProcess {
   public:
    Process(FakeCgroupKernel& k, pid_t pid, bool outsider)
        : k_(k), pid_(pid), outsider_(outsider) {}
    pid_t pid() const override { return pid_; }
    Status kill() override {
      k_.signalled.push_back(pid_);
      if (outsider_) {
        k_.outsiders_signalled.push_back(pid_);
      } else {
        dead_ = k_.kill_one(pid_);
      }
      return Status::ok();
    }
    // A member killed (by cgroup.kill or kill()) exits at once unless immortal; an outsider
    // lives on.
    bool wait_exited(std::chrono::steady_clock::time_point) override {
      if (outsider_ || k_.immortal.count(pid_) != 0) return false;
      const bool by_cgroup_kill =
          std::find(k_.killed.begin(), k_.killed.end(), pid_) != k_.killed.end();
      if (!dead_ && by_cgroup_kill) dead_ = k_.kill_one(pid_, /*record=*/false);
      return dead_;
    }

   private:
    FakeCgroupKernel& k_;
    pid_t pid_;
    bool outsider_;
    bool dead_ = false;
  };

  std::vector<std::string> files_for(const std::string&) const {
    if (version_ == supervision::CgroupVersion::kV2) {
      return {"cgroup.procs", "cgroup.kill",     "cgroup.controllers", "cgroup.subtree_control",
              "memory.max",   "memory.swap.max", "memory.oom.group",   "memory.events",
              "pids.max",     "cpu.max"};
    }
    return {"cgroup.procs",
            "tasks",
            "memory.limit_in_bytes",
            "memory.memsw.limit_in_bytes",
            "memory.oom_control",
            "memory.failcnt",
            "pids.max",
            "cpu.cfs_quota_us",
            "cpu.cfs_period_us"};
  }
  supervision::CgroupVersion version_;
};

// A temporary directory removed with everything under it.
struct ScratchDir {
  ScratchDir() {
    char tmpl[] = "/tmp/sandpool-cgroup-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  std::string path;
};

}  // namespace sandpool::testing
