// RedisFeeder's writer (redis_feeder.hpp): the ends of the tasks the local pool ran, written
// to Redis in batches, in order, again after Redis comes back, and kept in the state dir
// when the feeder stops before they are written.
#include <algorithm>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <sandpool/redis/redis_feeder.hpp>

#include "redis/redis_feeder_threads.hpp"

namespace sandpool::redis {
namespace {

using feeder::connect;
using feeder::encode_stored;
using feeder::kRetryFirst;
using feeder::kRetryMax;
using feeder::wall_ms;

// What became of an end in its batch: written as an end (or handed back, `released`), or
// not an end: deferred to a retry, or fenced (not this node's any more).
enum class Written : std::uint8_t { kEnd, kDeferred, kFenced };

// The end of a task every live node refused, kMaxRefusals times at least: dead-lettered
// `rejected`.
TaskConsumer::EndWrite refused_end(const UnwrittenEnd& e, std::uint32_t refusals,
                                   const std::string& consumer) {
  TaskConsumer::EndWrite w;
  w.entry = &e.entry;
  w.state = std::string(to_string(TaskState::kDeadLettered));
  w.reason = std::string(to_string(DeadReason::kRejected));
  w.error = "refused by every live node, " + std::to_string(refusals) + " times; last by " +
            consumer + ": " + e.refused;
  w.now_ms = wall_ms();
  return w;
}

// The end of a task asked to cancel while its failed attempt ran: cancelled, not retried.
TaskConsumer::EndWrite cancelled_end(const UnwrittenEnd& e, std::vector<std::string> attempts) {
  TaskConsumer::EndWrite w;
  w.entry = &e.entry;
  w.attempts = std::move(attempts);
  w.attempts_before = TaskConsumer::attempts_known(e.entry);  // retry.lua wrote none
  w.state = std::string(to_string(TaskState::kCancelled));
  w.error = "cancelled; its last attempt failed: " + e.account.error;
  w.reason = std::string(to_string(CancelReason::kUser));
  w.now_ms = wall_ms();
  return w;
}

// The end the local pool gave the task, its attempts with it.
TaskConsumer::EndWrite local_end(const UnwrittenEnd& e) {
  TaskConsumer::EndWrite w;
  w.entry = &e.entry;
  for (const Attempt& a : e.account.history) w.attempts.push_back(encode_stored(a));
  w.attempts_before = TaskConsumer::attempts_known(e.entry);
  w.state = std::string(to_string(e.account.state));
  w.result = e.account.result;
  w.error = e.account.error;
  if (e.account.state == TaskState::kDeadLettered) w.reason = to_string(e.account.reason);
  w.now_ms = wall_ms();
  return w;
}

// Counts a written batch in `stats`: each end by its outcome, and the answers of the ends
// sent (`answers`, in order) or of the hand-backs (`released`).
void count_written(const std::vector<Written>& outcome,
                   const std::vector<std::optional<Fenced>>& released,
                   const std::vector<Fenced>& answers, FeederStats& stats) {
  std::size_t next = 0;  // in answers
  for (std::size_t i = 0; i < outcome.size(); ++i) {
    // A batch sent again after a connection broke mid-way finds its first ends written:
    // they count as fenced, and the task still has exactly one end.
    if (outcome[i] == Written::kDeferred) {
      ++stats.deferred;
      continue;
    }
    if (outcome[i] == Written::kFenced) {
      ++stats.fenced;
      continue;
    }
    const Fenced answer = released[i] ? *released[i] : answers[next++];
    if (answer == Fenced::kNotYours) {
      ++stats.fenced;
    } else if (released[i]) {
      ++stats.released;
    } else {
      ++stats.finished;
    }
  }
}

}  // namespace

Status RedisFeeder::write_ends(Connection& c, const std::vector<Ended>& batch, bool lone) {
  std::vector<TaskConsumer::EndWrite> writes;
  writes.reserve(batch.size());
  std::vector<std::optional<Fenced>> released(batch.size());
  std::vector<Written> outcome(batch.size(), Written::kEnd);
  std::vector<std::int64_t> refused_due;  // of the refused tasks deferred to the later set
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const Ended& e = batch[i];
    if (!e.refused.empty()) {  // rare: one round trip each
      // Deferred for a heartbeat (this node does not read it again at once), or, refused by
      // every live node, ended.
      using Verdict = TaskConsumer::Refusal::Verdict;
      auto n = consumer_.refused(c, e.entry, opts_.consumer, wall_ms(), opts_.heartbeat);
      if (!n) return n.status();
      if (n->verdict == Verdict::kNotYours) {
        outcome[i] = Written::kFenced;
      } else if (n->verdict == Verdict::kDeferred) {
        released[i] = Fenced::kDone;
        refused_due.push_back(n->due_ms);
      } else {  // an end (`finished`), as any other
        writes.push_back(refused_end(e, n->refusals, opts_.consumer));
      }
      continue;
    }
    if (e.release) {  // rare: one round trip each
      auto r = consumer_.release(c, e.entry, opts_.consumer);
      if (!r) return r.status();
      released[i] = *r;
      continue;
    }
    if (e.account.state == TaskState::kDeadLettered &&
        e.account.reason == DeadReason::kRetriesExhausted) {
      // The local attempt failed and may be retried (the local pool has no retries of its
      // own): the next attempt waits in Redis, unless the task used up its retries there.
      std::vector<std::string> attempts;
      for (const Attempt& a : e.account.history) attempts.push_back(encode_stored(a));
      TaskConsumer::Backoff b;
      std::uint32_t retries = 0;
      {
        MutexLock lk(sh_->mu);
        b.base_ms = sh_->retry.base.count();
        b.multiplier = sh_->retry.multiplier;
        b.max_ms = sh_->retry.max.count();
        retries = e.entry.task.options.retries.value_or(sh_->default_retries);
        b.jitter = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
      }
      auto r = consumer_.retry(c, e.entry, opts_.consumer, attempts, retries, b, wall_ms());
      if (!r) return r.status();
      if (*r == TaskConsumer::Retried::kDeferred) {
        outcome[i] = Written::kDeferred;
        continue;
      }
      if (*r == TaskConsumer::Retried::kNotYours) {
        outcome[i] = Written::kFenced;
        continue;
      }
      if (*r == TaskConsumer::Retried::kCancelled) {  // asked while the attempt ran: no retry
        writes.push_back(cancelled_end(e, std::move(attempts)));
        continue;
      }
    }
    writes.push_back(local_end(e));
  }
  auto answers = consumer_.end_all(c, opts_.consumer, writes);
  if (!answers) return answers.status();
  MutexLock lk(sh_->mu);
  for (const Ended& e : batch) sh_->held.erase(key_of(e.entry));
  // Moved back by this node's reader when due (and by any node's beat).
  // The writer's batch (if it was one) or the reader's lone end: its entries are let go.
  if (lone) {
    sh_->lone_writing = false;
  } else {
    sh_->writing = 0;
  }
  sh_->throttle_due.insert(refused_due.begin(), refused_due.end());
  count_written(outcome, released, *answers, sh_->stats);
  sh_->cv.notify_all();  // the unwritten ends are fewer: the reader may read again
  return Status::ok();
}

