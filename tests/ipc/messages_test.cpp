// The message codec: round trips, and the refusal of every malformed encoding a hostile
// worker could write, without throwing and without allocating what the bytes claim.
#include <cstdint>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include <catch2/catch.hpp>

#include <sandpool/ipc/messages.hpp>

#include "allocation_probe.hpp"

namespace sandpool::ipc {
namespace {

auto fields(const TaskMsg& m) {
  return std::tie(m.id, m.attempt, m.deadline_mono_ms, m.type, m.payload);
}
auto fields(const CancelMsg& m) { return std::tie(m.id); }
auto fields(const StopMsg&) { return std::tuple<>(); }
auto fields(const ReadyMsg& m) { return std::tie(m.pid, m.task_types, m.isolation); }
auto fields(const ResultMsg& m) { return std::tie(m.id, m.status, m.data, m.error); }
auto fields(const ProgressMsg& m) { return std::tie(m.id, m.data); }
auto fields(const LogMsg& m) { return std::tie(m.id, m.level, m.text); }

std::string binary_blob(std::size_t n) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>(i * 7);
  return s;
}

// A few values of each message, from empty to large, including the enums' extremes.
std::vector<TaskMsg> task_samples() {
  return {TaskMsg{}, TaskMsg{~0ull, ~0u, -1, "echo", "hello"},
          TaskMsg{42, 3, 1234567, std::string(300, 't'), binary_blob(100000)}};
}
std::vector<CancelMsg> cancel_samples() { return {CancelMsg{}, CancelMsg{0x0102030405060708}}; }
std::vector<StopMsg> stop_samples() { return {StopMsg{}}; }
std::vector<ReadyMsg> ready_samples() {
  std::vector<std::string> many;
  for (std::uint32_t i = 0; i < kMaxListItems; ++i) many.push_back("type" + std::to_string(i));
  return {ReadyMsg{}, ReadyMsg{77, {"echo", "", "upper"}, "rlimits+uid:65534+caps:none"},
          ReadyMsg{1, many, ""}};
}
std::vector<ResultMsg> result_samples() {
  return {ResultMsg{}, ResultMsg{9, TaskStatus::kResultTooLarge, "", "too big"},
          ResultMsg{10, TaskStatus::kFail, binary_blob(5000), "boom"},
          ResultMsg{11, TaskStatus::kLimit, "", "lua: instruction limit reached"}};
}
std::vector<ProgressMsg> progress_samples() {
  return {ProgressMsg{}, ProgressMsg{5, binary_blob(64)}};
}
std::vector<LogMsg> log_samples() {
  return {LogMsg{}, LogMsg{0, 3, "init failed"}, LogMsg{8, 0, std::string(1000, 'l')}};
}

TEMPLATE_TEST_CASE(
    "every message round-trips, and each truncation or extension of its encoding is refused", "",
    TaskMsg, CancelMsg, StopMsg, ReadyMsg, ResultMsg, ProgressMsg, LogMsg) {
  std::vector<TestType> samples;
  if constexpr (std::is_same_v<TestType, TaskMsg>) samples = task_samples();
  if constexpr (std::is_same_v<TestType, CancelMsg>) samples = cancel_samples();
  if constexpr (std::is_same_v<TestType, StopMsg>) samples = stop_samples();
  if constexpr (std::is_same_v<TestType, ReadyMsg>) samples = ready_samples();
  if constexpr (std::is_same_v<TestType, ResultMsg>) samples = result_samples();
  if constexpr (std::is_same_v<TestType, ProgressMsg>) samples = progress_samples();
  if constexpr (std::is_same_v<TestType, LogMsg>) samples = log_samples();

  for (const TestType& m : samples) {
    std::string bytes = "stale contents are replaced";
    encode(m, &bytes);
    TestType back{};
    const Status s = decode(bytes, &back);
    INFO(s.to_string());
    REQUIRE(s.is_ok());
    CHECK(fields(back) == fields(m));

    // Every proper prefix is a protocol error, never a crash or a partial success.
    for (std::size_t n = 0; n < bytes.size(); ++n) {
      TestType out{};
      const Status t = decode(std::string_view(bytes).substr(0, n), &out);
      if (t.code() != Code::kProtocol) {
        FAIL("the first " << n << " of " << bytes.size() << " bytes gave " << t.to_string());
      }
    }
    TestType out{};
    const Status t = decode(bytes + '\0', &out);
    CHECK(t.code() == Code::kProtocol);
    CHECK_THAT(t.message(), Catch::Contains("1 trailing bytes"));
  }
}

// Builds an encoding by hand, field by field (fixed-width little-endian, u64 lengths).
class Wire {
 public:
  template <class T>
  Wire& num(T v) {
    bytes_.append(reinterpret_cast<const char*>(&v), sizeof v);
    return *this;
  }
  Wire& str(std::string_view s) {
    num<std::uint64_t>(s.size());
    bytes_.append(s);
    return *this;
  }
  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
};

TEST_CASE("the hand-written wire layout matches the encoder") {
  std::string bytes;
  encode(TaskMsg{7, 2, 99, "echo", "hi"}, &bytes);
  CHECK(bytes == Wire()
                     .num<std::uint64_t>(7)
                     .num<std::uint32_t>(2)
                     .num<std::int64_t>(99)
                     .str("echo")
                     .str("hi")
                     .bytes());
}

TEST_CASE("a task encoded from borrowed strings is byte for byte the TaskMsg") {
  const std::string payload(1000, 'p');
  std::string from_view, from_msg;
  encode(TaskMsgView{7, 2, 99, "echo", payload}, &from_view);
  encode(TaskMsg{7, 2, 99, "echo", payload}, &from_msg);
  CHECK(from_view == from_msg);
  TaskMsg back;
  REQUIRE(decode(from_view, &back).is_ok());
  CHECK(back.payload == payload);
}

TEST_CASE("a length field of 2^63 is refused before anything is allocated") {
  const std::uint64_t huge = GENERATE(std::uint64_t{1} << 63, ~std::uint64_t{0}, 1u << 30);
  const std::string bytes = Wire().num<std::uint64_t>(1).num(huge).bytes() + "short";
  ProgressMsg m;
  testing::reset_largest_allocation();
  const Status s = decode(bytes, &m);
  CHECK(testing::largest_allocation() < 4096);
  CHECK(s.code() == Code::kProtocol);
  CHECK_THAT(s.message(), Catch::StartsWith("ProgressMsg.data: length"));
}

TEST_CASE("a list count over the cap or beyond the bytes present is refused") {
  const std::uint64_t count = GENERATE(std::uint64_t{kMaxListItems} + 1, std::uint64_t{1} << 63, 3);
  Wire w;
  w.num<std::uint32_t>(1).num(count);
  w.str("a").str("b");  // two items present, whatever the count says
  ReadyMsg m;
  testing::reset_largest_allocation();
  const Status s = decode(w.bytes(), &m);
  CHECK(testing::largest_allocation() < std::size_t{64} << 10);
  CHECK(s.code() == Code::kProtocol);
  CHECK_THAT(s.message(), Catch::StartsWith("ReadyMsg.task_types:"));
}

TEST_CASE("a list item whose length runs past the end is refused") {
  const std::string bytes =
      Wire().num<std::uint32_t>(1).num<std::uint64_t>(2).str("ok").num<std::uint64_t>(100).bytes();
  ReadyMsg m;
  const Status s = decode(bytes, &m);
  CHECK(s.code() == Code::kProtocol);
  CHECK_THAT(s.message(), Catch::Contains("task_types"));
}

TEST_CASE("enum and level bytes beyond their last value are refused, naming the field") {
  SECTION("ResultMsg.status") {
    const std::uint8_t status = GENERATE(6, 17, 255);
    Wire w;
    w.num<std::uint64_t>(1).num(status).str("").str("");
    ResultMsg m;
    const Status s = decode(w.bytes(), &m);
    CHECK(s.code() == Code::kProtocol);
    CHECK_THAT(s.message(), Catch::StartsWith("ResultMsg.status: value"));
  }
  SECTION("LogMsg.level") {
    const std::uint8_t level = GENERATE(4, 255);
    Wire w;
    w.num<std::uint64_t>(1).num(level).str("text");
    LogMsg m;
    const Status s = decode(w.bytes(), &m);
    CHECK(s.code() == Code::kProtocol);
    CHECK_THAT(s.message(), Catch::StartsWith("LogMsg.level: value"));
  }
}

TEST_CASE("a truncation error names the message and the field it cut") {
  std::string bytes;
  encode(TaskMsg{1, 1, 0, "echo", "payload"}, &bytes);
  bytes.resize(bytes.size() - 3);
  TaskMsg m;
  const Status s = decode(bytes, &m);
  CHECK_THAT(s.message(), Catch::StartsWith("TaskMsg.payload:"));
}

TEST_CASE("a StopMsg is empty on the wire and anything in it is refused") {
  std::string bytes = "x";
  encode(StopMsg{}, &bytes);
  CHECK(bytes.empty());
  StopMsg m;
  CHECK(decode("", &m).is_ok());
  CHECK(decode("z", &m).code() == Code::kProtocol);
}

}  // namespace
}  // namespace sandpool::ipc
