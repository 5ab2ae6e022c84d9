// PoolCore, which worker: the built-in strategy (Dispatcher) or the embedding program's
// dispatch function (PoolOptions::dispatch_function), measured and contained
// (docs/architecture.md, "The scheduler's order of decisions", step 6).
#include <exception>

#include "core/pool_core.hpp"
#include "core/pool_core_internal.hpp"

namespace sandpool::core {

using detail::kMsNs;

namespace {

constexpr std::int64_t kFnLogEveryNs = 10'000 * kMsNs;

}  // namespace

Choice PoolCore::choose_for(const TaskRecord& t, std::int64_t now) {
  if (t.payload().size() <= candidates_frame_cap_) {  // every candidate's region takes it
    if (opts_.dispatch_function) return choose_custom(candidates_, {}, t, now);
    return dispatcher_.choose(candidates_, t.opts.key());
  }
  // Some workers' regions were sized for a smaller max_payload (a reconfigure raised it while
  // they still run): they must not get this task, whose frame they would read as corruption.
  std::vector<Candidate> fit;
  std::vector<int> index;
  for (std::size_t i = 0; i < candidates_.size(); ++i) {
    if (t.payload().size() > candidate_workers_[i]->frame_cap) continue;
    fit.push_back(candidates_[i]);
    index.push_back(static_cast<int>(i));
  }
  Choice c = opts_.dispatch_function ? choose_custom(fit, index, t, now)
                                     : dispatcher_.choose(fit, t.opts.key());
  if (c.index >= 0) c.index = index[static_cast<std::size_t>(c.index)];
  return c;
}

Choice PoolCore::choose_custom(std::span<const Candidate> workers, std::span<const int> index,
                               const TaskRecord& t, std::int64_t now) {
  if (workers.empty()) return {};
  const int home = t.opts.key().empty() ? -1 : Dispatcher::affinity_home(workers, t.opts.key());
  views_.clear();
  for (std::size_t i = 0; i < workers.size(); ++i) {
    const Candidate& c = workers[i];
    const Worker& w = *candidate_workers_[index.empty() ? i : static_cast<std::size_t>(index[i])];
    const bool ready = w.is<Ready>();
    WorkerView v;
    v.id = c.worker_id;
    v.slot = c.slot;
    v.ready = ready;
    v.in_flight = ready ? c.in_flight : 0;
    v.capacity = c.capacity;
    v.rss_bytes = c.rss_bytes;
    v.uptime = std::chrono::milliseconds(ready && w.ready_ns > 0 ? (now - w.ready_ns) / kMsNs : 0);
    v.key_home = static_cast<int>(i) == home;
    views_.push_back(v);
  }
  TaskView tv;
  tv.id = t.id;
  tv.type = t.type();
  tv.tenant = t.opts.tenant();
  tv.key = t.opts.key();
  tv.payload_bytes = t.payload().size();
  tv.priority = t.opts.priority();
  tv.attempt = t.attempts_ended + 1;

  DispatchFunctionMetrics& m = recorded_.dispatch_function;
  std::optional<std::size_t> pick;
  std::string threw;
  const std::int64_t start = ctl_.elapsed_ns();
  try {
    pick = opts_.dispatch_function(views_, tv);
  } catch (const std::exception& e) {
    threw = e.what();
  } catch (...) {
    threw = "an exception of a type not derived from std::exception";
  }
  const std::int64_t took = ctl_.elapsed_ns() - start;
  ++m.calls;
  m.time.record(took);
  const std::int64_t slow_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(opts_.dispatch_function_slow).count();
  if (took > slow_ns) {
    ++m.slow;
    note_fn_trouble(FnTrouble::kSlow,
                    "took " + std::to_string(took / 1000) + " us (dispatch_function_slow: " +
                        std::to_string(opts_.dispatch_function_slow.count()) +
                        " us); the pool's loop waits for it",
                    now);
  }
  if (threw.empty() && !pick) return {};  // "queue it": asked again at the next event
  if (threw.empty() && *pick < views_.size() && views_[*pick].has_room()) {
    return {static_cast<int>(*pick), false};
  }
  if (!threw.empty()) {
    ++m.errors;
    note_fn_trouble(FnTrouble::kThrew, "threw: " + threw, now);
  } else {
    ++m.invalid;
    note_fn_trouble(
        FnTrouble::kInvalid,
        "returned " + std::to_string(*pick) + ", " +
            (*pick >= views_.size() ? "out of range (" + std::to_string(views_.size()) + " workers)"
                                    : std::string("a worker that is starting or full")),
        now);
  }
  return dispatcher_.choose(workers, t.opts.key());
}

void PoolCore::note_fn_trouble(FnTrouble kind, const std::string& what, std::int64_t now) {
  FnLogState& s = fn_log_[static_cast<std::size_t>(kind)];
  if (s.last_ns != INT64_MIN && now - s.last_ns < kFnLogEveryNs) {
    ++s.since;
    return;
  }
  std::string line = "dispatch function " + what;
  if (kind != FnTrouble::kSlow) {
    line += "; the built-in " + std::string(to_string(dispatcher_.strategy())) + " chose instead";
  }
  if (s.since > 0) line += " (and " + std::to_string(s.since) + " more since the last such line)";
  s.last_ns = now;
  s.since = 0;
  log(2, line);
}

}  // namespace sandpool::core
