// The soak's parts (soak.cpp runs them): what each task is asked to do, the tally that
// checks every accepted task ends exactly once in a state its kind allows, and the thread
// that cancels tasks at random moments.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <queue>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <sandpool/pool/pool.hpp>

namespace sandpool::bench::soak {

// What a task asks the chaos plugin to do (plugins/chaos.c), and the rates per million
// tasks (docs/performance.md, "Soak"). Everything else is an echo.
enum class Kind : std::uint8_t {
  kEcho,
  kCrashOnce,    // crashes its worker on attempt 1, completes on the retry
  kCrashAlways,  // crashes its worker; submitted with retries 0: dead-lettered
  kTimeout,      // sleeps 1 s under a 20 ms timeout, retries 0: dead-lettered
  kSlow,         // sleeps 300 ms honouring cancel; always cancelled (mostly while it runs)
  kStubborn,     // sleeps 300 ms ignoring cancel; always cancelled: killed after cancel_grace
};
inline constexpr std::uint32_t kCrashOncePpm = 5000;    // with kCrashAlways: 1% crash
inline constexpr std::uint32_t kCrashAlwaysPpm = 5000;  //
inline constexpr std::uint32_t kTimeoutPpm = 1000;      // 0.1%
inline constexpr std::uint32_t kSlowPpm = 1000;         // 0.1%
inline constexpr std::uint32_t kStubbornPpm = 100;      // 0.01%
// Of the others, the share cancelled at a random moment up to kMaxRandomCancelDelay after
// submit: queued, in a ring, or already ended (then the cancel is refused).
inline constexpr std::uint32_t kRandomCancelPpm = 1000;  // 0.1%
inline constexpr std::chrono::milliseconds kMaxRandomCancelDelay{100};
// Slow and stubborn tasks: 3 in 4 are cancelled once they run, up to kMaxRunningCancelDelay
// after the soak sees them running; the others up to that long after submit (mostly queued).
inline constexpr std::uint32_t kCancelRunningPerFour = 3;
inline constexpr std::chrono::milliseconds kMaxRunningCancelDelay{20};
inline constexpr std::chrono::milliseconds kTaskTimeout{20};  // kTimeout's own timeout
inline constexpr std::chrono::milliseconds kCancelGrace{20};  // the pool's cancel_grace
inline constexpr std::uint32_t kEchoBytes = 64;  // echo data after the one-byte command

const char* to_string(Kind k);
inline constexpr std::size_t kKinds = 6;

// One task's plan, drawn from the soak's seeded generator.
struct Plan {
  Kind kind = Kind::kEcho;
  bool cancel = false;               // the soak cancels it
  bool cancel_when_running = false;  // the delay counts from when it is seen running
  std::int64_t cancel_delay_ns = 0;  // after its submit, or after it is seen running
};
Plan draw_plan(std::mt19937_64& rng);
// The payload for task `seq` of kind k (chaos plugin syntax).
std::string payload_for(Kind k, std::uint64_t seq);
// The SubmitOptions for kind k (retries, timeout); on_done is the caller's.
SubmitOptions submit_options_for(Kind k);

// Every task's end, counted exactly once per accepted task. on_done() runs on the pool's
// loop thread; accept() and the window on the submitting thread; the counters are atomic, so
// any thread may read them at any time (the deadline report reads them while a wedged pool
// still holds the rest).
class Tally {
 public:
  // `tasks`: how many the soak may submit; `window`: accepted but not yet ended tasks the
  // submitter allows before it waits for half of them to end.
  Tally(std::uint64_t tasks, std::uint64_t window);

  // Records task `seq`'s plan, before its submit (on_done may run before submit returns).
  void plan(std::uint64_t seq, const Plan& plan);
  // Records task `seq` as accepted by the pool, under `task_id`.
  void accept(std::uint64_t seq, std::uint64_t task_id);
  // Records task `seq` as refused by submit() (not accepted: it cannot be lost).
  void refuse() { refused_.fetch_add(1); }
  // Blocks while the window is full; returns false iff `deadline_ns` passed first.
  bool wait_for_window(std::int64_t deadline_ns);
  // The pool's on_done for task `seq`.
  void on_done(std::uint64_t seq, const TaskResult& r);

