// The scripts of a Redis pool (task_stream_scripts.hpp): their embedded text, and their
// arguments laid out as each script's first lines name them.
#include "redis/task_stream_scripts.hpp"

#include <algorithm>
#include <charconv>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <optional>
#include <utility>

#include "redis/lua_text.hpp"  // generated from lua/*.lua (redis/embed_lua.cmake)

namespace sandpool::redis::lua {
namespace {

// A script as Redis runs it: the group's name, lib.lua's helpers, then its own text.
Script script(std::string name, std::string_view own) {
  std::string source = "local GROUP = '";
  source.append(PoolKeys::kGroup).append("'\n").append(text::lib).append("\n").append(own);
  return Script{std::move(name), std::move(source)};
}

// KEYS and ARGV appended in the order a script names them.
class Layout {
 public:
  Layout& key(std::string_view k) {
    call_.keys.emplace_back(k);
    return *this;
  }
  Layout& keys(const std::string* streams) {  // the three bands' streams
    call_.keys.insert(call_.keys.end(), streams, streams + 3);
    return *this;
  }
  Layout& arg(std::string_view a) {
    call_.args.emplace_back(a);
    return *this;
  }
  Layout& arg(std::int64_t n) { return arg(std::to_string(n)); }
  Layout& arg(std::uint64_t n) { return arg(std::to_string(n)); }
  Layout& arg(std::uint32_t n) { return arg(std::to_string(n)); }
  Layout& arg(double x) { return arg(std::to_string(x)); }
  Layout& args(const std::vector<std::string>* more) {
    if (more) call_.args.insert(call_.args.end(), more->begin(), more->end());
    return *this;
  }
  Connection::Call done() { return std::move(call_); }

