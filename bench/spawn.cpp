// spawn: from starting a worker process to its ReadyMsg (plugin loaded and initialised,
// sandbox applied), per seccomp profile, and with full isolation (namespaces). Uses the manager's
// own WorkerProcess, so the figure includes exactly what the pool pays: memfd region, doorbell,
// vfork+exec, the worker's lock-down steps, dlopen and sp_plugin_init.
#include <poll.h>

#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <sandpool/ipc/messages.hpp>
#include <sandpool/ipc/wake.hpp>
#include <sandpool/pool/spawner.hpp>
#include <sandpool/sandbox/privileges.hpp>

#include "bench.hpp"
#include "supervision/worker_process.hpp"

namespace sandpool::bench {
namespace {

using ipc::monotonic_ns;

// Waits for the worker's ReadyMsg, sleeping on its doorbell and pidfd (no spinning: on two
// cores a spinning manager would steal the CPU the starting worker needs).
bool wait_ready(supervision::WorkerProcess& w, std::string* why) {
  ipc::MessageReceiver& rx = w.results();
  std::string msg;
  std::uint16_t kind = 0;
  const std::int64_t until = monotonic_ns() + 10'000'000'000;
  for (;;) {
    const ipc::RingStatus s = rx.next(&kind, &msg);
    if (s == ipc::RingStatus::kOk) {
      if (kind != static_cast<std::uint16_t>(ipc::MsgKind::kReady)) continue;  // a log line
      ipc::ReadyMsg ready;
      Status st = ipc::decode(msg, &ready);
      if (!st) *why = st.message();
      return st.is_ok();
    }
    if (s == ipc::RingStatus::kCorrupt) {
      *why = "result ring corrupt";
      return false;
    }
    rx.release();
    if (rx.ring().prepare_sleep()) {
      pollfd fds[2] = {{w.doorbell_fd(), POLLIN, 0}, {w.pidfd(), POLLIN, 0}};
      ::poll(fds, 2, 100);
      w.doorbell().drain();
      if ((fds[1].revents & POLLIN) != 0 && !rx.ring().has_data()) {
        *why = "the worker exited before it was ready";
        w.read_output([&](std::string_view line) { *why += "\n  " + std::string(line); });
        return false;
      }
    }
    rx.ring().cancel_sleep();
    if (monotonic_ns() > until) {
      *why = "not ready within 10 s";
      return false;
    }
  }
}

// The whole spawn, the part inside start() (region, doorbell, vfork or clone3 until the
// child has exec'd), and the CPU time the worker itself used until it was ready, in ms.
struct SpawnSamples {
  std::vector<double> total, start_call, worker_cpu;
};

// Spawns `warmup + count` workers one after the other, each until ready; keeps the samples
// of the last `count`. False (after saying why on stderr) when one fails.
bool measure_spawns(Spawner& spawner, const supervision::LaunchSpec& spec, const std::string& name,
                    std::uint32_t warmup, std::uint32_t count, SpawnSamples& out) {
  for (std::uint32_t i = 0; i < warmup + count; ++i) {
    const std::int64_t t0 = monotonic_ns();
    auto w = supervision::WorkerProcess::start(spawner, spec);
    const std::int64_t t_started = monotonic_ns();
    if (!w) {
      std::cerr << "sandpool-bench: spawn (" << name << "): " << w.status().message() << "\n";
      return false;
    }
    std::string why;
    if (!wait_ready(**w, &why)) {
      std::cerr << "sandpool-bench: spawn (" << name << "): " << why << "\n";
      return false;
    }
    const std::int64_t t1 = monotonic_ns();
    const SchedTimes cpu = pid_sched((*w)->pid());
    if (i >= warmup) {
      out.total.push_back(static_cast<double>(t1 - t0) / 1e6);
      out.start_call.push_back(static_cast<double>(t_started - t0) / 1e6);
      out.worker_cpu.push_back(static_cast<double>(cpu.on_cpu_ns) / 1e6);
    }
    // Destroying the WorkerProcess kills and reaps the worker (not timed).
  }
  return true;
}

// What a root poold gives its workers besides namespaces; each missing piece is noted.
struct FullIsolation {
  std::shared_ptr<supervision::CgroupTree> cgroups;
  std::optional<sandbox::RunAs> nobody;

