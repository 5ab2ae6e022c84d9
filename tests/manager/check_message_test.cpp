// check_message(): every reason a worker's frame is refused, and every bound applied to
// what it wrote, on frames built in memory.
#include <catch2/catch.hpp>

#include "core/check_message.hpp"

namespace sandpool::core {
namespace {

constexpr auto kResult = static_cast<std::uint16_t>(ipc::MsgKind::kResult);
constexpr auto kProgress = static_cast<std::uint16_t>(ipc::MsgKind::kProgress);
constexpr auto kLog = static_cast<std::uint16_t>(ipc::MsgKind::kLog);
constexpr auto kReady = static_cast<std::uint16_t>(ipc::MsgKind::kReady);

template <typename Msg>
std::string frame_of(const Msg& m) {
  std::string out;
  ipc::encode(m, &out);
  return out;
}

MessageLimits message_limits() {
  MessageLimits l;
  l.max_result = 100;
  return l;
}

}  // namespace

TEST_CASE("a frame that does not decode as its kind is a protocol error") {
  ipc::ResultMsg r{7, ipc::TaskStatus::kOk, "data", ""};
  ipc::ProgressMsg p{7, "half"};
  ipc::LogMsg l{7, 2, "hello"};
  ipc::ReadyMsg y{42, {"echo"}, "rlimits+seccomp:strict"};
  struct Row {
    const char* what;
    std::uint16_t kind;
    std::string frame;
  };
  const Row row = GENERATE_COPY(values<Row>({
      {"a truncated result", kResult, frame_of(r).substr(0, 5)},
      {"a result with trailing bytes", kResult, frame_of(r) + "x"},
      {"a truncated progress report", kProgress, frame_of(p).substr(0, 3)},
      {"a truncated log line", kLog, frame_of(l).substr(0, 9)},
      {"a truncated Ready", kReady, frame_of(y).substr(0, 6)},
      {"a result sent as a Ready", kReady, frame_of(r)},
      {"an empty frame", kResult, ""},
  }));
  SECTION(row.what) {
    WorkerMessage m;
    const Status s = check_message(row.kind, row.frame, message_limits(), &m);
    CHECK(s.code() == Code::kProtocol);
    CHECK_FALSE(s.message().empty());
  }
}

TEST_CASE("a kind the manager does not read is a protocol error naming the kind") {
  const std::uint16_t kind = GENERATE(std::uint16_t{0}, std::uint16_t{1}, std::uint16_t{3},
                                      std::uint16_t{20}, std::uint16_t{65535});
  WorkerMessage m;
  const Status s = check_message(kind, frame_of(ipc::LogMsg{0, 1, "x"}), message_limits(), &m);
  CHECK(s.code() == Code::kProtocol);
  CHECK(s.message() == "unknown message kind " + std::to_string(kind));
}

TEST_CASE("messages within the limits pass unchanged") {
  WorkerMessage m;
  REQUIRE(check_message(kResult, frame_of(ipc::ResultMsg{7, ipc::TaskStatus::kFail, "d", "bad"}),
                        message_limits(), &m));
  const auto& r = std::get<ipc::ResultMsg>(m);
  CHECK(r.id == 7);
  CHECK(r.status == ipc::TaskStatus::kFail);
  CHECK(r.data == "d");
  CHECK(r.error == "bad");

  REQUIRE(check_message(kProgress, frame_of(ipc::ProgressMsg{8, "half"}), message_limits(), &m));
  CHECK(std::get<ipc::ProgressMsg>(m).data == "half");

  REQUIRE(check_message(kLog, frame_of(ipc::LogMsg{9, 3, "boom"}), message_limits(), &m));
  CHECK(std::get<ipc::LogMsg>(m).level == 3);
  CHECK(std::get<ipc::LogMsg>(m).text == "boom");

  REQUIRE(check_message(kReady, frame_of(ipc::ReadyMsg{42, {"a", "b"}, "rlimits"}),
                        message_limits(), &m));
  CHECK(std::get<ipc::ReadyMsg>(m).task_types == std::vector<std::string>{"a", "b"});
  CHECK(std::get<ipc::ReadyMsg>(m).isolation == "rlimits");
}

TEST_CASE("a result larger than max_result arrives as result_too_large without its data") {
  WorkerMessage m;
  REQUIRE(check_message(
      kResult, frame_of(ipc::ResultMsg{7, ipc::TaskStatus::kOk, std::string(101, 'r'), ""}),
      message_limits(), &m));
  const auto& r = std::get<ipc::ResultMsg>(m);
  CHECK(r.status == ipc::TaskStatus::kResultTooLarge);
  CHECK(r.data.empty());
  REQUIRE(check_message(
      kResult, frame_of(ipc::ResultMsg{7, ipc::TaskStatus::kOk, std::string(100, 'r'), ""}),
      message_limits(), &m));
  CHECK(std::get<ipc::ResultMsg>(m).status == ipc::TaskStatus::kOk);  // at the limit: kept
}

TEST_CASE("a result's error text is cut at 4 KiB, marked as cut") {
  WorkerMessage m;
  REQUIRE(check_message(
      kResult, frame_of(ipc::ResultMsg{7, ipc::TaskStatus::kFail, "", std::string(5000, 'e')}),
      message_limits(), &m));
  const std::string& e = std::get<ipc::ResultMsg>(m).error;
  CHECK(e.size() == 4096);
  CHECK(e.ends_with(" [truncated]"));
}

TEST_CASE("progress data is cut at 64 KiB") {
  WorkerMessage m;
  REQUIRE(check_message(kProgress, frame_of(ipc::ProgressMsg{8, std::string(70000, 'p')}),
                        message_limits(), &m));
  CHECK(std::get<ipc::ProgressMsg>(m).data.size() == 64 * 1024);
}

TEST_CASE("a Ready's isolation string is made printable and short") {
  WorkerMessage m;
  REQUIRE(check_message(kReady,
                        frame_of(ipc::ReadyMsg{42, {}, "seccomp\x1b[2J\n" + std::string(400, 'x')}),
                        message_limits(), &m));
  const std::string& iso = std::get<ipc::ReadyMsg>(m).isolation;
  CHECK(iso.size() <= 256);
  CHECK(iso.starts_with("seccomp\\x1b[2J\\n"));
  CHECK(iso.find('\x1b') == std::string::npos);
}

}  // namespace sandpool::core