  std::uint64_t accepted() const { return accepted_.load(); }
  std::uint64_t refused() const { return refused_.load(); }
  std::uint64_t ended() const { return ended_.load(); }  // distinct tasks ended
  std::uint64_t completed() const { return completed_.load(); }
  std::uint64_t dead_lettered() const { return dead_lettered_.load(); }
  std::uint64_t cancelled() const { return cancelled_.load(); }
  std::uint64_t duplicated() const { return duplicated_.load(); }
  // Ended in a state its kind cannot reach (an echo dead-lettered, a crash completed, a
  // cancel nobody asked for, a wrong echo, a dead letter for another reason than
  // retries_exhausted).
  std::uint64_t unexpected() const { return unexpected_.load(); }
  // Accepted tasks of kind k.
  std::uint64_t accepted_of(Kind k) const { return by_kind_[static_cast<std::size_t>(k)]; }
  // Accepted tasks that have not ended.
  std::uint64_t open() const {
    return static_cast<std::uint64_t>(std::max<std::int64_t>(open_now(), 0));
  }
  // Accepted tasks that have not ended: "seq (kind, task id)", at most `max` of them.
  std::vector<std::string> open_tasks(std::size_t max) const;
  // The first unexpected end, described; empty when none.
  std::string first_unexpected() const;

 private:
  bool expected(std::uint64_t seq, const TaskResult& r) const;
  void note_unexpected(std::uint64_t seq, const TaskResult& r);
  bool ended_bit(std::uint64_t seq) const;

  std::int64_t open_now() const;  // accepted and not ended (transiently < 0: see on_done)

  // Per task (by seq): written by the submitter before its submit, read by on_done after it
  // (the pool's inbox orders them) and, for the id, by whoever asks for open_tasks().
  std::vector<Kind> kinds_;
  std::vector<std::uint8_t> cancel_planned_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> ids_;         // 0: not accepted
  std::unique_ptr<std::atomic<std::uint64_t>[]> ended_bits_;  // one bit per seq
  std::atomic<std::uint64_t> by_kind_[kKinds] = {};
  std::atomic<std::uint64_t> accepted_{0}, refused_{0}, ended_{0}, completed_{0}, dead_lettered_{0},
      cancelled_{0}, duplicated_{0}, unexpected_{0};
  const std::int64_t window_;
  // The submitter's waits: it sets wake_at_open_, then waiting_, and on_done notifies once at
  // most wake_at_open_ tasks are open (seq_cst on both sides, so one of them sees the other).
  mutable std::mutex mu_;  // also guards first_unexpected_
  std::condition_variable cv_;
  std::atomic<bool> waiting_{false};
  std::atomic<std::int64_t> wake_at_open_{0};
  std::string first_unexpected_;
};

// Cancels tickets when they come due, from its own thread (Ticket::cancel waits for the
// pool's loop thread). The submitter adds; stop() lets the rest come due, then joins.
class Canceller {
 public:
  Canceller();
  ~Canceller() { stop(); }
  // Cancels `ticket` delay_ns from now, or, with when_running, delay_ns after it is first
  // seen running (looked at every millisecond; a task not running within kRunningPatience
  // is cancelled wherever it is).
  void add(Ticket ticket, std::int64_t delay_ns, bool when_running);
  void stop();
  std::uint64_t requested() const { return requested_.load(); }
  // Cancels the pool took (the task had not ended yet).
  std::uint64_t taken() const { return taken_.load(); }
  // Of those, the cancels of tasks the pool showed running just before.
  std::uint64_t of_running() const { return of_running_.load(); }

 private:
  struct Entry {
    std::int64_t due_ns;
    Ticket ticket;
    std::int64_t delay_ns = 0;    // after it is seen running
    std::int64_t give_up_ns = 0;  // 0: cancel at due_ns; else wait for running until then
    bool operator>(const Entry& o) const { return due_ns > o.due_ns; }
  };
  void run();
  // Returns true iff `e` should be cancelled now; otherwise puts it back for later.
  bool ready_to_cancel(Entry& e, std::int64_t now);
  static constexpr std::int64_t kPollNs = 1'000'000;
  static constexpr std::int64_t kRunningPatience = 10'000'000'000;
  std::mutex mu_;
  std::condition_variable cv_;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> due_;
  bool stopping_ = false;
  std::atomic<std::uint64_t> requested_{0}, taken_{0}, of_running_{0};
  std::thread thread_;
};

}  // namespace sandpool::bench::soak
