// TaskProducer's waiter on a task's end (task_producer.hpp, await_end): the registration script
// and a BLPOP on the task's end list, pipelined.
#include <cstdio>
#include <iterator>

#include <sandpool/redis/task_producer.hpp>
#include "redis/reply_checks.hpp"
#include "redis/task_stream_scripts.hpp"

namespace sandpool::redis {

Result<std::optional<std::string>> TaskProducer::await_end(Connection& c, std::uint64_t id,
                                                           std::chrono::milliseconds block) const {
  if (block.count() <= 0) return Status::invalid("await_end: a wait above 0 ms");
  auto sha = c.load(lua::AwaitEnd::kScript);
  if (!sha) return sha.status();
  Connection::Call call = lua::AwaitEnd{.prefix = keys_.prefix, .task_id = id}.call();
  std::vector<std::string> argv = {"EVALSHA", *sha, "0"};
  std::move(call.args.begin(), call.args.end(), std::back_inserter(argv));
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.3f", static_cast<double>(block.count()) / 1000.0);
  SP_RETURN_IF_ERROR(c.append(argv));
  SP_RETURN_IF_ERROR(c.append({"BLPOP", keys_.prefix + "end:" + std::to_string(id), seconds}));
  auto known = c.read();
  if (!known) return known.status();
  auto popped = c.read();  // at once when the task has ended, or is unknown: nothing pushed
  if (!popped) return popped.status();
  if (known->is_error()) return known->status();
  if (known->type != Reply::Type::kInteger) return unexpected("await_end", *known);
  if (known->integer == 0) {
    return Status::error(Code::kNotFound, "task " + std::to_string(id) + " is not in redis");
  }
  if (popped->is_error()) return popped->status();
  if (popped->is_nil()) return std::optional<std::string>();  // not ended within `block`
  if (popped->elements.size() != 2) return unexpected("BLPOP", *popped);
  return std::optional<std::string>(popped->elements[1].str);
}

}  // namespace sandpool::redis