  static FullIsolation probe(Report& r) {
    FullIsolation full;
    if (auto tree = supervision::CgroupTree::system(); tree) {
      full.cgroups = std::move(tree).value();
    } else {
      r.note("spawn full: without cgroups: " + tree.status().message());
    }
    if (::geteuid() == 0) {
      if (auto who = sandbox::resolve_run_as(sandbox::kDefaultSandboxUser); who) {
        full.nobody = *who;
      } else {
        r.note("spawn full: without the privilege drop: " + who.status().message());
      }
    }
    return full;
  }
};

// One row per seccomp profile with the plain vfork spawner, and "full": every namespace
// the kernel allows (the clone3 spawner), a cgroup per worker (memory and pids limits),
// the drop to `nobody` when root, and the strict profile. `off` is the rlimits-only
// profile that full isolation is measured against (full_added_p50). Landlock is in every
// row: the worker host applies it whenever the kernel has it.
// "full_no_net" and "full_no_mnt" leave out the two namespaces that cost the most to
// create, to show where full isolation's time goes.
struct Row {
  std::string name;
  sandbox::SeccompProfile profile;
  bool namespaces;
  sandbox::Namespace left_out = sandbox::Namespace::kUser;  // ignored unless namespaces
  bool leave_out = false;
};

std::shared_ptr<Clone3Spawner> clone3_for(const Row& row, const FullIsolation& full) {
  Clone3SpawnerOptions iso;
  iso.namespaces.wanted = sandbox::NamespaceSet::all();
  if (full.nobody) {
    iso.namespaces.run_as_uid = full.nobody->uid;
    iso.namespaces.run_as_gid = full.nobody->gid;
  }
  if (row.leave_out) iso.namespaces.wanted.remove(row.left_out);
  return make_clone3_spawner(iso);
}

}  // namespace

bool run_spawn(const BenchOptions& o, Report& r) {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  supervision::LaunchSpec spec;
  spec.worker_path = (self.parent_path() / "sandpool-worker").string();
  spec.args.plugin_path = plugin_path(o, "echo");
  const PoolOptions defaults;
  spec.region.task_ring_bytes = defaults.ring_bytes;
  spec.region.result_ring_bytes = defaults.ring_bytes;
  const Row rows[] = {
      {"strict", sandbox::SeccompProfile::kStrict, false},
      {"relaxed", sandbox::SeccompProfile::kRelaxed, false},
      {"off", sandbox::SeccompProfile::kOff, false},
      {"full", sandbox::SeccompProfile::kStrict, true},
      {"full_no_net", sandbox::SeccompProfile::kStrict, true, sandbox::Namespace::kNet, true},
      {"full_no_mnt", sandbox::SeccompProfile::kStrict, true, sandbox::Namespace::kMount, true}};
  auto plain = make_process_spawner();
  const FullIsolation full = FullIsolation::probe(r);
  constexpr std::uint32_t kWarmup = 3;
  double off_p50 = 0;
  for (const Row& row : rows) {
    spec.args.policy.profile = row.profile;
    spec.args.policy.run_as = row.namespaces ? full.nobody : std::nullopt;
    spec.cgroups = row.namespaces ? full.cgroups : nullptr;
    spec.cgroup_limits = {256ull << 20, 64, 0};
    std::shared_ptr<Clone3Spawner> clone3 = row.namespaces ? clone3_for(row, full) : nullptr;
    Spawner& spawner = row.namespaces ? static_cast<Spawner&>(*clone3) : *plain;
    SpawnSamples samples;
    if (!measure_spawns(spawner, spec, row.name, kWarmup, o.spawns, samples)) return false;
    const Summary s = summarize(samples.total);
    r.add("spawn", row.name + "_p50", s.p50, "ms");
    r.add("spawn", row.name + "_p99", s.p99, "ms");
    r.add("spawn", row.name + "_start_call_p50", summarize(samples.start_call).p50, "ms");
    r.add("spawn", row.name + "_worker_cpu_p50", summarize(samples.worker_cpu).p50, "ms");
    if (row.name == "off") off_p50 = s.p50;
    if (row.name == "full") {
      r.note("spawn full: namespaces in effect: " + clone3->in_effect().describe() +
             (full.cgroups ? ", cgroups" : "") + (full.nobody ? ", uid nobody" : ""));
      r.add("spawn", "full_added_p50", s.p50 - off_p50, "ms");
    }
  }
  return true;
}

}  // namespace sandpool::bench
