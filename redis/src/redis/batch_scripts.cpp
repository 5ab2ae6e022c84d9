// The batch-entry layout's scripts (batch_scripts.hpp): their embedded text, their arguments
// laid out as each script names them.
#include "redis/batch_scripts.hpp"

#include "redis/lua_text.hpp"  // generated from lua/*.lua (redis/embed_lua.cmake)
#include "redis/task_stream_scripts.hpp"

namespace sandpool::redis::lua {

const Script BatchSubmit::kScript = with_lib("batch_submit", text::batch_submit);
const Script BatchTake::kScript = with_lib("batch_take", text::batch_take);
const Script BatchEnd::kScript = with_lib("batch_end", text::batch_end);
const Script BatchLookup::kScript = with_lib("batch_lookup", text::batch_lookup);

Connection::Call BatchSubmit::call() const {
  Connection::Call c;
  c.keys = {std::string(ids), std::string(stream), std::string(index)};
  c.args = {std::string(prefix),    std::string(pool),     std::to_string(band),
            std::to_string(now_ms), std::to_string(count), std::string(tasks)};
  return c;
}

Connection::Call BatchTake::call() const {
  Connection::Call c;
  c.keys.assign(streams, streams + 3);
  c.args = {std::string(prefix), std::string(pool), std::string(consumer)};
  c.args.reserve(3 + 3 * entries.size());
  for (const Entry& e : entries) {
    c.args.push_back(std::to_string(e.band));
    c.args.emplace_back(e.entry);
    c.args.push_back(std::to_string(e.first));
  }
  return c;
}

Connection::Call BatchEnd::call() const {
  Connection::Call c;
  c.keys = {std::string(stream), batch, ends, std::string(done)};
  c.args = {std::string(consumer), std::string(entry), std::to_string(first),
            std::to_string(now_ms), std::string(records)};
  return c;
}

Connection::Call BatchLookup::call() const {
  Connection::Call c;
  c.keys = {std::string(index)};
  c.args = {std::string(prefix), std::to_string(task_id)};
  return c;
}

}  // namespace sandpool::redis::lua
