// TaskProducer's batch submit (task_producer.hpp, submit_many): one submit_batch script per
// lua::SubmitBatch::kMaxTasks tasks, pipelined in one round trip.
#include <algorithm>
#include <iterator>
#include <utility>

#include <sandpool/redis/task_producer.hpp>
#include "redis/reply_checks.hpp"
#include "redis/task_stream_scripts.hpp"

namespace sandpool::redis {
namespace {

// Appends the answers of one submit_batch call of `n` tasks to `out`: each task's id (and
// whether its key matched), or why the call failed for all of them. A new task answers its
// id, an integer; one whose key named a task answers as submit.lua does ({id, 0}).
void append_answers(const Reply& r, std::size_t n,
                    std::vector<Result<TaskProducer::Submitted>>* out) {
  if (r.is_error() || r.elements.size() != n) {
    const Status why = r.is_error() ? r.status() : unexpected("submit_batch", r);
    out->insert(out->end(), n, Result<TaskProducer::Submitted>(why));
    return;
  }
  for (const Reply& one : r.elements) {
    if (one.type == Reply::Type::kInteger) {
      if (one.integer <= 0) {
        out->push_back(unexpected("submit_batch", one));
        continue;
      }
      out->push_back(TaskProducer::Submitted{static_cast<std::uint64_t>(one.integer), false});
    } else {
      out->push_back(submitted(one));
    }
  }
}

}  // namespace

Result<std::vector<Result<TaskProducer::Submitted>>> TaskProducer::submit_many(
    Connection& c, const std::vector<StreamTask>& tasks, std::int64_t now_ms) const {
  std::vector<Result<TaskProducer::Submitted>> out;
  if (tasks.empty()) return out;
  std::vector<lua::Submit> each;
  each.reserve(tasks.size());
  for (const StreamTask& t : tasks) each.push_back(submit_args(t, now_ms));
  // The calls: [starts[k], starts[k + 1]) each, at most kMaxTasks tasks and, past its first,
  // kMaxBytes of payloads (Redis holds a command whole in its query buffer).
  std::vector<std::size_t> starts = {0};
  std::size_t bytes = 0;
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    bytes += tasks[i].payload.size();
    if (i > starts.back() &&
        (i - starts.back() == lua::SubmitBatch::kMaxTasks || bytes > lua::SubmitBatch::kMaxBytes)) {
      starts.push_back(i);
      bytes = tasks[i].payload.size();
    }
  }
  starts.push_back(tasks.size());
  const std::size_t calls = starts.size() - 1;
  const std::string ids = keys_.ids;
  const auto batch = [&](std::size_t k) {
    return lua::SubmitBatch{.ids = ids,
                            .later = keys_.later,
                            .streams = keys_.streams,
                            .prefix = keys_.prefix,
                            .pool = keys_.pool,
                            .now_ms = now_ms,
                            .tasks = each.data() + starts[k],
                            .count = starts[k + 1] - starts[k]};
  };
  // Not eval_many(): the replies read before a break are ids the submitter must get, and
  // the tasks whose replies were lost are unknown, not refused.
  auto sha = c.load(lua::SubmitBatch::kScript);
  if (!sha) return sha.status();  // nothing sent
  for (std::size_t k = 0; k < calls; ++k) {
    Connection::Call call = batch(k).call();
    std::vector<std::string> argv = {"EVALSHA", *sha, std::to_string(call.keys.size())};
    argv.reserve(3 + call.keys.size() + call.args.size());
    std::move(call.keys.begin(), call.keys.end(), std::back_inserter(argv));
    std::move(call.args.begin(), call.args.end(), std::back_inserter(argv));
    if (Status s = c.append(argv); !s) return s;  // nothing sent yet: the buffer goes out on read
  }
  out.reserve(tasks.size());
  std::vector<std::size_t> lost_script;
  for (std::size_t k = 0; k < calls; ++k) {
    auto r = c.read();
    if (!r) {
      out.resize(tasks.size(), Result<TaskProducer::Submitted>(outcome_lost(r.status())));
      return out;
    }
    // The server lost the script since it was loaded (a restart): that call did not run.
    if (r->is_error() && r->str.rfind("NOSCRIPT", 0) == 0) lost_script.push_back(k);
    append_answers(*r, batch(k).count, &out);
  }
  for (const std::size_t k : lost_script) {  // once every reply of the pipeline is read
    const Connection::Call call = batch(k).call();
    auto again = c.eval(lua::SubmitBatch::kScript, call.keys, call.args);
    std::vector<Result<TaskProducer::Submitted>> answers;
    if (again) {
      append_answers(*again, batch(k).count, &answers);
    } else {
      answers.assign(batch(k).count, Result<TaskProducer::Submitted>(outcome_lost(again.status())));
    }
    std::move(answers.begin(), answers.end(), out.begin() + static_cast<std::ptrdiff_t>(starts[k]));
  }
  return out;
}

}  // namespace sandpool::redis
