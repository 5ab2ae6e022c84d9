// The batch-entry layout's Lua scripts (lua/batch_*.lua, docs/redis-batch-layout.md): each
// struct is one script's arguments, its fields in the order the script's first lines name
// them; call() lays them out (as task_stream_scripts.hpp's do for the per-task layout).
//
// A struct's string_view fields view the caller's strings: build it, call(), and drop it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <sandpool/redis/batch_layout.hpp>
#include <sandpool/redis/pool_keys.hpp>
#include <sandpool/redis/redis_client.hpp>

namespace sandpool::redis::lua {

// batch_submit.lua: one batch of one band as one entry, its ids by one INCRBY.
struct BatchSubmit {
  static const Script kScript;
  std::string_view ids{}, stream{}, index{};  // KEYS
  std::string_view prefix{}, pool{};
  Band band = 0;
  std::int64_t now_ms = 0;
  std::size_t count = 0;
  std::string_view tasks{};  // batch::pack_tasks
  Connection::Call call() const;
};

// batch_take.lua (fenced per entry): batch entries read or claimed, taken.
struct BatchTake {
  static const Script kScript;
  struct Entry {
    Band band = 0;
    std::string_view entry{};
    std::uint64_t first = 0;
  };
  const std::string* streams = nullptr;  // the bands' b:1, b:0, b:-1 (kBands)
  std::string_view prefix{}, pool{}, consumer{};
  std::vector<Entry> entries{};
  Connection::Call call() const;
};

// batch_end.lua (fenced once): end records appended to one batch.
struct BatchEnd {
  static const Script kScript;
  std::string_view stream{};
  std::string batch{}, ends{};  // KEYS: the batch's hash and ends string
  std::string_view done{};
  std::string_view consumer{}, entry{};
  std::uint64_t first = 0;
  std::int64_t now_ms = 0;
  std::string_view records{};  // batch::pack_end's, concatenated
  Connection::Call call() const;
};

// batch_lookup.lua: a task found through the batch index.
struct BatchLookup {
  static const Script kScript;
  std::string_view index{};
  std::string_view prefix{};
  std::uint64_t task_id = 0;
  Connection::Call call() const;
};

}  // namespace sandpool::redis::lua
