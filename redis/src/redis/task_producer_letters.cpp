// TaskProducer (task_producer.hpp): replay and purge of a pool's dead letters, script `letters`
// (docs/redis-pools.md, "Dead letters: replay and purge").
#include <algorithm>
#include <charconv>
#include <type_traits>
#include <utility>

#include <sandpool/redis/task_producer.hpp>

#include "redis/reply_checks.hpp"
#include "redis/task_stream_scripts.hpp"

namespace sandpool::redis {

Result<TaskProducer::LetterSweep> TaskProducer::replay_letters(Connection& c, const LetterMatch& m,
                                                               std::int64_t now_ms,
                                                               std::int64_t max_timeout_ms,
                                                               std::size_t chunk) const {
  return sweep_letters(c, true, m, now_ms, max_timeout_ms, chunk);
}

Result<TaskProducer::LetterSweep> TaskProducer::purge_letters(Connection& c, const LetterMatch& m,
                                                              std::size_t chunk) const {
  return sweep_letters(c, false, m, 0, 0, chunk);
}

Result<TaskProducer::LetterSweep> TaskProducer::sweep_letters(Connection& c, bool replay,
                                                              const LetterMatch& m,
                                                              std::int64_t now_ms,
                                                              std::int64_t max_timeout_ms,
                                                              std::size_t chunk) const {
  LetterSweep out;
  const bool by_id = m.task_id.has_value();
  std::string from = by_id ? "+" : "-";
  std::string to = by_id ? "-" : "";
  if (!by_id) {
    // Up to the newest letter now: what dies after the sweep began is not swept.
    auto newest = c.command({"XREVRANGE", keys_.letters, "+", "-", "COUNT", "1"});
    if (!newest) return newest.status();  // nothing swept yet
    if (newest->is_error()) return newest->status();
    if (newest->elements.empty()) return out;
    if (newest->elements[0].elements.size() != 2) return unexpected("XREVRANGE", *newest);
    to = newest->elements[0].elements[0].str;
  }
  const auto text = [](const auto& v) {
    if constexpr (std::is_same_v<std::decay_t<decltype(*v)>, std::string>) {
      return v ? *v : std::string();
    } else {
      return v ? std::to_string(*v) : std::string();
    }
  };
  const std::string type = text(m.type), reason = text(m.reason), id = text(m.task_id),
                    from_ms = text(m.from_ms), until_ms = text(m.until_ms);
  lua::Letters a{.letters = keys_.letters,
                 .done = keys_.done,
                 .streams = keys_.streams,
                 .prefix = keys_.prefix,
                 .pool = keys_.pool,
                 .replay = replay,
                 .reverse = by_id,
                 .from = from,
                 .to = to,
                 .count = chunk,
                 .max_matches = by_id ? 1U : 0U,
                 .now_ms = now_ms,
                 .max_timeout_ms = max_timeout_ms,
                 .want_type = type,
                 .want_reason = reason,
                 .want_id = id,
                 .from_ms = from_ms,
                 .until_ms = until_ms};
  while (true) {
    auto r = lua::run(c, a);
    // Stopped part way: what the chunks before did is the answer, with why it stopped.
    if (!r || r->is_error()) {
      out.stopped = r ? r->status() : r.status();
      return out;
    }
    if (r->elements.size() != 4 || r->elements[1].type != Reply::Type::kInteger) {
      out.stopped = unexpected("letters", *r);
      return out;
    }
    out.purged += static_cast<std::uint64_t>(std::max<std::int64_t>(0, r->elements[1].integer));
    for (const Reply& id : r->elements[2].elements) {
      std::uint64_t n = 0;
      if (!parse_number(id.str, &n)) {
        out.stopped = unexpected("letters", *r);
        return out;
      }
      out.replayed.push_back(n);
    }
    const auto& refused = r->elements[3].elements;
    for (std::size_t i = 0; i + 1 < refused.size(); i += 2) {
      if (out.refused++ == 0) out.first_refusal = refused[i + 1].str;
    }
    if (r->elements[0].str.empty()) return out;
    from = r->elements[0].str;
    a.from = from;
  }
}

}  // namespace sandpool::redis
