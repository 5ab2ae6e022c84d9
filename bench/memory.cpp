// The memory group (issue 37): what one task costs the pool in memory while it waits in the
// queue behind busy workers, and once it ended and is kept for `task ID` (Pool::find), with
// the journal off and on; with the journal, what it costs on disk too. Each figure is the
// growth of the process's RSS over the run divided by the tasks (and, when the allocator is
// jemalloc, the growth of its allocated bytes, which pages and fragmentation do not blur).
// The library's Pool in this process, and a real poold from the build tree fed by the real
// `poolctl batch`, as the figure was taken (poold's RSS, read from /proc).
#include <dlfcn.h>
#include <malloc.h>
#include <unistd.h>

#include <boost/process/args.hpp>
#include <boost/process/io.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <thread>

#include <sandpool/ipc/wake.hpp>
#include <sandpool/store/dead_letters.hpp>

#include "bench.hpp"
#include "poold_child.hpp"

namespace sandpool::bench {
namespace {

namespace bp = boost::process;
using ipc::monotonic_ns;

constexpr std::size_t kMemoryBatch = 10000;      // tasks per submit_batch
constexpr std::uint32_t kMemoryHoldMs = 600000;  // the task that keeps the worker busy

// jemalloc's mallctl when the process runs on it (poold and sandpool-bench link it unless
// built with a sanitizer), looked up at run time so that the bench builds without it.
using Mallctl = int (*)(const char*, void*, size_t*, void*, size_t);
Mallctl jemalloc_ctl() { return reinterpret_cast<Mallctl>(::dlsym(RTLD_DEFAULT, "mallctl")); }

// The bytes the allocator has handed out and not got back (jemalloc's stats.allocated);
// nullopt on another allocator.
std::optional<std::uint64_t> heap_allocated() {
  const Mallctl ctl = jemalloc_ctl();
  if (ctl == nullptr) return std::nullopt;
  std::uint64_t epoch = 1;
  size_t len = sizeof(epoch);
  ctl("epoch", &epoch, &len, &epoch, len);  // refreshes the statistics
  size_t allocated = 0;
  len = sizeof(allocated);
  if (ctl("stats.allocated", &allocated, &len, nullptr, 0) != 0) return std::nullopt;
  return allocated;
}

// Gives freed memory back to the OS, so the next run's RSS growth is its own and not memory
// the last one left behind.
void release_free_memory() {
  if (const Mallctl ctl = jemalloc_ctl()) {
    ctl("arena.4096.purge", nullptr, nullptr, nullptr, 0);  // 4096: MALLCTL_ARENAS_ALL
  } else {
    ::malloc_trim(0);
  }
}

std::uint64_t dir_bytes(const std::filesystem::path& dir) {
  std::uint64_t total = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir, ec)) {
    if (e.is_regular_file(ec)) total += e.file_size(ec);
  }
  return total;
}

// Where a run's memory stood before its tasks.
struct Baseline {
  std::uint64_t rss = 0;
  std::optional<std::uint64_t> heap;
};

Baseline baseline() {
  release_free_memory();
  return {rss_bytes(), heap_allocated()};
}

void add_growth(Report& r, const std::string& what, const Baseline& before, std::uint64_t n,
                const std::string& suffix) {
  const double rss_growth = static_cast<double>(rss_bytes()) - static_cast<double>(before.rss);
  r.add("memory", "bytes_per_" + what + suffix, rss_growth / static_cast<double>(n), "B");
  if (auto heap = heap_allocated(); heap && before.heap) {
    const double growth = static_cast<double>(*heap) - static_cast<double>(*before.heap);
    r.add("memory", "heap_bytes_per_" + what + suffix, growth / static_cast<double>(n), "B");
  }
}

// The pool's options for one run: `journal` a store with the task journal in `dir`.
std::optional<PoolOptions> run_options(const BenchOptions& o, const std::string& plugin,
                                       std::uint32_t workers, std::uint32_t concurrency,
                                       const std::string& dir, bool journal) {
  PoolOptions p = pool_options(o, plugin, workers, concurrency);
  p.queue_capacity = o.memory_tasks + 16;
  p.task_records_max = o.memory_tasks;  // every finished task stays findable
  p.task_records_max_age = std::chrono::milliseconds(0);
  p.task_records_max_bytes = 0;
  if (!journal) return p;
  DeadLetterStoreOptions s;
  s.state_dir = dir;
  s.sync = StoreSync::kNormal;  // the bytes do not depend on it; the run's length does
  TaskJournalOptions j;
  j.max_finished = o.memory_tasks;
  j.max_finished_age = std::chrono::milliseconds(0);
  j.max_finished_bytes = 0;
  // A commit slowed by other work on the host must not refuse a batch: this run weighs
  // memory, the journal group times commits.
  j.sync_timeout = std::chrono::milliseconds(kWaitBoundNs / 1000000);
  s.journal = j;
  auto store = DeadLetterStore::open(std::move(s));
  if (!store) {
    std::cerr << "sandpool-bench: memory: cannot open a store in " << dir << ": "
              << store.status().message() << "\n";
    return std::nullopt;
  }
  p.dead_letter_store = std::move(store).value();
  return p;
}

