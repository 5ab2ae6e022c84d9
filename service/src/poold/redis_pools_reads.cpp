// RedisPools (redis_pools.hpp): what the service reads of the Redis pools' tasks and dead
// letters, Redis's records made the service's types (TaskResult, DeadLetter), and the waits
// for tasks to end (the wait thread, which also refreshes the pools' summaries).
#include <algorithm>
#include <charconv>
#include <map>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include <sandpool/service/redis_pools.hpp>
#include <sandpool/task/enum_names.hpp>

namespace sandpool::poold {
namespace {

// An attempt as the feeder encoded it (redis_feeder.cpp); a malformed one keeps its number.
Attempt decode_attempt(const std::string& text, std::uint32_t number) {
  Attempt a;
  a.number = number;
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) {
    a.outcome = Outcome::kLost;
    a.error = "(an attempt redis holds that does not parse)";
    return a;
  }
  // By its place in the list: each node numbers the one attempt it runs 1.
  a.outcome =
      parse_enum(j.value("outcome", std::string()), Outcome::kCancelled).value_or(Outcome::kLost);
  a.error = j.value("error", std::string());
  a.worker_pid = j.value("worker_pid", 0);
  a.started_ms = j.value("started_ms", std::int64_t{0});
  a.ended_ms = j.value("ended_ms", std::int64_t{0});
  a.backtrace = j.value("backtrace", std::string());
  return a;
}

// A letter of a pool's dead-letter stream (its fields by name) as the store's DeadLetter.
DeadLetter letter_of(const std::string& pool,
                     const std::vector<std::pair<std::string, std::string>>& fields) {
  DeadLetter l;
  l.pool = pool;
  l.task.state = TaskState::kDeadLettered;
  std::uint32_t attempts = 0;
  for (const auto& field : fields) {
    // Named references, not a structured binding: clang 14 (the sanitizer and fuzz trees)
    // cannot capture a binding in a lambda.
    const std::string& k = field.first;
    const std::string& v = field.second;
    const auto number = [&v]<class T>(T* out) {
      std::from_chars(v.data(), v.data() + v.size(), *out);
    };
    if (k == "id") {
      number(&l.task.id);
      l.letter_id = l.task.id;
    } else if (k == "type") {
      l.task.type = v;
    } else if (k == "payload") {
      l.payload = v;
    } else if (k == "reason") {
      l.task.reason = parse_enum(v, DeadReason::kRejected).value_or(DeadReason::kNone);
    } else if (k == "error") {
      l.task.error = v;
    } else if (k == "dead_lettered_ms") {
      number(&l.dead_lettered_ms);
    } else if (k == "attempts") {
      number(&attempts);
    } else if (k == "priority") {
      number(&l.options.priority);
    } else if (k == "key") {
      l.options.key = v;
    } else if (k == "tenant") {
      l.options.tenant = v;
      l.task.tenant = v;
    } else if (k == "retries") {
      std::uint32_t r = 0;
      number(&r);
      l.options.retries = r;
    } else if (k == "timeout_ms") {
      std::int64_t ms = 0;
      number(&ms);
      l.options.timeout = std::chrono::milliseconds(ms);
    }
  }
  // The stream keeps the count; the attempts themselves are in the task's hash while it is
  // kept (`task ID`).
  for (std::uint32_t i = 1; i <= attempts; ++i) {
    Attempt a;
    a.number = i;
    a.outcome = Outcome::kError;
    l.task.history.push_back(a);
  }
  return l;
}

bool matches(const DeadLetter& l, const DeadLetterFilter& f) {
  return (!f.type || l.task.type == *f.type) && (!f.reason || l.task.reason == *f.reason) &&
         (!f.task_id || l.task.id == *f.task_id) &&
         (!f.from_ms || l.dead_lettered_ms >= *f.from_ms) &&
         (!f.until_ms || l.dead_lettered_ms < *f.until_ms);
}

}  // namespace

