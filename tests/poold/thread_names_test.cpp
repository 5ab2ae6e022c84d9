// Every thread sandpool starts carries a name (`top -H`, perf, gdb): the threads a test can
// start on their own are started here and their names read back from
// /proc/self/task/*/comm, where the kernel keeps them.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <sandpool/base/thread_name.hpp>
#include <sandpool/metrics/metrics.hpp>
#include <sandpool/store/dead_letters.hpp>

#include <sandpool/service/event_hub.hpp>
#include <sandpool/service/job_thread.hpp>
#include <sandpool/service/progress_coalescer.hpp>
#include "poold_test_support.hpp"
#include "test_support.hpp"

using namespace sandpool;

namespace {

using testing::thread_names;

bool has_thread(const std::string& name) {
  const auto names = thread_names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

TEST_CASE("a thread's name is cut to the kernel's 15 bytes rather than refused") {
  std::optional<std::string> seen;
  std::thread u([&] {
    name_thread(::pthread_self(), "sp-loop:a-pool-with-a-long-name");
    std::ifstream comm("/proc/thread-self/comm");
    std::string name;
    if (std::getline(comm, name)) seen = name;
  });
  u.join();
  REQUIRE(seen);
  CHECK(*seen == "sp-loop:a-pool-");
}

TEST_CASE("the event hub, progress, dead-letter, metrics and job threads are named") {
  poold::EventHub hub;
  CHECK(has_thread("sp-hub"));

  auto coalescer = poold::ProgressCoalescer::create();
  CHECK(has_thread("sp-progress"));

  // poold_tests' own TempDir (poold_test_support.hpp): one TempDir per test executable.
  sandpool::testing::TempDir dir;
  DeadLetterStoreOptions so;
  so.state_dir = (dir.path / "state").string();
  auto store = DeadLetterStore::open(so);
  REQUIRE(store);
  CHECK(has_thread("sp-dlq"));

  auto metrics = MetricsServer::start(
      "127.0.0.1:0", [] { return std::string(); }, [] { return std::optional<std::string>(); });
  REQUIRE(metrics);
  CHECK(has_thread("sp-metrics"));

  poold::JobThread jobs("sp-jobs");
  std::promise<void> ran;
  jobs.post([&] { ran.set_value(); });  // the job thread names itself as it starts
  ran.get_future().wait();
  CHECK(has_thread("sp-jobs"));
}
