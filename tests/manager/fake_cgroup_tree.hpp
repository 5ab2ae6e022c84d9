// A cgroup tree in a temporary directory, and a CgroupFs that plays the kernel's part on it:
// a new cgroup gets the files this version's kernel would make, a populated cgroup cannot be
// removed, cgroup.kill and kill_and_wait() empty cgroup.procs. Everything else is the real
// PosixCgroupFs doing real file I/O.
#pragma once

#include <stdlib.h>
#include <unistd.h>

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
      touch(dir + "/cgroup.procs", "");
    }
    return Status::ok();
  }
  // Kills each pid; an immortal one is "still alive" when the wait ends.
  Status kill_and_wait(const std::vector<pid_t>& pids, std::chrono::milliseconds) override {
    std::string alive;
    for (pid_t pid : pids) {
      if (!kill_one(pid)) alive += " " + std::to_string(pid);
    }
    if (alive.empty()) return Status::ok();
    return Status::error(Code::kTimeout, "SIGKILLed process(es)" + alive + " still alive");
  }
  // Returns false iff the pid is immortal.
  bool kill_one(pid_t pid) {
    killed.push_back(pid);
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

  std::vector<pid_t> pids_in(const std::string& dir) const {
    auto text = read(dir + "/cgroup.procs");
    return text ? supervision::parse_pids(*text) : std::vector<pid_t>{};
  }
  // Removes pid from every cgroup.procs of the hierarchy `except` is in (v1 has one per
  // controller: /sys/fs/cgroup/<name>), except `except` itself.
  void leave(pid_t pid, const std::string& except) {
    std::string scope = root;
    const std::string top = root + "/sys/fs/cgroup/";
    if (version_ == supervision::CgroupVersion::kV1 && except.rfind(top, 0) == 0) {
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
  std::set<pid_t> live;  // pids alive() reports
  std::vector<pid_t> killed;
  int back_offs = 0;
  int busy_removals = 0;  // rmdirs refused (EBUSY) though nothing is listed, before one works

 private:
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