// Submits o.memory_tasks tasks of o.payload_size bytes of `type` in batches, keeping no
// Ticket (as poold's batch path does), and waits until the journal (if any) accepted all.
bool submit_all(const BenchOptions& o, Pool& pool, const std::string& type) {
  std::atomic<std::uint64_t> accepted{0}, refused{0};
  std::uint64_t batches = 0;
  for (std::uint64_t seq = 0; seq < o.memory_tasks;) {
    std::vector<BatchTask> tasks(std::min<std::uint64_t>(kMemoryBatch, o.memory_tasks - seq));
    for (BatchTask& t : tasks) {
      t.type = type;
      t.payload = make_payload(seq++, o.payload_size);
    }
    for (const Result<Ticket>& t : pool.submit_batch(
             std::move(tasks), [&](const Status& s) { (s ? accepted : refused).fetch_add(1); })) {
      if (!t) {
        std::cerr << "sandpool-bench: memory: submit refused: " << t.status().message() << "\n";
        return false;
      }
    }
    ++batches;
  }
  if (!wait_until("the journal's acceptance", [&] { return accepted + refused == batches; })) {
    return false;
  }
  if (refused != 0) std::cerr << "sandpool-bench: memory: the journal refused a batch\n";
  return refused == 0;
}

// Queued: one worker held by a long sleep, the tasks queued behind it. `label` goes into
// the figures' names; `plugin` is sleep or sleep16, `type` the one type it declares.
bool queued_run(const BenchOptions& o, Report& r, bool journal, const std::string& label = "",
                const std::string& plugin = "sleep", const std::string& type = "sleep") {
  const std::string suffix = label + (journal ? "_journal_on" : "_journal_off");
  ScratchDir dir;
  auto p = run_options(o, plugin, 1, 1, dir.path().string(), journal);
  if (!p) return false;
  auto pool = start_pool(*p);
  if (!pool) return false;
  SubmitOptions hold;
  hold.timeout = std::chrono::milliseconds(kMemoryHoldMs);  // not the pool's 30 s: it must last
  auto holder = pool->submit(type, std::to_string(kMemoryHoldMs), hold);
  if (!holder) {
    std::cerr << "sandpool-bench: memory: " << holder.status().message() << "\n";
    return false;
  }
  if (!wait_until("the holding task to run",
                  [&] { return holder->state() == TaskState::kRunning; })) {
    return false;
  }
  const std::uint64_t disk_before = journal ? dir_bytes(dir.path()) : 0;
  const Baseline before = baseline();
  if (!submit_all(o, *pool, type)) return false;
  if (!wait_until("the loop to queue every task",
                  [&] { return pool->stats().queued == o.memory_tasks; })) {
    return false;
  }
  add_growth(r, "queued_task", before, o.memory_tasks, suffix);
  if (journal) {
    const double disk = static_cast<double>(dir_bytes(dir.path()) - disk_before);
    r.add("memory", "journal_disk_bytes_per_queued_task", disk / o.memory_tasks, "B");
  }
  // The RSS again once the allocator gave back the pages freed during the run, as before the
  // baseline: the run's buffers that lived only while the tasks went in (the submit batches,
  // the journal's accept batches) leave pages that jemalloc keeps for dirty_decay_ms (10 s)
  // after their free. Beside the figure above, not instead of it (docs/performance.md).
  release_free_memory();
  r.add("memory", "settled_bytes_per_queued_task" + suffix,
        (static_cast<double>(rss_bytes()) - static_cast<double>(before.rss)) /
            static_cast<double>(o.memory_tasks),
        "B");
  pool->shutdown(std::chrono::milliseconds(0));
  return true;
}

