// A pool whose backend changed from local to `redis` at a restart: its unfinished journaled
// tasks go to the pool's Redis stream (docs/journal.md, "Every path that moves a task").
#pragma once

#include <spdlog/logger.h>

#include <sandpool/base/status.hpp>
#include <sandpool/config/config.hpp>
#include <sandpool/store/task_journal.hpp>

#include <sandpool/service/redis_pools.hpp>

namespace sandpool::poold {

// For every pool of `config` with the Redis backend: submits each unfinished task the journal
// holds for it to the pool's stream (its type, payload and options) under an idempotency key
// (its own, else `sandpool-journal-<id>`), then ends it in the journal (cancelled, reason
// shutdown, the error naming the pool and the cluster task id) and waits for those ends to be
// committed. A crash between the two submits it again at the next start under the same key,
// which Redis answers with the task it holds: each task reaches the stream once. A task Redis
// refuses stays open in the journal for the next start (logged). Returns the journal's errors
// (its reads; a flush that does not finish); ok when there is nothing to hand over.
// Runs on the thread that starts the service, after the pools were attached to Redis.
Status hand_over_to_redis(TaskJournal& journal, RedisPools& redis, const Config& config,
                          spdlog::logger& log);

}  // namespace sandpool::poold