 private:
  Connection::Call call_;
};

std::int64_t band_arg(Band b) { return static_cast<std::int64_t>(b); }

// A stream entry id, "ms-seq", as its two numbers: nullopt when it is not one.
std::optional<std::pair<std::uint64_t, std::uint64_t>> entry_number(std::string_view id) {
  const auto dash = id.find('-');
  if (dash == std::string_view::npos) return std::nullopt;
  std::pair<std::uint64_t, std::uint64_t> n;
  const char* end = id.data() + id.size();
  const auto ms = std::from_chars(id.data(), id.data() + dash, n.first);
  const auto seq = std::from_chars(id.data() + dash + 1, end, n.second);
  if (ms.ec != std::errc() || ms.ptr != id.data() + dash || dash == 0) return std::nullopt;
  if (seq.ec != std::errc() || seq.ptr != end || dash + 1 == id.size()) return std::nullopt;
  return n;
}

// The fence ranges of finish_batch.lua and take.lua: per band (q:1, q:0, q:-1), the lowest and
// the highest entry id of the `count` entries `at(i)` names (its band and entry id); '' and ''
// when none, '-' and '+' when an id there is not one.
template <typename At>
void fence_ranges(std::size_t count, At at, Layout& l) {
  struct Range {
    std::string_view lo, hi;
    std::pair<std::uint64_t, std::uint64_t> lo_n{}, hi_n{};
    bool any = false;
    bool whole = false;  // an id that is not one: the band's whole range
  };
  Range r[3];
  for (std::size_t i = 0; i < count; ++i) {
    const auto [band_of_entry, id] = at(i);
    const auto b = std::find(std::begin(kBands), std::end(kBands), band_of_entry);
    if (b == std::end(kBands)) continue;  // not a band: the script fences it
    Range& band = r[b - std::begin(kBands)];
    const auto n = entry_number(id);
    if (!n) band.whole = true;
    if (band.whole) continue;
    if (!band.any || *n < band.lo_n) band.lo = id, band.lo_n = *n;
    if (!band.any || *n > band.hi_n) band.hi = id, band.hi_n = *n;
    band.any = true;
  }
  for (const Range& band : r) {
    if (band.whole) {
      l.arg(std::string_view("-")).arg(std::string_view("+"));
    } else {
      l.arg(band.lo).arg(band.hi);  // both empty when none
    }
  }
}

}  // namespace

Script with_lib(std::string name, std::string_view own) { return script(std::move(name), own); }

const Script Submit::kScript = script("submit", text::submit);
const Script SubmitBatch::kScript = script("submit_batch", text::submit_batch);
const Script ClaimSlot::kScript = script("claim_slot", text::claim_slot);
const Script Attempt::kScript = script("attempt", text::attempt);
const Script FinishBatch::kScript = script("finish_batch", text::finish_batch);
const Script TrimFinished::kScript = script("trim_finished", text::trim_finished);
const Script AwaitEnd::kScript = script("await_end", text::await_end);
const Script Beat::kScript = script("beat", text::beat);
const Script Discard::kScript = script("discard", text::discard);
const Script Release::kScript = script("release", text::release);
const Script Refused::kScript = script("refused", text::refused);
const Script Cancel::kScript = script("cancel", text::cancel);
const Script Touch::kScript = script("touch", text::touch);
const Script Retry::kScript = script("retry", text::retry);
const Script MoveDue::kScript = script("move_due", text::move_due);
const Script Take::kScript = script("take", text::take);
const Script ClaimIdle::kScript = script("claim_idle", text::claim_idle);
const Script TakeTokens::kScript = script("take_tokens", text::take_tokens);
const Script Throttle::kScript = script("throttle", text::throttle);
const Script Letters::kScript = script("letters", text::letters);

Connection::Call Submit::call() const {
  return Layout()
      .key(ids)
      .key(stream)
      .key(idem)
      .key(later)
      .arg(prefix)
      .arg(pool)
      .arg(now_ms)
      .arg(task_type)
      .arg(not_before_ms)
      .arg(band_arg(band))
      .args(&fields)
      .done();
}

Connection::Call SubmitBatch::call() const {
  Layout l;
  l.key(ids).key(later).keys(streams);
  // The tasks as runs (submit_batch.lua): consecutive compact ones (no idempotency key, one
  // payload field) whose type, not_before, band and fields but the payload's value are the
  // same send those once and then each its payload; any other on its own, its key a KEY.
  const auto payload_at = [](const Submit& t) -> std::size_t {  // 0 when none
    if (!t.idem.empty()) return 0;
    std::size_t at = 0;
    for (std::size_t f = 0; f + 1 < t.fields.size(); f += 2) {
      if (t.fields[f] != "payload") continue;
      if (at != 0) return 0;
      at = f + 1;
    }
    return at;
  };
  const auto same_run = [](const Submit& a, const Submit& b, std::size_t slot) {
    if (a.task_type != b.task_type || a.not_before_ms != b.not_before_ms || a.band != b.band ||
        a.fields.size() != b.fields.size()) {
      return false;
    }
    for (std::size_t f = 0; f < a.fields.size(); ++f) {
      if (f != slot && a.fields[f] != b.fields[f]) return false;
    }
    return true;
  };
  for (std::size_t i = 0; i < count; ++i) {
    if (payload_at(tasks[i]) == 0) l.key(tasks[i].idem);
  }
  l.arg(prefix).arg(pool).arg(now_ms);
  for (std::size_t i = 0; i < count;) {
    const Submit& t = tasks[i];
    const std::size_t slot = payload_at(t);
    if (slot == 0) {
      l.arg(std::string_view("f"))
          .arg(t.task_type)
          .arg(t.not_before_ms)
          .arg(band_arg(t.band))
          .arg(static_cast<std::uint64_t>(t.fields.size()))
          .args(&t.fields);
      ++i;
      continue;
    }
    std::size_t run = i + 1;
    while (run < count && payload_at(tasks[run]) == slot && same_run(t, tasks[run], slot)) ++run;
    l.arg(std::string_view("c"))
        .arg(static_cast<std::uint64_t>(run - i))
        .arg(t.task_type)
        .arg(t.not_before_ms)
        .arg(band_arg(t.band))
        .arg(static_cast<std::uint64_t>(slot + 1))  // Lua counts from 1
        .arg(static_cast<std::uint64_t>(t.fields.size()));
    // The payload's slot sent empty: each task's payload follows (not the first's twice).
    for (std::size_t f = 0; f < t.fields.size(); ++f) {
      l.arg(f == slot ? std::string_view() : std::string_view(t.fields[f]));
    }
    for (; i < run; ++i) l.arg(tasks[i].fields[slot]);
  }
  return l.done();
}

Connection::Call ClaimSlot::call() const {
  return Layout()
      .key(task.ids)
      .key(task.stream)
      .key(task.idem)
      .key(task.later)
      .key(claim)
      .arg(task.prefix)
      .arg(task.pool)
      .arg(task.now_ms)
      .arg(task.task_type)
      .arg(task.not_before_ms)
      .arg(band_arg(task.band))
      .arg(slot_s)
      .arg(node)
      .arg(max_lead_s)
      .args(&task.fields)
      .done();
}

Connection::Call Attempt::call() const {
  return Layout().key(stream).arg(entry).arg(consumer).arg(task_id).arg(prefix).arg(attempt).done();
}

Connection::Call FinishBatch::call() const {
  Layout l;
  l.key(done).key(letters).keys(streams);
  l.arg(consumer).arg(prefix).arg(keep_finished).arg(keep_letters);
  fence_ranges(
      count,
      [this](std::size_t i) {
        return std::pair<Band, std::string_view>(ends[i].entry->band, ends[i].entry->entry_id);
      },
      l);
  // The ends as runs (finish_batch.lua): consecutive compact ends that share their band, state
  // and attempt number in one run, that shared once; any other end on its own.
  const auto compact = [](const TaskConsumer::EndWrite& e) {
    return e.attempts_before && e.attempts.size() == 1 && e.error.empty() && e.reason.empty() &&
           e.state != "dead_lettered" &&
           std::find(std::begin(kBands), std::end(kBands), e.entry->band) != std::end(kBands);
  };
  for (std::size_t i = 0; i < count;) {
    const TaskConsumer::EndWrite& e = ends[i];
    if (!compact(e)) {
      l.arg(std::string_view("f"))
          .arg(e.entry->task_id)
          .arg(e.entry->entry_id)
          .arg(band_arg(e.entry->band))
          .arg(e.state)
          .arg(e.result)
          .arg(e.error)
          .arg(e.reason)
          .arg(e.now_ms)
          .arg(e.attempts_before ? std::to_string(*e.attempts_before) : std::string())
          .arg(static_cast<std::uint64_t>(e.attempts.size()))
          .args(&e.attempts);
      ++i;
      continue;
    }
    std::size_t run = i + 1;
    while (run < count && compact(ends[run]) && ends[run].entry->band == e.entry->band &&
           ends[run].state == e.state && ends[run].attempts_before == e.attempts_before) {
      ++run;
    }
    l.arg(std::string_view("c"))
        .arg(static_cast<std::uint64_t>(run - i))
        .arg(band_arg(e.entry->band))
        .arg(e.state)
        .arg(static_cast<std::uint64_t>(*e.attempts_before) + 1);
    for (; i < run; ++i) {
      const TaskConsumer::EndWrite& one = ends[i];
      l.arg(one.entry->task_id)
          .arg(one.entry->entry_id)
          .arg(one.result)
          .arg(one.now_ms)
          .arg(one.attempts.front());
    }
  }
  return l.done();
}

Connection::Call TrimFinished::call() const {
  return Layout()
      .key(done)
      .key(done_bytes)
      .arg(prefix)
      .arg(oldest_kept_ms)
      .arg(max_bytes)
      .arg(max_evicted)
      .done();
}

Connection::Call AwaitEnd::call() const { return Layout().arg(prefix).arg(task_id).done(); }

Connection::Call Beat::call() const {
  return Layout().key(node_key).arg(identity).arg(ttl_ms).done();
}

Connection::Call Discard::call() const {
  return Layout().key(stream).arg(entry).arg(consumer).done();
}

Connection::Call Release::call() const {
  return Layout()
      .key(stream)
      .key(done)
      .arg(entry)
      .arg(consumer)
      .arg(task_id)
      .arg(prefix)
      .arg(now_ms)
      .done();
}

Connection::Call Refused::call() const {
  return Layout()
      .key(stream)
      .key(later)
      .keys(streams)
      .arg(entry)
      .arg(consumer)
      .arg(task_id)
      .arg(prefix)
      .arg(node_prefix)
      .arg(now_ms)
      .arg(pause_ms)
      .arg(at_least)
      .done();
}

Connection::Call Cancel::call() const {
  return Layout().key(later).key(done).keys(streams).arg(prefix).arg(task_id).arg(now_ms).done();
}

Connection::Call Touch::call() const {
  Layout l;
  l.key(stream).arg(consumer);
  for (const std::string_view e : entries) l.arg(e);
  return l.done();
}

Connection::Call Retry::call() const {
  return Layout()
      .key(stream)
      .key(later)
      .arg(entry)
      .arg(consumer)
      .arg(task_id)
      .arg(prefix)
      .arg(retries)
      .arg(now_ms)
      .arg(base_ms)
      .arg(multiplier)
      .arg(max_ms)
      .arg(jitter)
      .args(attempts)
      .done();
}

Connection::Call MoveDue::call() const {
  return Layout()
      .key(later)
      .keys(streams)
      .key(done)
      .arg(prefix)
      .arg(now_ms)
      .arg(static_cast<std::uint64_t>(max))
      .done();
}

Connection::Call Take::call() const {
  Layout l;
  l.keys(streams).arg(prefix).arg(pool).arg(consumer);
  fence_ranges(
      entries.size(),
      [this](std::size_t i) {
        return std::pair<Band, std::string_view>(entries[i].band, entries[i].entry);
      },
      l);
  for (const auto& ids : back) l.arg(static_cast<std::uint64_t>(ids.size()));
  for (const auto& ids : back) {
    if (ids.empty()) continue;
    // The id just below the band's first one handed back: the group's last delivered id
    // again, when nobody read past them ('' when the id is not one: they are added again).
    const auto n = entry_number(ids.front());
    if (!n) {
      l.arg(std::string_view());
    } else if (n->second > 0) {
      l.arg(std::to_string(n->first) + "-" + std::to_string(n->second - 1));
    } else if (n->first > 0) {
      l.arg(std::to_string(n->first - 1) + "-" +
            std::to_string(std::numeric_limits<std::uint64_t>::max()));
    } else {
      l.arg(std::string_view());
    }
    for (const std::string_view id : ids) l.arg(id);
  }
  // The entries as runs (take.lua) of consecutive ones sharing band and type, those sent once.
  for (std::size_t i = 0; i < entries.size();) {
    std::size_t run = i + 1;
    while (run < entries.size() && entries[run].band == entries[i].band &&
           entries[run].task_type == entries[i].task_type) {
      ++run;
    }
    l.arg(static_cast<std::uint64_t>(run - i))
        .arg(band_arg(entries[i].band))
        .arg(entries[i].task_type);
    for (; i < run; ++i) l.arg(entries[i].task_id).arg(entries[i].entry);
  }
  return l.done();
}

Connection::Call ClaimIdle::call() const {
  return Layout()
      .key(stream)
      .arg(consumer)
      .arg(min_idle_ms)
      .arg(static_cast<std::uint64_t>(max))
      .arg(node_prefix)
      .arg(start)
      .arg(static_cast<std::uint64_t>(page))
      .done();
}

Connection::Call TakeTokens::call() const {
  Layout l;
  const std::size_t n = buckets ? buckets->size() : 0;
  if (buckets) {
    for (const TaskUpkeep::Bucket& b : *buckets) l.key(b.key);
  }
  if (cap) l.key(cap->key);
  if (fence) l.key(fence->stream);
  l.arg(static_cast<std::uint64_t>(n))
      .arg(cap ? "1" : "0")
      .arg(fence ? fence->entry : "")
      .arg(fence ? fence->consumer : "");
  if (buckets) {  // each at least 1: the script divides by them
    for (const TaskUpkeep::Bucket& b : *buckets) {
      l.arg(std::max<std::uint32_t>(1, b.tasks))
          .arg(std::max<std::int64_t>(1, b.per_ms))
          .arg(std::max<std::uint32_t>(1, b.burst));
    }
  }
  if (cap) l.arg(std::max<std::uint32_t>(1, cap->max)).arg(cap->task_id).arg(cap->prefix);
  return l.done();
}

Connection::Call Throttle::call() const {
  return Layout()
      .key(stream)
      .key(later)
      .key(bucket)
      .arg(entry)
      .arg(consumer)
      .arg(task_id)
      .arg(prefix)
      .arg(now_ms)
      .arg(wait_ms)
      .arg(interval_ms)
      .done();
}

Connection::Call Letters::call() const {
  return Layout()
      .key(letters)
      .key(done)
      .keys(streams)
      .arg(prefix)
      .arg(pool)
      .arg(replay ? "replay" : "purge")
      .arg(reverse ? "rev" : "fwd")
      .arg(from)
      .arg(to)
      .arg(static_cast<std::uint64_t>(std::max<std::size_t>(1, count)))
      .arg(static_cast<std::uint64_t>(max_matches))
      .arg(now_ms)
      .arg(max_timeout_ms)
      .arg(want_type)
      .arg(want_reason)
      .arg(want_id)
      .arg(from_ms)
      .arg(until_ms)
      .done();
}

}  // namespace sandpool::redis::lua
