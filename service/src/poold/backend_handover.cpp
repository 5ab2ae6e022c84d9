// hand_over_to_redis (backend_handover.hpp): a local pool turned into a Redis pool at a restart
// hands its journaled tasks to the stream, each once.
#include "poold/backend_handover.hpp"

#include <chrono>

#include <sandpool/base/wall_clock.hpp>

namespace sandpool::poold {
namespace {

// The stream entry of a journaled task: its type, payload and options, under an idempotency
// key that names it again after a crash.
redis::StreamTask stream_task_of(const JournalTask& t) {
  redis::StreamTask s;
  s.type = t.task.type;
  s.payload = t.payload;
  s.options = t.options;  // the entry writes the options it carries
  if (s.options.idempotency_key.empty()) {
    s.options.idempotency_key = "sandpool-journal-" + std::to_string(t.task.id);
  }
  return s;
}

}  // namespace

Status hand_over_to_redis(TaskJournal& journal, RedisPools& redis, const Config& config,
                          spdlog::logger& log) {
  bool any = false;
  for (const PoolConfig& pc : config.pools) {
    if (pc.backend != PoolConfig::Backend::kRedis) continue;
    auto open = journal.unfinished(pc.name);
    if (!open) return open.status();
    std::size_t handed = 0, there = 0, kept = 0;
    for (const JournalTask& t : *open) {
      auto id = redis.submit(pc.name, stream_task_of(t));
      if (!id) {
        ++kept;
        log.error("task {} of pool {}: not handed to its Redis stream, kept in the journal: {}",
                  t.task.id, pc.name, id.status().to_string());
        continue;
      }
      if (id->existing) {  // an earlier start handed it over and stopped before the journal said so
        ++there;
        log.warn(
            "task {} of pool {}: in its Redis stream already as task {} (handed over by an "
            "earlier start): not handed again",
            t.task.id, pc.name, id->id);
      }
      TaskResult end = t.task;
      if (t.running) {  // its journaled start: that attempt ended with the last run
        Attempt lost = *t.running;
        lost.outcome = Outcome::kLost;
        lost.error = "poold restarted";
        lost.ended_ms = wall_clock_ms();
        end.history.push_back(std::move(lost));
      }
      end.state = TaskState::kCancelled;
      end.cancel_reason = CancelReason::kShutdown;
      end.error = "handed to the Redis stream of pool '" + pc.name + "' as task " +
                  std::to_string(id->id) + (id->existing ? " by an earlier start" : "") +
                  " (the pool's backend changed to redis)";
      journal.finish(std::move(end), {});
      if (!id->existing) ++handed;
      any = true;
    }
    if (handed + there + kept > 0) {
      log.warn(
          "pool {}: its backend is redis now: handed {} unfinished journaled tasks to its "
          "stream, {} there already (an earlier start's hand-over), {} kept in the journal for "
          "the next start",
          pc.name, handed, there, kept);
    }
  }
  if (!any) return Status::ok();
  return journal.flush(std::chrono::seconds(30));
}

}  // namespace sandpool::poold
