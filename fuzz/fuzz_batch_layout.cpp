// libFuzzer target: the batch-entry layout's packed formats (redis/src/redis/batch_layout.cpp),
// a batch entry's `tasks` field and a batch's ends string, as bytes read from a Redis anybody
// with the pool's keys may have written (docs/redis-batch-layout.md, "Packed formats").
//
// Input layout: [0] the mode (even: the rest is packed tasks; odd: an ends string), [1..2] the
// count the caller expects (tasks: the entry's `n`; ends: the batch's tasks), little-endian,
// [3..] the bytes.
//
// What must hold: a refusal is kProtocol with a bounded message, never a crash or a huge
// allocation; what unpacks repacks, and the repacked bytes unpack to the same values (the
// tasks: packing is idempotent from there; the ends: equal records).
//
// Built twice (fuzz/CMakeLists.txt): as the fuzzer, and with SANDPOOL_FUZZ_SEED_MAIN as a
// small program that writes the seed corpus into the directory it is given.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <sandpool/redis/batch_layout.hpp>

namespace sandpool {
namespace {

namespace batch = redis::batch;

void require(bool ok) {
  if (!ok) __builtin_trap();
}

void require_refusal(const Status& s) {
  require(s.code() == Code::kProtocol);
  require(s.message().size() < 200);
}

void check_tasks(std::string_view blob, std::size_t expect) {
  const auto tasks = batch::unpack_tasks(blob, expect);
  if (!tasks) return require_refusal(tasks.status());
  require(tasks->size() == expect && expect <= batch::kMaxTasks);
  for (const redis::StreamTask& t : *tasks) {
    require(!t.type.empty());
    require(!t.options.not_before && t.options.idempotency_key.empty());
  }
  // What unpacked packs again (no field can be wider than it was read), into no more bytes,
  // and that form is a fixed point.
  const auto again = batch::pack_tasks(tasks->data(), tasks->size());
  require(again.is_ok() && again->size() <= blob.size());
  const auto back = batch::unpack_tasks(*again, expect);
  require(back.is_ok());
  const auto twice = batch::pack_tasks(back->data(), back->size());
  require(twice.is_ok() && *twice == *again);
}

void check_ends(std::string_view blob, std::size_t tasks) {
  const auto ends = batch::unpack_ends(blob, tasks);
  if (!ends) return require_refusal(ends.status());
  std::string again;
  for (const batch::EndRecord& e : *ends) {
    require(e.index < tasks);
    require(e.kind == batch::EndRecord::Kind::kEnd || e.kind == batch::EndRecord::Kind::kMoved);
    require(batch::pack_end(e, again).is_ok());
  }
  // The records' encoding is canonical: the same bytes again.
  require(again == blob);
  const auto back = batch::unpack_ends(again, tasks);
  require(back.is_ok() && *back == *ends);
}

void run(std::string_view in) {
  if (in.size() < 3) return;
  const bool ends = (static_cast<unsigned char>(in[0]) & 1) != 0;
  const std::size_t count =
      static_cast<unsigned char>(in[1]) | std::size_t{static_cast<unsigned char>(in[2])} << 8;
  in.remove_prefix(3);
  if (ends) {
    check_ends(in, count);
  } else {
    check_tasks(in, count);
  }
}

}  // namespace
}  // namespace sandpool

#ifndef SANDPOOL_FUZZ_SEED_MAIN

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  sandpool::run(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}

#else  // the seed generator

#include <chrono>

#include "seed_corpus.hpp"

namespace sandpool {
namespace {

std::string framed(bool ends, std::size_t count, const std::string& bytes) {
  std::string out(1, ends ? '\1' : '\0');
  out.push_back(static_cast<char>(count & 0xff));
  out.push_back(static_cast<char>(count >> 8));
  return out + bytes;
}

int write_seeds(const std::string& dir) {
  bool ok = true;
  auto seed = [&](const std::string& name, const std::string& bytes) {
    run(bytes);
    ok = ok && fuzz::write_seed(dir + "/" + name, bytes);
  };
  // Packed tasks: one plain, three with every option the format carries.
  std::vector<redis::StreamTask> tasks(3);
  tasks[0].type = "echo";
  tasks[0].payload = "hello";
  tasks[1].type = "resize";
  tasks[1].payload = std::string("\0\1\2binary", 9);
  tasks[1].options.priority = -3;
  tasks[1].options.timeout = std::chrono::milliseconds(2500);
  tasks[1].options.retries = 4;
  tasks[1].options.key = "user:42";
  tasks[1].options.tenant = "acme";
  tasks[2].type = "t";
  const auto one = batch::pack_tasks(tasks.data(), 1);
  const auto three = batch::pack_tasks(tasks.data(), 3);
  ok = ok && one.is_ok() && three.is_ok();
  if (ok) {
    seed("tasks_one", framed(false, 1, *one));
    seed("tasks_three", framed(false, 3, *three));
    seed("tasks_truncated", framed(false, 3, three->substr(0, three->size() / 2)));
    seed("tasks_wrong_count", framed(false, 2, *three));
  }
  // End records: a completed task, a dead-lettered one with attempts, a moved one.
  std::string ends;
  batch::EndRecord done{.index = 0, .finished_ms = 1765000000000, .attempts = 1};
  done.state = "completed";
  done.result = "hello";
  batch::EndRecord letter{.index = 2, .finished_ms = 1765000000123, .attempts = 2};
  letter.state = "dead_lettered";
  letter.reason = "retries_exhausted";
  letter.error = "exit 3";
  letter.attempt_log = {R"({"n":1,"ok":false})", R"({"n":2,"ok":false})"};
  batch::EndRecord moved{.index = 1, .kind = batch::EndRecord::Kind::kMoved};
  for (const batch::EndRecord* e : {&done, &letter, &moved}) {
    ok = ok && batch::pack_end(*e, ends).is_ok();
  }
  if (ok) {
    seed("ends_three", framed(true, 3, ends));
    seed("ends_index_past", framed(true, 2, ends));
    seed("ends_truncated", framed(true, 3, ends.substr(0, ends.size() - 5)));
  }
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace sandpool

int main(int argc, char** argv) {
  return sandpool::fuzz::seed_main(argc, argv, "batch_layout", sandpool::write_seeds);
}

#endif
