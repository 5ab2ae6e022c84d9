// JournalState (journal_state.hpp): applying the round log's records, reads, retention and
// what compaction needs to know.
#include "retry/journal_state.hpp"

#include <algorithm>

#include "retry/task_journal_write.hpp"

namespace sandpool {
namespace {

constexpr std::size_t kSpareDoneNodes = 4096;  // JournalState::spare_nodes_ at most

bool finished(const JournalTask& t) { return is_terminal(t.task.state); }

const std::string& no_key() {
  static const std::string empty;
  return empty;
}

}  // namespace

void JournalState::add_round(std::uint64_t seq, std::uint64_t bytes) {
  Round& r = rounds_[seq];
  r.bytes += bytes;
  log_bytes_ += bytes;
}

void JournalState::remove_round(std::uint64_t seq) {
  const auto it = rounds_.find(seq);
  if (it == rounds_.end()) return;
  log_bytes_ -= std::min(log_bytes_, it->second.bytes);
  live_bytes_ -= std::min(live_bytes_, it->second.live_bytes);
  rounds_.erase(it);
}

void JournalState::count_record(std::uint64_t seq, std::size_t bytes) {
  const auto it = rounds_.find(seq);
  if (it == rounds_.end()) return;  // not a round of the log (a test's)
  Round& r = it->second;
  ++r.live_records;
  r.live_bytes += bytes;
  live_bytes_ += bytes;
}

void JournalState::uncount_record(LiveRecord rec) {
  const auto it = rounds_.find(rec.seq);
  if (it == rounds_.end()) return;
  Round& r = it->second;
  r.live_records -= std::min<std::uint64_t>(r.live_records, 1);
  r.live_bytes -= std::min<std::uint64_t>(r.live_bytes, rec.bytes);
  live_bytes_ -= std::min<std::uint64_t>(live_bytes_, rec.bytes);
}

void JournalState::drop_records(OpenTask& t) {
  for (std::size_t i = 0; i < open_.record_count(t); ++i) uncount_record(open_.record(t, i));
  open_.clear_records(t);
}

void JournalState::unindex_key(const std::string& key, std::uint64_t id) {
  if (key.empty()) return;
  const auto it = by_key_.find(key);
  if (it != by_key_.end() && it->second == id) by_key_.erase(it);
}

void JournalState::erase_open(std::uint64_t id) {
  OpenTask* e = open_.find(id);
  if (e == nullptr) return;
  drop_records(*e);
  if (const OpenExtra* x = open_.extra_of(*e)) unindex_key(x->idempotency_key, id);
  open_.erase(id);
}

void JournalState::erase_done(DoneTasks::iterator it) {
  Done& d = it->second;
  uncount_record(d.record);
  --finished_count_;
  finished_bytes_ -= std::min(finished_bytes_, kept_bytes(d.task.task));
  unindex_key(d.task.options.idempotency_key, it->first);
  DoneTasks::node_type node = done_.extract(it);
  if (spare_nodes_.size() < kSpareDoneNodes) spare_nodes_.push_back(std::move(node));
}

JournalState::DoneTasks::iterator JournalState::insert_done(std::uint64_t id) {
  if (spare_nodes_.empty()) return done_.try_emplace(id).first;
  DoneTasks::node_type node = std::move(spare_nodes_.back());
  spare_nodes_.pop_back();
  node.key() = id;
  return done_.insert(std::move(node)).position;
}

void JournalState::fill_open(OpenTask& e, const JournalTask& t) {
  const std::uint32_t shape = open_.intern(t.pool, t.task.type, t.options);
  if (e.shape != 0) open_.release(e.shape);
  e.shape = shape;
  e.submitted_ms = t.submitted_ms;
  e.state = t.task.state;
  const bool own = !t.options.idempotency_key.empty() || t.options.not_before || t.running ||
                   t.retry_due_ms != 0 || !t.task.history.empty();
  if (!own && e.extra == 0) return;
  OpenExtra& x = open_.extra(e);
  x.idempotency_key = t.options.idempotency_key;
  x.not_before = t.options.not_before;
  x.running = t.running;
  x.retry_due_ms = t.retry_due_ms;
  x.history = t.task.history;
  open_.trim_extra(e);
}

std::optional<std::int64_t> JournalState::submitted_ms(std::uint64_t id) const {
  if (const OpenTask* e = open_.find(id)) return e->submitted_ms;
  const auto it = done_.find(id);
  if (it == done_.end()) return std::nullopt;
  return it->second.task.submitted_ms;
}

void JournalState::apply(std::uint64_t seq, journal_log::Record& r) {
  using journal_log::RecordKind;
  switch (r.kind) {
    case RecordKind::kTask:
      apply_task(seq, std::move(r.task), r.bytes);
      break;
    case RecordKind::kStart:
      apply_start(seq, r.id, r.attempt, r.bytes);
      break;
    case RecordKind::kRequeue:
      apply_requeue(seq, r.id, r.bytes);
      break;
    case RecordKind::kAttempt:
      apply_attempt(seq, r.id, r.attempt, r.next, r.retry_due_ms, r.bytes);
      break;
  }
}

void JournalState::apply_task(std::uint64_t seq, JournalTask&& t, std::size_t bytes) {
  const std::uint64_t id = t.task.id;
  raise_highest(id);
  bool was_finished = false;
  if (const auto d = done_.find(id); d != done_.end()) {
    was_finished = true;
    if (!finished(t)) erase_done(d);
  }
  OpenTask* open = open_.find(id);
  if (open != nullptr && finished(t)) {
    erase_open(id);
    open = nullptr;
  }
  // The key: the task's previous one is forgotten, its new one points at the newest task.
  if (const OpenExtra* x = open != nullptr ? open_.extra_of(*open) : nullptr;
      x != nullptr && x->idempotency_key != t.options.idempotency_key) {
    unindex_key(x->idempotency_key, id);
  }
  if (!t.options.idempotency_key.empty()) {
    auto [k, first] = by_key_.try_emplace(t.options.idempotency_key, id);
    if (!first && k->second != id) {
      const auto other = submitted_ms(k->second);
      if (!other || std::pair(t.submitted_ms, id) > std::pair(*other, k->second)) k->second = id;
    }
  }
  if (!finished(t)) {
    if (open == nullptr) {
      open = &open_.insert(id);
    } else {
      drop_records(*open);
    }
    fill_open(*open, t);
    open_.add_record(*open, {seq, static_cast<std::uint32_t>(bytes)});
    count_record(seq, bytes);
    return;
  }
  auto it = done_.find(id);
  if (it == done_.end()) {
    it = insert_done(id);
  } else {  // finished again (a reopen that ended): replaced in place
    Done& d = it->second;
    uncount_record(d.record);
    --finished_count_;
    finished_bytes_ -= std::min(finished_bytes_, kept_bytes(d.task.task));
    if (d.task.options.idempotency_key != t.options.idempotency_key) {
      unindex_key(d.task.options.idempotency_key, id);
    }
  }
  ++finished_count_;
  finished_bytes_ += kept_bytes(t.task);
  if (!was_finished) finished_order_.emplace_back(t.finished_ms, id);
  Done& d = it->second;
  d.task = std::move(t);
  d.record = {seq, static_cast<std::uint32_t>(bytes)};
  count_record(seq, bytes);
}

void JournalState::apply_start(std::uint64_t seq, std::uint64_t id, const Attempt& start,
                               std::size_t bytes) {
  OpenTask* e = open_.find(id);
  if (e == nullptr) return;
  Attempt a;
  a.number = start.number;
  a.worker_pid = start.worker_pid;
  a.started_ms = start.started_ms;
  e->state = TaskState::kRunning;
  open_.extra(*e).running = std::move(a);
  open_.add_record(*e, {seq, static_cast<std::uint32_t>(bytes)});
  count_record(seq, bytes);
}

void JournalState::apply_requeue(std::uint64_t seq, std::uint64_t id, std::size_t bytes) {
  OpenTask* e = open_.find(id);
  if (e == nullptr || e->state != TaskState::kRunning) return;
  e->state = TaskState::kQueued;
  if (e->extra != 0) open_.extra(*e).running.reset();
  open_.add_record(*e, {seq, static_cast<std::uint32_t>(bytes)});
  count_record(seq, bytes);
  open_.trim_extra(*e);
}

void JournalState::apply_attempt(std::uint64_t seq, std::uint64_t id, const Attempt& ended,
                                 TaskState next, std::int64_t retry_due_ms, std::size_t bytes) {
  OpenTask* e = open_.find(id);
  if (e == nullptr) return;
  OpenExtra& x = open_.extra(*e);
  std::vector<Attempt>& h = x.history;
  const auto at =
      std::find_if(h.begin(), h.end(), [&](const Attempt& a) { return a.number >= ended.number; });
  if (at != h.end() && at->number == ended.number) {
    *at = ended;  // the same attempt written again: the newer account wins
  } else {
    h.insert(at, ended);
  }
  e->state = next;
  x.retry_due_ms = next == TaskState::kRetryWait ? retry_due_ms : 0;
  x.running.reset();
  open_.add_record(*e, {seq, static_cast<std::uint32_t>(bytes)});
  count_record(seq, bytes);
}

void JournalState::carried(std::uint64_t seq, std::uint64_t id, std::size_t bytes) {
  if (OpenTask* e = open_.find(id)) {
    drop_records(*e);
    open_.add_record(*e, {seq, static_cast<std::uint32_t>(bytes)});
  } else if (const auto it = done_.find(id); it != done_.end()) {
    uncount_record(it->second.record);
    it->second.record = {seq, static_cast<std::uint32_t>(bytes)};
  } else {
    return;
  }
  count_record(seq, bytes);
}

void JournalState::replayed() { std::sort(finished_order_.begin(), finished_order_.end()); }

const JournalTask* JournalState::finished_task(std::uint64_t id) const {
  const auto it = done_.find(id);
  return it == done_.end() ? nullptr : &it->second.task;
}

std::optional<OpenMeta> JournalState::open_meta(std::uint64_t id) const {
  const OpenTask* e = open_.find(id);
  if (e == nullptr) return std::nullopt;
  const TaskShape& s = open_.shape(e->shape);
  OpenMeta m;
  m.pool = &s.pool;
  m.type = &s.type;
  m.options = &s.options;
  const OpenExtra* x = open_.extra_of(*e);
  m.idempotency_key = x != nullptr ? &x->idempotency_key : &no_key();
  if (x != nullptr) m.not_before = x->not_before;
  m.submitted_ms = e->submitted_ms;
  return m;
}

OpenSteps JournalState::steps_of(const OpenTask& e) const {
  OpenSteps s;
  s.state = e.state;
  if (const OpenExtra* x = open_.extra_of(e)) {
    s.running = x->running;
    s.retry_due_ms = x->retry_due_ms;
    s.history = x->history;
  }
  return s;
}

std::optional<OpenSnapshot> JournalState::open_snapshot(std::uint64_t id) const {
  const OpenTask* e = open_.find(id);
  if (e == nullptr) return std::nullopt;
  return OpenSnapshot{id, e->seq, steps_of(*e)};
}

std::vector<OpenSnapshot> JournalState::open_snapshots(
    const std::optional<std::string>& pool) const {
  std::vector<OpenSnapshot> out;
  open_.for_each([&](const OpenTask& e) {
    if (pool && open_.shape(e.shape).pool != *pool) return;
    out.push_back({e.id, e.seq, steps_of(e)});
  });
  std::sort(out.begin(), out.end(),
            [](const OpenSnapshot& a, const OpenSnapshot& b) { return a.id < b.id; });
  return out;
}

void JournalState::overlay_steps(std::uint64_t id, JournalTask& t) const {
  const OpenTask* e = open_.find(id);
  if (e == nullptr) return;
  t.task.state = e->state;
  const OpenExtra* x = open_.extra_of(*e);
  t.running = x != nullptr ? x->running : std::nullopt;
  t.retry_due_ms = x != nullptr ? x->retry_due_ms : 0;
  if (x != nullptr) {
    t.task.history = x->history;
  } else {
    t.task.history.clear();
  }
}

std::uint64_t JournalState::find_key(const std::string& key) const {
  const auto it = by_key_.find(key);
  return it == by_key_.end() ? 0 : it->second;
}

std::vector<std::string> JournalState::unfinished_pools() const {
  std::vector<std::string> pools;
  open_.for_each([&](const OpenTask& e) { pools.push_back(open_.shape(e.shape).pool); });
  std::sort(pools.begin(), pools.end());
  pools.erase(std::unique(pools.begin(), pools.end()), pools.end());
  return pools;
}

std::vector<std::uint64_t> JournalState::ids() const {
  std::vector<std::uint64_t> out;
  out.reserve(open_.size() + done_.size());
  open_.for_each([&](const OpenTask& e) { out.push_back(e.id); });
  for (const auto& [id, d] : done_) out.push_back(id);
  std::sort(out.begin(), out.end());
  return out;
}

std::size_t JournalState::evict(const Bounds& b, std::int64_t now_ms, std::size_t max) {
  std::size_t n = 0;
  while (n < max && !finished_order_.empty()) {
    const auto [ms, id] = finished_order_.front();
    const auto it = done_.find(id);
    if (it == done_.end() || it->second.task.finished_ms != ms) {
      finished_order_.pop_front();  // stale: evicted, or finished again under the same id
      continue;
    }
    const bool over_count = b.max_finished > 0 && finished_count_ > b.max_finished;
    const bool over_bytes = b.max_finished_bytes > 0 && finished_bytes_ > b.max_finished_bytes;
    const bool too_old = b.max_finished_age_ms > 0 && ms < now_ms - b.max_finished_age_ms;
    if (!over_count && !over_bytes && !too_old) break;
    finished_order_.pop_front();
    erase_done(it);
    ++n;
  }
  return n;
}

std::vector<std::uint64_t> JournalState::dead_head(std::size_t max) const {
  std::vector<std::uint64_t> out;
  for (const auto& [seq, r] : rounds_) {
    if (r.live_records > 0 || out.size() >= max) break;
    out.push_back(seq);
  }
  return out;
}

std::size_t JournalState::live_in(std::uint64_t seq, std::uint64_t id) const {
  if (const OpenTask* e = open_.find(id)) {
    std::size_t n = 0;
    for (std::size_t i = 0; i < open_.record_count(*e); ++i) {
      n += open_.record(*e, i).seq == seq ? 1 : 0;
    }
    return n;
  }
  const auto it = done_.find(id);
  return it != done_.end() && it->second.record.seq == seq ? 1 : 0;
}

}  // namespace sandpool