TaskResult to_task_result(const redis::StoredTask& t) {
  TaskResult r;
  r.id = t.id;
  r.type = t.type;
  r.state = parse_enum(t.state, TaskState::kScheduled).value_or(TaskState::kQueued);
  r.result = t.result;
  r.error = t.error;
  r.not_before_ms = t.not_before_ms;
  r.tenant = t.tenant;
  if (r.state == TaskState::kDeadLettered) {
    r.reason = parse_enum(t.reason, DeadReason::kRejected).value_or(DeadReason::kNone);
  }
  if (r.state == TaskState::kCancelled) r.cancel_reason = CancelReason::kUser;
  r.history.reserve(t.history.size());
  for (std::size_t i = 0; i < t.history.size(); ++i) {
    r.history.push_back(decode_attempt(t.history[i], static_cast<std::uint32_t>(i + 1)));
  }
  return r;
}

Result<bool> RedisPools::task_open(std::uint64_t id) {
  auto state = schedules_.with([&](redis::Connection& c) { return any_.task_state(c, id); });
  if (!state) return unavailable("", state.status());
  if (!*state) return false;  // evicted after its end
  return !is_terminal(parse_enum(**state, TaskState::kScheduled).value_or(TaskState::kQueued));
}

Result<RedisPools::LetterPage> RedisPools::dead_letters(const std::string& pool,
                                                        const DeadLetterFilter& filter,
                                                        std::size_t limit,
                                                        const std::string& after) {
  auto stream = producer_of(pool);
  if (!stream) return stream.status();
  constexpr std::size_t kChunk = 500;  // letters per XREVRANGE
  LetterPage out;
  std::string before = after;
  for (std::size_t scanned = 0; scanned < kLetterScan;) {
    const std::size_t ask = std::min(kChunk, kLetterScan - scanned);
    auto chunk =
        reads_.with([&](redis::Connection& c) { return stream->dead_letters(c, ask, before); });
    if (!chunk) return unavailable(pool, chunk.status());
    for (std::size_t i = 0; i < chunk->size(); ++i) {
      before = (*chunk)[i].entry_id;
      DeadLetter l = letter_of(pool, (*chunk)[i].fields);
      if (!matches(l, filter)) continue;
      out.letters.push_back(std::move(l));
      if (out.letters.size() == limit) {
        // More may follow: in this chunk, or after it when it was full.
        if (i + 1 < chunk->size() || chunk->size() == ask) out.next = before;
        return out;
      }
    }
    scanned += chunk->size();
    if (chunk->size() < ask) return out;  // the oldest letter was read
  }
  out.next = before;  // the scan's bound: the page goes on from there
  return out;
}

Result<DeadLetter> RedisPools::dead_letter(std::uint64_t id) {
  std::vector<std::string> names;
  {
    MutexLock lk(mu_);
    for (const auto& [name, a] : pools_) names.push_back(name);
  }
  DeadLetterFilter f;
  f.task_id = id;
  for (const std::string& name : names) {
    auto found = dead_letters(name, f, 1);
    if (!found) return found.status();
    if (!found->letters.empty()) return std::move(found->letters.front());
  }
  return Status::error(Code::kNotFound, "no dead letter of task " + std::to_string(id));
}

Result<TaskResult> RedisPools::task(std::uint64_t id) {
  auto t = reads_.with([&](redis::Connection& c) { return any_.task(c, id); });
  if (!t) return unavailable("", t.status());
  return to_task_result(*t);
}

void RedisPools::refresh_summaries() {
  std::vector<std::pair<std::string, redis::TaskProducer>> all;
  {
    MutexLock lk(mu_);
    for (const auto& [name, a] : pools_) all.emplace_back(name, a->producer);
  }
  std::map<std::string, Result<redis::TaskProducer::Summary>> fresh;
  for (const auto& entry : all) {
    const redis::TaskProducer& stream = entry.second;  // not a binding: clang 14 captures it
    fresh.emplace(entry.first,
                  waits_.with([&](redis::Connection& c) { return stream.summary(c); }));
  }
  MutexLock lk(summary_mu_);
  summaries_ = std::move(fresh);
}

}  // namespace sandpool::poold
