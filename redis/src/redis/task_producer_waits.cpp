// TaskProducer's waits on tasks' ends (task_producer.hpp, await_end, await_any): the
// registration script (await_end.lua) and a BLPOP on the tasks' end lists, pipelined (with
// one task awaited, its hash read behind the BLPOP).
#include <cstdio>
#include <iterator>
#include <optional>
#include <utility>

#include <sandpool/redis/task_producer.hpp>
#include "redis/reply_checks.hpp"
#include "redis/task_stream_scripts.hpp"

namespace sandpool::redis {
namespace {

// A BLPOP's timeout in seconds, as Redis reads it ("0.250").
std::string blpop_seconds(std::chrono::milliseconds block) {
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.3f", static_cast<double>(block.count()) / 1000.0);
  return seconds;
}

// Queues the registration of a wait on task `id` (await_end.lua) with the script `sha`.
Status append_registration(Connection& c, const std::string& sha, const std::string& prefix,
                           std::uint64_t id) {
  Connection::Call call = lua::AwaitEnd{.prefix = prefix, .task_id = id}.call();
  std::vector<std::string> argv = {"EVALSHA", sha, "0"};
  std::move(call.args.begin(), call.args.end(), std::back_inserter(argv));
  return c.append(argv);
}

// A registration's answer: true iff Redis knows the task.
Result<bool> registered(const Result<Reply>& r) {
  if (!r) return r.status();
  if (r->is_error()) return r->status();
  if (r->type != Reply::Type::kInteger) return unexpected("await_end", *r);
  return r->integer != 0;
}

}  // namespace

Result<std::optional<std::string>> TaskProducer::await_end(Connection& c, std::uint64_t id,
                                                           std::chrono::milliseconds block) const {
  if (block.count() <= 0) return Status::invalid("await_end: a wait above 0 ms");
  auto sha = c.load(lua::AwaitEnd::kScript);
  if (!sha) return sha.status();
  SP_RETURN_IF_ERROR(append_registration(c, *sha, keys_.prefix, id));
  SP_RETURN_IF_ERROR(
      c.append({"BLPOP", keys_.prefix + "end:" + std::to_string(id), blpop_seconds(block)}));
  auto known = c.read();
  auto popped = c.read();  // at once when the task has ended, or is unknown: nothing pushed
  if (!popped) return popped.status();
  auto is_known = registered(known);
  if (!is_known) return is_known.status();
  if (!*is_known) {
    return Status::error(Code::kNotFound, "task " + std::to_string(id) + " is not in redis");
  }
  if (popped->is_error()) return popped->status();
  if (popped->is_nil()) return std::optional<std::string>();  // not ended within `block`
  if (popped->elements.size() != 2) return unexpected("BLPOP", *popped);
  return std::optional<std::string>(popped->elements[1].str);
}

Result<TaskProducer::AwaitRound> TaskProducer::await_any(Connection& c,
                                                         const std::vector<std::uint64_t>& fresh,
                                                         const std::vector<std::uint64_t>& awaited,
                                                         const std::string& wake,
                                                         std::chrono::milliseconds block) const {
  if (block.count() <= 0) return Status::invalid("await_any: a wait above 0 ms");
  AwaitRound out;
  std::string sha;
  if (!fresh.empty()) {
    auto loaded = c.load(lua::AwaitEnd::kScript);
    if (!loaded) return loaded.status();
    sha = std::move(*loaded);
  }
  for (const std::uint64_t id : fresh) {
    SP_RETURN_IF_ERROR(append_registration(c, sha, keys_.prefix, id));
  }
  const std::string end_prefix = keys_.prefix + "end:";
  std::vector<std::string> blpop = {"BLPOP"};
  blpop.reserve(awaited.size() + 3);
  for (const std::uint64_t id : awaited) blpop.push_back(end_prefix + std::to_string(id));
  if (!wake.empty()) blpop.push_back(wake);
  blpop.push_back(blpop_seconds(block));
  SP_RETURN_IF_ERROR(c.append(blpop));
  // One task awaited: its hash is read behind the BLPOP (Redis runs the reads once the BLPOP
  // is answered), so that its account comes with its end, not one round trip later.
  const bool read_account = awaited.size() == 1;
  if (read_account) SP_RETURN_IF_ERROR(append_task_reads(c, awaited.front()));
  Status failed = Status::ok();  // every reply is read, so that the pipeline stays in step
  for (const std::uint64_t id : fresh) {
    auto known = registered(c.read());
    if (!known && failed) failed = known.status();
    if (known && !*known) out.unknown.push_back(id);
  }
  auto popped = c.read();
  std::optional<Result<StoredTask>> account;
  if (read_account && popped) account = read_task(c, awaited.front());
  SP_RETURN_IF_ERROR(failed);
  if (!popped) return popped.status();
  // A failed read of the account: the caller reads it again (unless the connection broke).
  if (account && !*account && c.broken()) return account->status();
  if (popped->is_error()) return popped->status();
  if (popped->is_nil()) return out;  // nothing within `block`
  if (popped->elements.size() != 2) return unexpected("BLPOP", *popped);
  const std::string& key = popped->elements[0].str;
  if (key == wake) {
    out.woken = true;
    return out;
  }
  if (key.rfind(end_prefix, 0) != 0 || !parse_number(key.substr(end_prefix.size()), &out.ended) ||
      out.ended == 0) {
    return unexpected("BLPOP", *popped);
  }
  out.state = popped->elements[1].str;
  if (account && *account && out.ended == awaited.front()) out.account = std::move(**account);
  return out;
}

}  // namespace sandpool::redis
