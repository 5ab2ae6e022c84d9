// journal full_disk_refusal_ms (issue 34, docs/journal.md "A failing disk"): how long a submit
// takes to be refused once the state dir is full. poold's state dir is a 4 MB tmpfs (so the
// bench needs root); one worker is kept busy so that 256 KiB payloads queue and fill it; then
// the busy task is cancelled, so that its end waits in memory for a retry (the case where
// submits used to wait out the writer's 5 s retry sleep), and kRefusals submits are timed,
// one at a time, from the Client's call to its answer.
#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>
#include <vector>

#include <sandpool/control/client.hpp>
#include <sandpool/ipc/wake.hpp>

#include "bench.hpp"
#include "poold_child.hpp"

namespace sandpool::bench {
namespace {

constexpr int kRefusals = 200;

// Detaches the tmpfs at `path` when it goes (after the poold using it stopped).
struct TmpfsMount {
  fs::path path;
  bool mounted = false;
  ~TmpfsMount() {
    if (mounted) ::umount2(path.c_str(), MNT_DETACH);
  }
};

}  // namespace

bool journal_full_disk(const BenchOptions& o, Report& r) {
  const std::string line = "journal full_disk_refusal_ms";
  if (::geteuid() != 0) {
    r.note(line + ": not measured: needs root (the state dir is a 4 MB tmpfs)");
    return true;
  }
  ScratchDir dir;
  if (dir.path().empty()) return false;
  TmpfsMount tmpfs{dir.path() / "state"};
  fs::create_directories(tmpfs.path);
  if (::mount("sandpool-bench", tmpfs.path.c_str(), "tmpfs", MS_NOSUID | MS_NODEV,
              "size=4m,mode=0700") != 0) {
    r.note(line + ": not measured: mount(tmpfs): " + std::strerror(errno));
    return true;
  }
  tmpfs.mounted = true;
  const fs::path config = dir.path() / "poold.yaml";
  std::ofstream(config) << bench_config(dir.path(), "  journal: {enabled: true, sync: full}\n",
                                        "sleep", plugin_path(o, "sleep"), 1, 1);
  Poold poold(dir.path(), config, "sleep");
  if (!poold.ready(1)) return false;
  Client& c = poold.client();

  SubmitRequest busy;
  busy.type = "sleep";
  busy.payload = "600000";
  auto blocker = c.submit(busy);
  if (!blocker) return poold.fail("submit: " + blocker.status().to_string());
  SubmitRequest big;
  big.type = "sleep";
  big.payload = std::string(256 * 1024, '0') + "1";  // 1 ms once it runs
  int accepted = 0;
  for (; accepted < 200; ++accepted) {
    if (!c.submit(big)) break;
  }
  if (accepted == 200) return poold.fail("the 4 MB state dir never filled");
  if (!c.cancel(blocker->id)) return poold.fail("cancel of the busy task failed");
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (;;) {
    auto st = c.status();
    if (st && st->journal && st->journal->pending >= 1) break;
    if (std::chrono::steady_clock::now() > until) {
      return poold.fail("the busy task's end never waited for a retry");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }

  // Full-size payloads: a small one may still fit the last free pages (then it is taken).
  std::vector<double> ms;
  int taken = 0;
  for (int i = 0; i < kRefusals; ++i) {
    const std::int64_t t0 = ipc::monotonic_ns();
    auto s = c.submit(big);
    const std::int64_t t1 = ipc::monotonic_ns();
    if (s) {
      ++taken;  // a probe found room for a moment: not a refusal
      continue;
    }
    ms.push_back(static_cast<double>(t1 - t0) / 1e6);
  }
  if (ms.empty()) return poold.fail("no submit was refused on the full state dir");
  const Summary s = summarize(ms);
  r.add("journal", "full_disk_refusal_ms", s.p99, "ms");
  r.add("journal", "full_disk_refusal_p50", s.p50, "ms");
  r.add("journal", "full_disk_refusals", static_cast<double>(s.count), "submits");
  if (taken > 0) r.note(line + ": " + std::to_string(taken) + " submits were taken");
  return true;
}

}  // namespace sandpool::bench