Status RedisFeeder::write_kept_ends(Connection& c) {
  if (opts_.state_dir.empty()) return Status::ok();
  const std::string path = unwritten_ends::path_in(opts_.state_dir, opts_.pool);
  // Taken (read and removed as one step): a retiring feeder of this pool, replaced by a
  // reload, may be appending to the file on its own thread.
  auto kept = unwritten_ends::take(path, opts_.pool, opts_.consumer);
  if (!kept) return kept.status().code() == Code::kNotFound ? Status::ok() : kept.status();
  constexpr std::ptrdiff_t kChunk = 256;
  for (auto at = kept->ends.begin(); at != kept->ends.end();) {
    const auto end = kept->ends.end() - at > kChunk ? at + kChunk : kept->ends.end();
    if (Status s = write_ends(c, std::vector<Ended>(at, end)); !s) {
      // What is not written goes back to the file, for the next start.
      (void)unwritten_ends::append(path, opts_.pool, opts_.consumer,
                                   std::deque<Ended>(at, kept->ends.end()));
      return s;
    }
    at = end;
  }
  if (kept->refused != 0) {
    MutexLock lk(sh_->mu);
    sh_->stats.last_error = "redis pool " + opts_.pool + ": " + std::to_string(kept->refused) +
                            " kept ends refused, the first: " + kept->first_refusal;
  }
  return Status::ok();
}

