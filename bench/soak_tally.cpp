// The soak's plans, its exactly-once tally and its canceller (soak.hpp).
#include "soak.hpp"

#include <chrono>

#include <sandpool/ipc/wake.hpp>

#include "bench.hpp"

namespace sandpool::bench::soak {
namespace {

constexpr std::int64_t kMsNs = 1'000'000;

std::chrono::steady_clock::time_point steady_at(std::int64_t monotonic_ns) {
  // steady_clock is CLOCK_MONOTONIC on Linux, the clock ipc::monotonic_ns reads.
  return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(monotonic_ns));
}

// The bytes in front of the echo data, per kind that echoes.
std::string_view command_of(Kind k) {
  switch (k) {
    case Kind::kEcho:
      return "e";
    case Kind::kCrashOnce:
      return "c1";
    case Kind::kCrashAlways:
      return "c9";  // more attempts than it ever gets (retries 0)
    case Kind::kTimeout:
      return "s1000";
    case Kind::kSlow:
      return "s300";
    case Kind::kStubborn:
      return "h300";
  }
  return "e";
}

// Returns true iff `result` is task seq's own payload (command + make_payload(seq)), compared
// in place: this runs on the pool's loop thread once per task.
bool echoes(const std::string& result, Kind k, std::uint64_t seq) {
  const std::string_view cmd = command_of(k);
  if (result.size() != cmd.size() + kEchoBytes || !result.starts_with(cmd)) return false;
  for (std::uint32_t i = 0; i < kEchoBytes; ++i) {
    if (result[cmd.size() + i] != static_cast<char>('a' + (seq + i) % 26)) return false;
  }
  return true;
}

}  // namespace

const char* to_string(Kind k) {
  switch (k) {
    case Kind::kEcho:
      return "echo";
    case Kind::kCrashOnce:
      return "crash_once";
    case Kind::kCrashAlways:
      return "crash_always";
    case Kind::kTimeout:
      return "timeout";
    case Kind::kSlow:
      return "slow";
    case Kind::kStubborn:
      return "stubborn";
  }
  return "?";
}

