// What the server writes to the log about a client: a client names itself in its hello, and
// that name is the client's text, escaped before it reaches the log.
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <sstream>

#include "control_fixture.hpp"

using namespace sandpool;
using namespace sandpool::testing;
using control::FrameKind;

namespace {

// Adds a sink to spdlog's default logger (the server's) for the test's lifetime.
class CapturedDefaultLog {
 public:
  CapturedDefaultLog() : sink_(std::make_shared<spdlog::sinks::ostream_sink_mt>(out_)) {
    spdlog::default_logger()->sinks().push_back(sink_);
  }
  ~CapturedDefaultLog() {
    auto& sinks = spdlog::default_logger()->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
  }
  std::string text() {
    sink_->flush();
    return out_.str();
  }

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
};

}  // namespace

TEST_CASE("a client's name reaches the log escaped: no escape sequence, no forged line") {
  CapturedDefaultLog log;
  TempDir dir;
  FakeHandler handler;
  ControlServerOptions o;
  o.path = dir.file("poold.sock");
  auto server = start_server(o, handler);
  RawConnection raw(server->path());
  raw.send(FrameKind::kHello, 1, "",
           R"({"version":1,"client":"evil\u001b[2J\n2030-01-01 [critical] forged"})");
  auto hello = raw.read();
  REQUIRE(hello);
  REQUIRE(hello->kind == FrameKind::kOk);
  // Unframeable input: the server answers, closes the connection and logs why, naming the
  // client, before the close reaches us.
  raw.send_bytes(std::string("\x03\x00\x00\x00garbage", 11));
  auto error = raw.read();
  REQUIRE(error);
  CHECK_FALSE(raw.read());
  const std::string text = log.text();
  INFO(text);
  const auto at = text.find("closed connection of pid");
  REQUIRE(at != std::string::npos);
  const std::string line = text.substr(at, text.find('\n', at) - at);
  CHECK(line.find("(evil\\x1b[2J\\n2030-01-01 [critical] forged): unframeable input") !=
        std::string::npos);
  CHECK(text.find('\x1b') == std::string::npos);
  CHECK(text.find("\n2030-01-01") == std::string::npos);
}