void RedisFeeder::keep_ends() {
  give_up_batch_ends();  // the batch layout's: not kept (their batches are claimed later)
  std::deque<Ended> ends;
  {
    MutexLock lk(sh_->mu);
    ends.swap(sh_->ends);
  }
  if (ends.empty() || opts_.state_dir.empty()) return;
  const std::string path = unwritten_ends::path_in(opts_.state_dir, opts_.pool);
  auto kept = unwritten_ends::append(path, opts_.pool, opts_.consumer, ends);
  MutexLock lk(sh_->mu);
  sh_->stats.kept_ends += kept ? *kept : 0;
  if (!kept || *kept < ends.size()) {
    sh_->stats.last_error = "redis pool " + opts_.pool + ": " +
                            std::to_string(ends.size() - (kept ? *kept : 0)) +
                            " ends given up at shutdown (" +
                            (kept ? "over the file's bound" : kept.status().to_string()) + ")";
  }
}

void RedisFeeder::write_loop() {
  constexpr std::size_t kMaxBatch = 512;  // ends per round trip: one finish_batch script
  // Connecting gives up once the feeder stops: then one attempt, and the ends are kept.
  auto stopped = [this] {
    MutexLock lk(sh_->mu);
    return sh_->dead || sh_->stopping;
  };
  auto noter = [this](const Status& s) { note(s); };
  std::optional<Connection> c;
  std::chrono::milliseconds wait = kRetryFirst;
  for (;;) {
    std::vector<Ended> batch;
    bool stopping = false;
    bool batch_ends = false;  // the batch layout's, queued (write_batch_ends)
    {
      MutexLock lk(sh_->mu);
      // Stopping, it waits for the reader's lone end: written there, or queued here.
      while (!sh_->dead && sh_->ends.empty() && sh_->batch_queued == 0 &&
             (!sh_->stopping || sh_->lone_busy())) {
        sh_->ends_cv.wait(sh_->mu);
      }
      if (sh_->dead || (sh_->ends.empty() && sh_->batch_queued == 0)) return;
      stopping = sh_->stopping;
      batch_ends = sh_->batch_queued > 0;
      // Moved out (not copied: results and attempts may be large), and put back in front
      // when the write fails, so that the ends stay in order.
      const auto n = static_cast<std::ptrdiff_t>(std::min(kMaxBatch, sh_->ends.size()));
      batch.assign(std::make_move_iterator(sh_->ends.begin()),
                   std::make_move_iterator(sh_->ends.begin() + n));
      sh_->ends.erase(sh_->ends.begin(), sh_->ends.begin() + n);
      sh_->writing = batch.size();
    }
    // Puts the batch back in front of the queue (its ends not written).
    const auto put_back = [&] {
      if (batch.empty()) return;
      MutexLock lk(sh_->mu);
      sh_->ends.insert(sh_->ends.begin(), std::make_move_iterator(batch.begin()),
                       std::make_move_iterator(batch.end()));
      sh_->writing = 0;
    };
    if (!c || c->broken()) {
      if (stopping) {
        auto once = Connection::open(opts_.endpoint);
        note(once.status());
        if (once) c.emplace(std::move(once).value());
      } else {
        c = connect(opts_.endpoint, stopped, noter);
      }
      if (!c) {
        put_back();
        if (!stopping) continue;  // it began to stop, or died, meanwhile: the loop's top says
        keep_ends();
        return;
      }
    }
    Status s = batch.empty() ? Status::ok() : write_ends(*c, batch);
    if (!s) put_back();
    if (s && batch_ends) s = write_batch_ends(*c);  // puts its ends back itself if it fails
    note(s);
    if (s) {  // write_ends let the batch go (Shared::writing)
      wait = kRetryFirst;
      continue;
    }
    // Redis away (or an error of the server): the ends wait, in order, and are tried again;
    // stopping, after one attempt they are kept in the state dir for the next start.
    {
      MutexLock lk(sh_->mu);
      if (sh_->stopping) {
        lk.unlock();
        keep_ends();
        return;
      }
      const auto until = feeder::Clock::now() + wait;
      while (!sh_->dead && sh_->ends_cv.wait_until(sh_->mu, until) == std::cv_status::no_timeout) {
      }
    }
    wait = std::min(kRetryMax, wait * 2);
  }
}

}  // namespace sandpool::redis