Plan draw_plan(std::mt19937_64& rng) {
  std::uniform_int_distribution<std::uint32_t> ppm(0, 999'999);
  std::uniform_int_distribution<std::int64_t> random_delay(0,
                                                           kMaxRandomCancelDelay.count() * kMsNs);
  std::uniform_int_distribution<std::int64_t> short_delay(0,
                                                          kMaxRunningCancelDelay.count() * kMsNs);
  std::uniform_int_distribution<std::uint32_t> quarter(0, 3);
  Plan p;
  std::uint32_t u = ppm(rng);
  const std::pair<Kind, std::uint32_t> mix[] = {{Kind::kCrashOnce, kCrashOncePpm},
                                                {Kind::kCrashAlways, kCrashAlwaysPpm},
                                                {Kind::kTimeout, kTimeoutPpm},
                                                {Kind::kSlow, kSlowPpm},
                                                {Kind::kStubborn, kStubbornPpm}};
  for (const auto& [kind, rate] : mix) {
    if (u < rate) {
      p.kind = kind;
      break;
    }
    u -= rate;
  }
  if (p.kind == Kind::kSlow || p.kind == Kind::kStubborn) {
    p.cancel = true;
    p.cancel_when_running = quarter(rng) < kCancelRunningPerFour;
    p.cancel_delay_ns = short_delay(rng);
  } else if (ppm(rng) < kRandomCancelPpm) {
    p.cancel = true;
    p.cancel_delay_ns = random_delay(rng);
  }
  return p;
}

std::string payload_for(Kind k, std::uint64_t seq) {
  std::string p(command_of(k));
  if (k == Kind::kEcho || k == Kind::kCrashOnce || k == Kind::kCrashAlways) {
    p += make_payload(seq, kEchoBytes);
  }
  return p;
}

SubmitOptions submit_options_for(Kind k) {
  SubmitOptions so;
  if (k == Kind::kCrashAlways || k == Kind::kTimeout) so.retries = 0;
  if (k == Kind::kTimeout) so.timeout = kTaskTimeout;
  return so;
}

// ---- Tally ----------------------------------------------------------------------------

Tally::Tally(std::uint64_t tasks, std::uint64_t window)
    : kinds_(tasks),
      cancel_planned_(tasks),
      ids_(new std::atomic<std::uint64_t>[tasks]()),
      ended_bits_(new std::atomic<std::uint64_t>[(tasks + 63) / 64]()),
      window_(static_cast<std::int64_t>(window)) {}

void Tally::plan(std::uint64_t seq, const Plan& plan) {
  kinds_[seq] = plan.kind;
  cancel_planned_[seq] = plan.cancel;
}

void Tally::accept(std::uint64_t seq, std::uint64_t task_id) {
  ids_[seq].store(task_id, std::memory_order_relaxed);
  by_kind_[static_cast<std::size_t>(kinds_[seq])].fetch_add(1, std::memory_order_relaxed);
  accepted_.fetch_add(1);
}

std::int64_t Tally::open_now() const {
  return static_cast<std::int64_t>(accepted_.load()) - static_cast<std::int64_t>(ended_.load());
}

bool Tally::wait_for_window(std::int64_t deadline_ns) {
  if (open_now() < window_) return true;
  const std::int64_t low = window_ / 2;
  std::unique_lock lock(mu_);
  wake_at_open_.store(low);
  waiting_.store(true);
  const bool ok = cv_.wait_until(lock, steady_at(deadline_ns), [&] { return open_now() <= low; });
  waiting_.store(false);
  return ok;
}

void Tally::on_done(std::uint64_t seq, const TaskResult& r) {
  const std::uint64_t bit = std::uint64_t{1} << (seq % 64);
  if (ended_bits_[seq / 64].fetch_or(bit, std::memory_order_relaxed) & bit) {
    duplicated_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  switch (r.state) {
    case TaskState::kCompleted:
      completed_.fetch_add(1, std::memory_order_relaxed);
      break;
    case TaskState::kDeadLettered:
      dead_lettered_.fetch_add(1, std::memory_order_relaxed);
      break;
    case TaskState::kCancelled:
      cancelled_.fetch_add(1, std::memory_order_relaxed);
      break;
    default:
      break;  // not terminal: unexpected below
  }
  if (!expected(seq, r)) note_unexpected(seq, r);
  const std::int64_t open = static_cast<std::int64_t>(accepted_.load()) -
                            static_cast<std::int64_t>(ended_.fetch_add(1) + 1);
  if (waiting_.load() && open <= wake_at_open_.load()) {
    { std::lock_guard lock(mu_); }  // the waiter is inside wait_until, or has not checked yet
    cv_.notify_all();
  }
}

bool Tally::expected(std::uint64_t seq, const TaskResult& r) const {
  const Kind k = kinds_[seq];
  switch (r.state) {
    case TaskState::kCancelled:
      return cancel_planned_[seq] != 0;
    case TaskState::kCompleted:
      if (k == Kind::kSlow || k == Kind::kStubborn) return r.result == "slept";  // cancel too late
      return (k == Kind::kEcho || k == Kind::kCrashOnce) && echoes(r.result, k, seq);
    case TaskState::kDeadLettered:
      return (k == Kind::kCrashAlways || k == Kind::kTimeout) &&
             r.reason == DeadReason::kRetriesExhausted;
    default:
      return false;
  }
}

void Tally::note_unexpected(std::uint64_t seq, const TaskResult& r) {
  if (unexpected_.fetch_add(1, std::memory_order_relaxed) != 0) return;
  std::string text = "task " + std::to_string(r.id) + " (seq " + std::to_string(seq) + ", " +
                     to_string(kinds_[seq]) +
                     (cancel_planned_[seq] ? ", cancelled by the soak" : "") + ") ended " +
                     std::string(sandpool::to_string(r.state));
  if (r.state == TaskState::kDeadLettered)
    text += " (" + std::string(sandpool::to_string(r.reason)) + ")";
  text += " after " + std::to_string(r.attempts()) + " attempts: " + r.error;
  std::lock_guard lock(mu_);
  first_unexpected_ = std::move(text);
}

std::string Tally::first_unexpected() const {
  std::lock_guard lock(mu_);
  return first_unexpected_;
}

bool Tally::ended_bit(std::uint64_t seq) const {
  return (ended_bits_[seq / 64].load(std::memory_order_relaxed) >> (seq % 64)) & 1;
}

std::vector<std::string> Tally::open_tasks(std::size_t max) const {
  std::vector<std::string> out;
  for (std::uint64_t seq = 0; seq < kinds_.size() && out.size() < max; ++seq) {
    const std::uint64_t id = ids_[seq].load(std::memory_order_relaxed);
    if (id == 0 || ended_bit(seq)) continue;
    out.push_back(std::to_string(seq) + " (" + to_string(kinds_[seq]) + ", task " +
                  std::to_string(id) + ")");
  }
  return out;
}

// ---- Canceller ------------------------------------------------------------------------

Canceller::Canceller() : thread_([this] { run(); }) {}

void Canceller::add(Ticket ticket, std::int64_t delay_ns, bool when_running) {
  const std::int64_t now = ipc::monotonic_ns();
  Entry e{now + delay_ns, std::move(ticket)};
  if (when_running) {
    e.due_ns = now;
    e.delay_ns = delay_ns;
    e.give_up_ns = now + kRunningPatience;
  }
  {
    std::lock_guard lock(mu_);
    due_.push(std::move(e));
  }
  cv_.notify_one();
}

void Canceller::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void Canceller::run() {
  std::unique_lock lock(mu_);
  for (;;) {
    if (due_.empty()) {
      if (stopping_) return;
      cv_.wait(lock);
      continue;
    }
    const std::int64_t due = due_.top().due_ns;
    if (ipc::monotonic_ns() < due) {
      cv_.wait_until(lock, steady_at(due));
      continue;
    }
    Entry e = due_.top();
    due_.pop();
    if (!ready_to_cancel(e, ipc::monotonic_ns())) continue;
    lock.unlock();
    requested_.fetch_add(1, std::memory_order_relaxed);
    const bool running = e.ticket.state() == TaskState::kRunning;
    if (e.ticket.cancel()) {
      taken_.fetch_add(1, std::memory_order_relaxed);
      if (running) of_running_.fetch_add(1, std::memory_order_relaxed);
    }
    lock.lock();
  }
}

bool Canceller::ready_to_cancel(Entry& e, std::int64_t now) {
  if (e.give_up_ns == 0) return true;
  if (e.ticket.state() == TaskState::kRunning) {
    e.due_ns = now + e.delay_ns;  // running now: cancel after its delay
  } else if (!e.ticket.done() && now < e.give_up_ns) {
    e.due_ns = now + kPollNs;  // not started yet: look again
    due_.push(std::move(e));
    return false;
  }
  e.give_up_ns = 0;
  if (e.due_ns <= now) return true;
  due_.push(std::move(e));
  return false;
}

}  // namespace sandpool::bench::soak