// Finished: the tasks run through the echo plugin and stay findable (task_records_max).
bool finished_run(const BenchOptions& o, Report& r, bool journal) {
  const std::string suffix = journal ? "_journal_on" : "_journal_off";
  ScratchDir dir;
  auto p = run_options(o, "echo", o.workers, 64, dir.path().string(), journal);
  if (!p) return false;
  auto pool = start_pool(*p);
  if (!pool) return false;
  const std::uint64_t disk_before = journal ? dir_bytes(dir.path()) : 0;
  const Baseline before = baseline();
  if (!submit_all(o, *pool, "echo")) return false;
  if (!pool->wait_idle_for(std::chrono::milliseconds(kWaitBoundNs / 1000000))) {
    std::cerr << "sandpool-bench: memory: the pool did not become idle\n";
    return false;
  }
  const PoolStats s = pool->stats();
  if (s.completed != o.memory_tasks) {
    std::cerr << "sandpool-bench: memory: " << s.completed << " of " << o.memory_tasks
              << " tasks completed\n";
    return false;
  }
  add_growth(r, "finished_task", before, o.memory_tasks, suffix);
  if (journal) {
    const double disk = static_cast<double>(dir_bytes(dir.path()) - disk_before);
    r.add("memory", "journal_disk_bytes_per_finished_task", disk / o.memory_tasks, "B");
  }
  pool->close();
  return true;
}

// poold: one pool of one worker held by a long sleep, `poolctl batch` queueing the tasks
// behind it through the socket, poold's RSS before and after.
bool poold_queued_run(const BenchOptions& o, Report& r, bool journal) {
  ScratchDir dir;
  if (dir.path().empty()) return false;
  const fs::path config = dir.path() / "poold.yaml";
  std::ofstream(config) << bench_config(
      dir.path(),
      journal ? "  journal: {enabled: true, sync: normal, sync_timeout: 600s}\n"
              : "  journal: off\n",
      "sleep", plugin_path(o, "sleep"), 1, 1,
      "    queue: {capacity: " + std::to_string(o.memory_tasks + 16) + "}\n");
  Poold poold(dir.path(), config, "sleep");
  if (!poold.ready(1)) return poold.fail("poold did not start");
  SubmitRequest hold;
  hold.type = "sleep";
  hold.payload = std::to_string(kMemoryHoldMs);
  hold.options.timeout = std::chrono::milliseconds(kMemoryHoldMs);
  if (auto s = poold.client().submit(hold); !s) return poold.fail(s.status().message());
  auto counters = [&]() -> std::optional<ops::PoolCounters> {
    auto s = poold.client().stats("sleep");
    if (!s || s->pools.empty()) return std::nullopt;
    return s->pools[0];
  };
  if (!wait_until("poold's holding task to run", [&] {
        auto c = counters();
        return c && c->in_flight == 1;
      })) {
    return poold.fail("the holding task did not start");
  }
  const std::string pid = std::to_string(poold.pid());
  const std::uint64_t rss_before = rss_bytes(pid);
  const std::uint64_t disk_before = dir_bytes(dir.path() / "state");
  bp::child c(
      (bin_dir() / "poolctl").string(),
      bp::args({"--socket", poold.socket(), "batch", "sleep", std::to_string(o.memory_tasks),
                "--payload-size", std::to_string(o.payload_size)}),
      bp::std_out > bp::null, bp::std_err > (dir.path() / "batch.err").string());
  c.wait();
  if (c.exit_code() != 0) return poold.fail("poolctl batch: " + slurp(dir.path() / "batch.err"));
  if (!wait_until("poold to queue every task", [&] {
        auto c = counters();
        return c && c->queued == o.memory_tasks;
      })) {
    return poold.fail("the tasks were not all queued");
  }
  const std::string suffix = journal ? "_journal_on" : "_journal_off";
  const double n = static_cast<double>(o.memory_tasks);
  r.add("memory", "poold_bytes_per_queued_task" + suffix,
        (static_cast<double>(rss_bytes(pid)) - static_cast<double>(rss_before)) / n, "B");
  if (journal) {
    r.add("memory", "poold_journal_disk_bytes_per_queued_task",
          static_cast<double>(dir_bytes(dir.path() / "state") - disk_before) / n, "B");
  }
  poold.kill9();  // a shutdown would dead-letter (or keep) every queued task: not measured
  return true;
}

}  // namespace

bool run_memory(const BenchOptions& o, Report& r) {
  r.note("memory: " + std::to_string(o.memory_tasks) + " tasks of " +
         std::to_string(o.payload_size) + " B; " +
         (jemalloc_ctl() != nullptr ? "jemalloc" : "not jemalloc: no heap figures"));
  for (const bool journal : {false, true}) {
    if (!queued_run(o, r, journal) || !finished_run(o, r, journal) ||
        !poold_queued_run(o, r, journal)) {
      return false;
    }
  }
  // A 16-character type, as real ones are (the sleep16 plugin's "sleep.sixteen-ch"): the
  // record names its type by its interned index (pool/src/core/interned_types.hpp), so the
  // figure is the short type's; kept inline, as before, it took the record from jemalloc's
  // 224-byte class to the 256 one.
  return queued_run(o, r, false, "_type16", "sleep16", "sleep.sixteen-ch");
}

}  // namespace sandpool::bench
