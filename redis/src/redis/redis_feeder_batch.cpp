// RedisFeeder's batch layout (redis_feeder.hpp, FeederOptions::layout; docs/redis-batch-layout.md,
// slice 2): whole batch entries read and claimed, their tasks with no end record run in the
// local pool, and their ends written per batch (one batch_end each, pipelined), fenced once
// per batch; a task that ends dead_lettered gets its letter too.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <sandpool/redis/redis_feeder.hpp>

#include "redis/redis_feeder_threads.hpp"

namespace sandpool::redis {
namespace {

using feeder::Clock;
using feeder::encode_stored;
using feeder::stopped_here;
using feeder::wall_ms;
// Batches claimed per beat at most, whatever the local pool holds: a dead node's batches wait
// in the local pool behind what runs now, not behind the stream's backlog (a beat claims
// again while it holds less than kClaimBelow tasks).
constexpr std::size_t kClaimBatchesPerBeat = 2;
constexpr std::size_t kClaimBelow = 4 * batch::kMaxTasks;

// The local pool's options of a batch's task: one attempt (retries are slice 3), after the
// `lost` one of a claimed batch.
SubmitOptions batch_task_options(const StreamTask& t, bool claimed) {
  SubmitOptions o;
  o.timeout = t.options.timeout;
  o.retries = 0;
  o.attempts_before = claimed ? 1 : 0;
  o.priority = t.options.priority;
  o.key = t.options.key;
  o.tenant = t.options.tenant;
  return o;
}

// The end record of task `index` as the local pool ended it (`claimed`: its log starts with
// the lost attempt on the dead node). An end over batch::kMaxEndBytes (a large result or
// error) cannot be written in a batch until slice 3 moves it out: its state stays, its result
// is dropped and its error says so.
batch::EndRecord end_record(std::uint32_t index, const TaskResult& r, bool claimed,
                            const std::string& claimant, std::int64_t now_ms) {
  batch::EndRecord rec;
  rec.index = index;
  rec.finished_ms = now_ms;
  rec.state = std::string(to_string(r.state));
  if (r.state == TaskState::kDeadLettered) rec.reason = std::string(to_string(r.reason));
  if (r.state == TaskState::kCancelled) rec.reason = std::string(to_string(r.cancel_reason));
  rec.error = r.error;
  rec.result = r.result;
  if (claimed) {
    Attempt lost;
    lost.number = 1;
    lost.outcome = Outcome::kLost;
    lost.error = feeder::lost_error(claimant);
    lost.ended_ms = now_ms;
    rec.attempt_log.push_back(encode_stored(lost));
  }
  for (const Attempt& a : r.history) rec.attempt_log.push_back(encode_stored(a));
  rec.attempts = static_cast<std::uint32_t>(rec.attempt_log.size());
  std::size_t bytes = 64 + rec.error.size() + rec.result.size();
  for (const std::string& a : rec.attempt_log) bytes += 4 + a.size();
  if (bytes > batch::kMaxEndBytes) {
    rec.error = "its end (" + std::to_string(bytes) +
                " bytes) is over the batch layout's end record (64 KiB): its result is not kept "
                "(a result this large needs slice 3 of docs/redis-batch-layout.md); " +
                r.error.substr(0, 1024);
    rec.result.clear();
    if (rec.attempt_log.size() > 8) rec.attempt_log.resize(8);
  }
  return rec;
}

}  // namespace

void RedisFeeder::Shared::drop_if_done(std::map<EntryKey, HeldBatch>::iterator it) {
  const HeldBatch& b = it->second;
  if (b.local == 0 && b.ends.empty() && b.writing == 0 && (b.acked || b.fenced || b.let_go)) {
    batches.erase(it);
  }
}

void RedisFeeder::read_batches(Connection& c, std::size_t free, std::chrono::milliseconds block) {
  auto got =
      batches_.read(c, opts_.consumer, std::max<std::size_t>(1, free / batch::kMaxTasks), block);
  note(got.status());
  if (!got) {
    if (!c.broken()) std::this_thread::sleep_for(feeder::kRetryFirst);
    return;
  }
  if (got->empty()) return;
  {
    MutexLock lk(sh_->mu);
    sh_->stats.batches_read += got->size();
  }
  run_batches(c, std::move(got).value(), false);
}

void RedisFeeder::claim_dead_batches(Connection& c, std::size_t in_pool) {
  if (in_pool >= kClaimBelow) return;
  auto claimed = batches_.claim_idle(c, opts_.consumer, opts_.claim_after, kClaimBatchesPerBeat);
  note(claimed.status());
  if (!claimed || claimed->empty()) return;
  {
    MutexLock lk(sh_->mu);
    sh_->stats.batches_claimed += claimed->size();
  }
  run_batches(c, std::move(claimed).value(), true);
}

void RedisFeeder::touch_batches(Connection& c) {
  std::vector<EntryKey> held;
  {
    MutexLock lk(sh_->mu);
    for (const auto& [key, b] : sh_->batches) {
      if (!b.let_go && !b.fenced) held.push_back(key);
    }
  }
  if (!held.empty()) note(batches_.touch(c, opts_.consumer, held).status());
}

std::function<void(const TaskResult&)> RedisFeeder::on_batch_end(std::shared_ptr<Shared> sh,
                                                                 EntryKey key,
                                                                 std::uint32_t index) {
  return [sh = std::move(sh), key = std::move(key), index](const TaskResult& r) {
    const bool stopped = stopped_here(r);
    MutexLock lk(sh->mu);
    if (sh->dead) return;
    auto it = sh->batches.find(key);
    if (it == sh->batches.end()) return;
    HeldBatch& b = it->second;
    --b.local;
    --sh->batch_local;
    if (stopped) {
      b.let_go = true;  // not ended: its batch is claimed once idle
    } else if (!b.fenced) {
      b.ends.emplace_back(index, r);
      ++sh->batch_unwritten;
      if (++sh->batch_queued == 1) sh->ends_cv.notify_all();
    }
    sh->ended_locally(r);
    sh->drop_if_done(it);
  };
}

void RedisFeeder::run_batches(Connection& c, std::vector<BatchEntry> entries, bool claimed) {
  std::vector<BatchTask> tasks;
  std::vector<std::pair<EntryKey, std::uint32_t>> whose;  // per task: its batch and index
  for (BatchEntry& e : entries) {
    if (!e.malformed.empty()) {  // not a batch: nothing to run or end
      note(batches_.discard(c, e, opts_.consumer).status());
      MutexLock lk(sh_->mu);
      ++sh_->stats.malformed;
      sh_->stats.last_error = "redis pool " + opts_.pool + ": discarded " + e.malformed;
      continue;
    }
    EntryKey key{e.band, e.entry_id};
    {
      // Its own batch, let go and claimed back while some of its tasks still run here: left
      // alone (claimed again once idle, when nothing of it is here any more).
      MutexLock lk(sh_->mu);
      if (sh_->batches.count(key) != 0) continue;
    }
    std::size_t n = 0;
    for (std::uint32_t i = 0; i < e.tasks.size(); ++i) {
      if (i < e.ended.size() && e.ended[i]) continue;  // ended elsewhere: not run again
      const StreamTask& t = e.tasks[i];
      BatchTask& bt = tasks.emplace_back();
      bt.type = t.type;
      bt.payload = t.payload;  // a copy: the batch keeps its own for a dead letter
      bt.options = batch_task_options(t, claimed);
      bt.options.on_done = on_batch_end(sh_, key, i);
      whose.emplace_back(key, i);
      ++n;
    }
    MutexLock lk(sh_->mu);
    if (sh_->dead) return;
    // Held before any task reaches the pool (its on_done finds it); a batch with every task
    // recorded would be acked already: nothing of it runs here.
    if (n == 0) continue;
    HeldBatch& b = sh_->batches[key];
    b.entry = std::move(e);
    b.claimed = claimed;
    b.local += n;
    sh_->batch_local += n;
  }
  if (tasks.empty()) return;
  std::vector<Result<Ticket>> tickets = pool_.submit_batch(std::move(tasks));
  MutexLock lk(sh_->mu);
  for (std::size_t k = 0; k < tickets.size(); ++k) {
    if (tickets[k]) continue;  // its on_done ends it
    auto it = sh_->batches.find(whose[k].first);
    if (it == sh_->batches.end()) continue;
    HeldBatch& b = it->second;
    --b.local;
    --sh_->batch_local;
    const Status& refusal = tickets[k].status();
    if (refusal.code() == Code::kInvalidArgument || refusal.code() == Code::kTooLarge) {
      // The task itself is not one this node's pool accepts (its type, timeout or payload):
      // ended, as the per-task layout ends a task every live node refused (slice 2 does not
      // bounce a batch's task to other nodes: that moves it out, slice 3).
      TaskResult end;
      end.state = TaskState::kDeadLettered;
      end.reason = DeadReason::kRejected;
      end.error = "refused by node " + opts_.consumer + ": " + refusal.to_string();
      b.ends.emplace_back(whose[k].second, std::move(end));
      ++sh_->batch_unwritten;
      if (++sh_->batch_queued == 1) sh_->ends_cv.notify_all();
    } else {
      // Draining, stopping, full: the batch is let go (claimed again once idle, by this node
      // or another), and this node reads nothing for a while.
      b.let_go = true;
      sh_->paused_until = Clock::now() + std::chrono::seconds(1);
    }
    sh_->drop_if_done(it);
  }
}

void RedisFeeder::give_up_batch_ends() {
  MutexLock lk(sh_->mu);
  std::size_t given_up = 0;
  for (auto& [key, b] : sh_->batches) {
    given_up += b.ends.size();
    b.ends.clear();
  }
  sh_->batch_unwritten -= std::min(sh_->batch_unwritten, given_up);
  sh_->batch_queued = 0;
  if (given_up != 0) {
    sh_->stats.last_error = "redis pool " + opts_.pool + ": " + std::to_string(given_up) +
                            " batch ends given up at shutdown (their batches are claimed later)";
  }
}

Status RedisFeeder::write_batch_ends(Connection& c) {
  struct Taken {
    EntryKey key;
    const HeldBatch* batch;  // stable: a batch being written is not dropped (drop_if_done)
    std::vector<std::pair<std::uint32_t, TaskResult>> ends;
  };
  std::vector<Taken> taken;
  {
    MutexLock lk(sh_->mu);
    for (auto& [key, b] : sh_->batches) {
      if (b.ends.empty() || b.writing != 0) continue;
      b.writing = b.ends.size();
      sh_->batch_queued -= b.ends.size();
      taken.push_back(Taken{key, &b, std::move(b.ends)});
      b.ends.clear();
    }
  }
  if (taken.empty()) return Status::ok();
  const std::int64_t now = wall_ms();
  std::vector<BatchStream::BatchEnds> calls;
  calls.reserve(taken.size());
  for (const Taken& t : taken) {
    const BatchEntry& e = t.batch->entry;
    BatchStream::BatchEnds& call = calls.emplace_back();
    call.entry_id = e.entry_id;
    call.band = e.band;
    call.first = e.first;
    call.n = e.tasks.size();
    call.ends.reserve(t.ends.size());
    for (const auto& [index, r] : t.ends) {
      call.ends.push_back(end_record(index, r, t.batch->claimed, opts_.consumer, now));
    }
  }
  auto answers = batches_.end_many(c, opts_.consumer, calls, now);
  if (!answers) {  // put back in front, in order: tried again (or given up at a stop)
    MutexLock lk(sh_->mu);
    for (Taken& t : taken) {
      HeldBatch& b = sh_->batches.at(t.key);
      sh_->batch_queued += t.ends.size();
      b.ends.insert(b.ends.begin(), std::make_move_iterator(t.ends.begin()),
                    std::make_move_iterator(t.ends.end()));
      b.writing = 0;
    }
    return answers.status();
  }
  std::vector<const BatchEntry*> entries;
  for (const Taken& t : taken) entries.push_back(&t.batch->entry);
  // After their end records: a connection lost between the two loses letters, not ends.
  const Status sent = write_letters(c, calls, *answers, entries);
  MutexLock lk(sh_->mu);
  if (!sent) {
    sh_->stats.last_error = "redis pool " + opts_.pool +
                            ": dead letters of batch tasks not written: " + sent.to_string();
  }
  for (std::size_t k = 0; k < taken.size(); ++k) {
    auto it = sh_->batches.find(taken[k].key);
    HeldBatch& b = it->second;
    const BatchStream::Ended& a = (*answers)[k];
    b.writing = 0;
    sh_->batch_unwritten -= taken[k].ends.size();
    if (a.fenced != Fenced::kDone) {  // claimed by another node: its tasks run there now
      b.fenced = true;
      sh_->stats.fenced += taken[k].ends.size();
    } else {
      const auto w =
          static_cast<std::uint64_t>(std::count(a.written.begin(), a.written.end(), true));
      sh_->stats.finished += w;
      sh_->stats.batch_ends += w;
      sh_->stats.fenced += a.written.size() - w;  // already recorded (a claim raced an end)
      b.acked = b.acked || a.acked;
    }
    sh_->drop_if_done(it);
  }
  sh_->cv.notify_all();  // fewer unwritten ends: the reader may read again
  return Status::ok();
}

Status RedisFeeder::write_letters(Connection& c, const std::vector<BatchStream::BatchEnds>& calls,
                                  const std::vector<BatchStream::Ended>& answers,
                                  const std::vector<const BatchEntry*>& entries) {
  std::size_t letters = 0;
  for (std::size_t k = 0; k < calls.size(); ++k) {
    if (answers[k].fenced != Fenced::kDone) continue;
    for (std::size_t i = 0; i < calls[k].ends.size(); ++i) {
      const batch::EndRecord& rec = calls[k].ends[i];
      if (!answers[k].written[i] || rec.state != to_string(TaskState::kDeadLettered)) continue;
      const StreamTask& t = entries[k]->tasks[rec.index];
      std::vector<std::string> a = {"XADD",
                                    keys_.letters,
                                    "MAXLEN",
                                    "~",
                                    std::to_string(opts_.stream_limits.letters),
                                    "*",
                                    "id",
                                    std::to_string(calls[k].first + rec.index),
                                    "type",
                                    t.type,
                                    "payload",
                                    t.payload};
      if (t.options.priority != 0)
        a.insert(a.end(), {"priority", std::to_string(t.options.priority)});
      if (t.options.timeout) {
        a.insert(a.end(), {"timeout_ms", std::to_string(t.options.timeout->count())});
      }
      if (!t.options.key.empty()) a.insert(a.end(), {"key", t.options.key});
      if (!t.options.tenant.empty()) a.insert(a.end(), {"tenant", t.options.tenant});
      a.insert(a.end(),
               {"reason", rec.reason, "error", rec.error, "dead_lettered_ms",
                std::to_string(rec.finished_ms), "attempts", std::to_string(rec.attempts)});
      SP_RETURN_IF_ERROR(c.append(a));
      ++letters;
    }
  }
  for (std::size_t l = 0; l < letters; ++l) {
    auto r = c.read();
    if (!r) return r.status();
    if (r->is_error()) return r->status();
  }
  return Status::ok();
}

}  // namespace sandpool::redis
