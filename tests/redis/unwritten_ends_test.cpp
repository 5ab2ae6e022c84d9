// The kept-ends file (unwritten_ends.hpp) under two threads of one poold: a reload's new feeder
// takes it while a retiring feeder of the same pool appends to it (issue 36).
#include <stdlib.h>
#include <catch2/catch.hpp>

#include <atomic>
#include <filesystem>
#include <set>
#include <thread>

#include <sandpool/redis/unwritten_ends.hpp>

using namespace sandpool;
using sandpool::redis::UnwrittenEnd;
namespace unwritten_ends = sandpool::redis::unwritten_ends;

namespace {

UnwrittenEnd completed_end(std::uint64_t n) {
  UnwrittenEnd e;
  e.entry.entry_id = std::to_string(1000 + n) + "-0";
  e.entry.task_id = redis::PoolKeys::kFirstId + n;
  e.entry.task.type = "echo";
  e.account.id = e.entry.task_id;
  e.account.type = "echo";
  e.account.state = TaskState::kCompleted;
  e.account.result = "r" + std::to_string(n);
  return e;
}

}  // namespace

// Before take(), the new feeder read the file, wrote its ends, then removed it: an end
// appended meanwhile was removed unread, and its completed task ran again.
TEST_CASE("an end appended while another thread takes the file is taken once or stays there") {
  char tmpl[] = "/tmp/sp-unwritten-ends-XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl;
  const std::string path = unwritten_ends::path_in(dir, "p");
  constexpr std::uint64_t kEnds = 400;
  std::atomic<bool> appended{false};
  std::atomic<std::uint64_t> append_failures{0};
  std::thread appender([&] {
    for (std::uint64_t n = 0; n < kEnds; ++n) {
      auto kept = unwritten_ends::append(path, "p", "node-a", {completed_end(n)});
      if (!kept || *kept != 1) append_failures.fetch_add(1);
    }
    appended.store(true);
  });
  std::multiset<std::uint64_t> taken;
  std::uint64_t takes = 0, refused = 0;
  for (bool last = false; !last;) {
    last = appended.load();  // once all are appended, one more take finds the rest
    auto t = unwritten_ends::take(path, "p", "node-a");
    if (!t) {
      REQUIRE(t.status().code() == Code::kNotFound);
      continue;
    }
    ++takes;
    refused += t->refused;
    for (const UnwrittenEnd& e : t->ends) taken.insert(e.entry.task_id);
  }
  appender.join();
  CHECK(append_failures.load() == 0);
  CHECK(refused == 0);      // no line read half written
  INFO(takes << " takes");  // the two threads interleave: more than one, as a rule
  CHECK(taken.size() == kEnds);
  CHECK(std::set<std::uint64_t>(taken.begin(), taken.end()).size() == kEnds);
  CHECK_FALSE(std::filesystem::exists(path));
  std::filesystem::remove_all(dir);
}
