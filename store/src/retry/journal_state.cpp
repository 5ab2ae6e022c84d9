// JournalState (journal_state.hpp): applying the round log's records, reads, retention and
// what compaction needs to know.
#include "retry/journal_state.hpp"

#include <algorithm>

#include "retry/task_journal_write.hpp"

namespace sandpool {
namespace {

constexpr std::size_t kSpareNodes = 4096;  // JournalState::spare_nodes_ at most

bool finished(const JournalTask& t) { return is_terminal(t.task.state); }

// Is (submitted_ms, id) of a newer than of b?
bool newer(const JournalTask& a, const JournalTask& b) {
  return std::pair(a.submitted_ms, a.task.id) > std::pair(b.submitted_ms, b.task.id);
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

void JournalState::add_record(std::uint64_t seq, std::uint64_t id, Entry& e, std::size_t bytes) {
  e.records.emplace_back(seq, static_cast<std::uint32_t>(bytes));
  const auto it = rounds_.find(seq);
  if (it == rounds_.end()) return;  // not a round of the log (a test's)
  Round& r = it->second;
  ++r.live_records;
  r.live_bytes += bytes;
  live_bytes_ += bytes;
  if (r.ids.empty() || r.ids.back() != id) r.ids.push_back(id);
}

void JournalState::drop_records(Entry& e) {
  for (const auto& [seq, bytes] : e.records) {
    const auto it = rounds_.find(seq);
    if (it == rounds_.end()) continue;
    Round& r = it->second;
    r.live_records -= std::min<std::uint64_t>(r.live_records, 1);
    r.live_bytes -= std::min<std::uint64_t>(r.live_bytes, bytes);
    live_bytes_ -= std::min<std::uint64_t>(live_bytes_, bytes);
  }
  e.records.clear();
}

void JournalState::unindex_key(const JournalTask& t) {
  if (t.options.idempotency_key.empty()) return;
  const auto it = by_key_.find(t.options.idempotency_key);
  if (it != by_key_.end() && it->second == t.task.id) by_key_.erase(it);
}

void JournalState::erase(Tasks::iterator it) {
  Entry& e = it->second;
  drop_records(e);
  if (finished(e.task)) {
    --finished_count_;
    finished_bytes_ -= std::min(finished_bytes_, kept_bytes(e.task.task));
  }
  unindex_key(e.task);
  Tasks::node_type node = tasks_.extract(it);
  if (spare_nodes_.size() < kSpareNodes) spare_nodes_.push_back(std::move(node));
}

JournalState::Tasks::iterator JournalState::insert_new(std::uint64_t id) {
  if (spare_nodes_.empty()) return tasks_.try_emplace(id).first;
  Tasks::node_type node = std::move(spare_nodes_.back());
  spare_nodes_.pop_back();
  node.key() = id;
  node.mapped().records.clear();
  return tasks_.insert(std::move(node)).position;
}

JournalState::Entry* JournalState::unfinished_entry(std::uint64_t id) {
  const auto it = tasks_.find(id);
  if (it == tasks_.end() || finished(it->second.task)) return nullptr;
  return &it->second;
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
  auto it = tasks_.find(id);
  const bool fresh = it == tasks_.end();
  if (fresh) it = insert_new(id);
  Entry& e = it->second;
  bool was_finished = false;
  if (!fresh) {  // replaced in place: its node is kept
    drop_records(e);
    was_finished = finished(e.task);
    if (was_finished) {
      --finished_count_;
      finished_bytes_ -= std::min(finished_bytes_, kept_bytes(e.task.task));
    }
    if (e.task.options.idempotency_key != t.options.idempotency_key) unindex_key(e.task);
  }
  if (finished(t)) {
    ++finished_count_;
    finished_bytes_ += kept_bytes(t.task);
    if (!was_finished) finished_order_.emplace_back(t.finished_ms, id);
  }
  if (!t.options.idempotency_key.empty()) {
    auto [k, first] = by_key_.try_emplace(t.options.idempotency_key, id);
    if (!first && k->second != id) {
      const auto other = tasks_.find(k->second);
      if (other == tasks_.end() || newer(t, other->second.task)) k->second = id;
    }
  }
  e.task = std::move(t);
  add_record(seq, id, e, bytes);
}

void JournalState::apply_start(std::uint64_t seq, std::uint64_t id, const Attempt& start,
                               std::size_t bytes) {
  Entry* e = unfinished_entry(id);
  if (e == nullptr) return;
  Attempt a;
  a.number = start.number;
  a.worker_pid = start.worker_pid;
  a.started_ms = start.started_ms;
  e->task.task.state = TaskState::kRunning;
  e->task.running = std::move(a);
  add_record(seq, id, *e, bytes);
}

void JournalState::apply_requeue(std::uint64_t seq, std::uint64_t id, std::size_t bytes) {
  Entry* e = unfinished_entry(id);
  if (e == nullptr || e->task.task.state != TaskState::kRunning) return;
  e->task.task.state = TaskState::kQueued;
  e->task.running.reset();
  add_record(seq, id, *e, bytes);
}

void JournalState::apply_attempt(std::uint64_t seq, std::uint64_t id, const Attempt& ended,
                                 TaskState next, std::int64_t retry_due_ms, std::size_t bytes) {
  Entry* e = unfinished_entry(id);
  if (e == nullptr) return;
  std::vector<Attempt>& h = e->task.task.history;
  const auto at =
      std::find_if(h.begin(), h.end(), [&](const Attempt& a) { return a.number >= ended.number; });
  if (at != h.end() && at->number == ended.number) {
    *at = ended;  // the same attempt written again: the newer account wins
  } else {
    h.insert(at, ended);
  }
  e->task.task.state = next;
  e->task.retry_due_ms = next == TaskState::kRetryWait ? retry_due_ms : 0;
  e->task.running.reset();
  add_record(seq, id, *e, bytes);
}

void JournalState::carried(std::uint64_t seq, std::uint64_t id, std::size_t bytes) {
  const auto it = tasks_.find(id);
  if (it == tasks_.end()) return;
  drop_records(it->second);
  add_record(seq, id, it->second, bytes);
}

void JournalState::replayed() { std::sort(finished_order_.begin(), finished_order_.end()); }

const JournalTask* JournalState::find(std::uint64_t id) const {
  const auto it = tasks_.find(id);
  return it == tasks_.end() ? nullptr : &it->second.task;
}

const JournalTask* JournalState::unfinished_task(std::uint64_t id) const {
  const JournalTask* t = find(id);
  return t != nullptr && !finished(*t) ? t : nullptr;
}

const JournalTask* JournalState::find_by_key(const std::string& key) const {
  const auto it = by_key_.find(key);
  return it == by_key_.end() ? nullptr : find(it->second);
}

std::vector<JournalTask> JournalState::unfinished(const std::optional<std::string>& pool) const {
  std::vector<JournalTask> out;
  for (const auto& [id, e] : tasks_) {
    if (finished(e.task) || (pool && e.task.pool != *pool)) continue;
    out.push_back(e.task);
  }
  std::sort(out.begin(), out.end(),
            [](const JournalTask& a, const JournalTask& b) { return a.task.id < b.task.id; });
  return out;
}

std::vector<std::string> JournalState::unfinished_pools() const {
  std::vector<std::string> pools;
  for (const auto& [id, e] : tasks_) {
    if (!finished(e.task)) pools.push_back(e.task.pool);
  }
  std::sort(pools.begin(), pools.end());
  pools.erase(std::unique(pools.begin(), pools.end()), pools.end());
  return pools;
}

std::vector<std::uint64_t> JournalState::ids() const {
  std::vector<std::uint64_t> out;
  out.reserve(tasks_.size());
  for (const auto& [id, e] : tasks_) out.push_back(id);
  std::sort(out.begin(), out.end());
  return out;
}

std::size_t JournalState::evict(const Bounds& b, std::int64_t now_ms, std::size_t max) {
  std::size_t n = 0;
  while (n < max && !finished_order_.empty()) {
    const auto [ms, id] = finished_order_.front();
    const auto it = tasks_.find(id);
    if (it == tasks_.end() || !finished(it->second.task) || it->second.task.finished_ms != ms) {
      finished_order_.pop_front();  // stale: evicted, or finished again under the same id
      continue;
    }
    const bool over_count = b.max_finished > 0 && finished_count_ > b.max_finished;
    const bool over_bytes = b.max_finished_bytes > 0 && finished_bytes_ > b.max_finished_bytes;
    const bool too_old = b.max_finished_age_ms > 0 && ms < now_ms - b.max_finished_age_ms;
    if (!over_count && !over_bytes && !too_old) break;
    finished_order_.pop_front();
    erase(it);
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

std::vector<std::uint64_t> JournalState::live_in(std::uint64_t seq) const {
  std::vector<std::uint64_t> out;
  const auto r = rounds_.find(seq);
  if (r == rounds_.end()) return out;
  for (std::uint64_t id : r->second.ids) {
    const auto it = tasks_.find(id);
    if (it == tasks_.end()) continue;
    const auto& recs = it->second.records;
    if (std::any_of(recs.begin(), recs.end(), [&](const auto& p) { return p.first == seq; })) {
      out.push_back(id);
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace sandpool
