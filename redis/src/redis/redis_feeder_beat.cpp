// RedisFeeder's beat (redis_feeder.hpp): the node's heartbeat key, the touch of the entries it
// runs, the claim of dead nodes' entries, the move of due tasks, the trim of finished ones, and
// the cancels other nodes asked for.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include <sandpool/redis/redis_feeder.hpp>

#include "redis/redis_feeder_threads.hpp"

namespace sandpool::redis {
namespace {

using feeder::Clock;
using feeder::connect;
using feeder::wall_ms;
constexpr std::size_t kMoveChunk = 1000;  // due tasks moved back per script
// Entries claimed per beat at most: each costs the beat thread a round trip (its lost
// attempt) before its next touch, and a beat late past claim_after lets others claim this
// node's own entries.
constexpr std::size_t kMaxClaimsPerBeat = 256;

}  // namespace

void RedisFeeder::cancel_asked(Connection& c) {
  std::vector<std::uint64_t> ids;
  std::vector<Ticket> tickets;
  {
    MutexLock lk(sh_->mu);
    for (const auto& [entry, h] : sh_->held) {
      if (!h.ticket) continue;  // not running in the local pool (yet, or any more)
      ids.push_back(h.task_id);
      tickets.push_back(*h.ticket);
    }
  }
  if (ids.empty()) return;
  auto asked = consumer_.cancel_asked(c, ids);
  note(asked.status());
  if (!asked) return;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if ((*asked)[i]) (void)tickets[i].cancel();  // its end is written as any other
  }
}

void RedisFeeder::beat_loop() {
  auto stopped = [this] { return stopping(); };
  auto noter = [this](const Status& s) { note(s); };
  std::optional<Connection> c;
  // Claims wait until this node has beaten for claim_after since its start or since a beat
  // that failed or waited over a heartbeat for Redis: a stall of Redis long enough to lapse
  // the keys (three beats) makes every pending entry idle and every key gone at once, and
  // the live nodes set their keys and touch their entries again within a beat of its end,
  // so by then only a dead node's entries are idle and keyless. (The claimant's own stall
  // needs no wait: the other nodes kept their keys.)
  Clock::time_point beating_since{};  // {}: not since a stall
  while (!stopped()) {
    if (!c || c->broken()) {
      c = connect(opts_.endpoint, stopped, noter);
      if (!c) return;
    }
    const auto sent = Clock::now();
    auto beat = TaskUpkeep::beat(*c, opts_.prefix, opts_.consumer, identity_, name_ttl());
    note(beat.status());
    const auto beat_at = Clock::now();
    if (!beat || beat_at - sent > opts_.heartbeat) {
      beating_since = {};
    } else if (beating_since == Clock::time_point{}) {
      beating_since = beat_at;
    }
    if (beat && *beat) {  // thought dead, its name taken: it must not read as that consumer
      MutexLock lk(sh_->mu);
      sh_->stopping = true;
      sh_->stats.last_error = "redis pool " + opts_.pool + ": the node name '" + opts_.consumer +
                              "' was taken by " + **beat + " while this node was away; stopped";
      sh_->wake_all();
      return;
    }
    std::vector<EntryKey> held;
    {
      MutexLock lk(sh_->mu);
      held.reserve(sh_->held.size());
      for (const auto& [key, h] : sh_->held) held.push_back(key);
    }
    if (beat) note(consumer_.touch(*c, opts_.consumer, held).status());
    if (beat && sh_->batch_layout) touch_batches(*c);
    // Only once this node has beaten for claim_after since it started or since a beat that
    // failed or stalled (docs/redis-pools.md). Before the cancels are asked for: a dead
    // node's entries wait no round trip more than they must.
    const bool settled =
        beating_since != Clock::time_point{} && beat_at - beating_since >= opts_.claim_after;
    if (beat && settled) claim_dead_entries(*c);
    if (beat) cancel_asked(*c);
    if (beat) move_due_tasks(*c);
    if (beat) note(upkeep_.trim_finished(*c, wall_ms(), 1000).status());
    MutexLock lk(sh_->mu);
    if (beat) ++sh_->stats.beats;
    const auto until = Clock::now() + opts_.heartbeat;
    while (!sh_->stopping &&
           sh_->beat_cv.wait_until(sh_->mu, until) == std::cv_status::no_timeout) {
    }
  }
}

void RedisFeeder::claim_dead_entries(Connection& c) {
  // A dead node's entries are claimed whether or not a place is free (the reader refills
  // each freed place within a round trip): they wait in the local pool for the tasks that
  // run now, not for the stream's backlog. Up to one capacity beyond what it reads at once.
  std::size_t room = 0;
  std::optional<std::size_t> batch_in_pool;  // the batch layout: what the pool holds
  {
    const std::size_t cap = capacity();
    MutexLock lk(sh_->mu);
    const std::size_t most = sh_->window(cap) + cap;
    if (sh_->reading) room = most - std::min(most, sh_->in_pool());
    if (sh_->reading && sh_->batch_layout) batch_in_pool = sh_->in_pool();
  }
  if (batch_in_pool) claim_dead_batches(c, *batch_in_pool);
  room = std::min(room, kMaxClaimsPerBeat);
  if (room == 0) return;
  auto claimed = consumer_.claim_idle(c, opts_.consumer, opts_.claim_after, room);
  note(claimed.status());
  // Each claimed task's attempts so far (the lost one is counted on from there). Broken
  // off: the entries, claimed but not held, go idle again and are claimed later.
  Status took = claimed ? consumer_.take(c, opts_.consumer, *claimed) : claimed.status();
  if (claimed) note(took);
  if (!took) return;
  // Each task's `lost` attempt, all in one round trip before any runs (one each cost a round
  // trip per claimed task before the next could run: under a backlog, Redis answers each late).
  std::vector<const StreamEntry*> tasks;
  std::vector<std::string> lost;
  for (const StreamEntry& e : *claimed) {
    if (!e.malformed.empty()) continue;  // discarded by run_locally: no attempt
    Attempt a;
    a.number = e.attempts + 1;
    a.outcome = Outcome::kLost;
    a.error = feeder::lost_error(opts_.consumer);
    a.ended_ms = wall_ms();
    tasks.push_back(&e);
    lost.push_back(feeder::encode(a));
  }
  note(consumer_.record_attempts(c, tasks, opts_.consumer, lost).status());
  {
    MutexLock lk(sh_->mu);
    sh_->stats.claimed += claimed->size();
  }
  run_locally(c, std::move(claimed).value(), true);
}

void RedisFeeder::move_due_tasks(Connection& c) {
  // Every task due (a backoff over, a scheduled time come), in chunks (Redis runs other
  // scripts between them), so none is more than a beat late however many fall due at once;
  // for half a heartbeat at most, so the next beat (the heartbeat key, the touch of the
  // entries held) is never late for it: what is left moves at the next beat.
  const auto move_until = Clock::now() + opts_.heartbeat / 2;
  for (Result<std::size_t> moved = kMoveChunk;
       moved && *moved == kMoveChunk && !stopping() && Clock::now() < move_until;) {
    moved = upkeep_.move_due(c, wall_ms(), kMoveChunk);
    note(moved.status());
  }
}

}  // namespace sandpool::redis
