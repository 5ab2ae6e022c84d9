#include <sandpool/service/service_logger.hpp>

#include <spdlog/logger.h>
#include <spdlog/sinks/ostream_sink.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

using sandpool::poold::LogFormat;
using sandpool::poold::make_service_logger;
using sandpool::poold::to_spdlog_level;
using Json = nlohmann::json;

namespace {

struct CapturedLog {
  std::ostringstream out;
  std::shared_ptr<spdlog::logger> logger;

  explicit CapturedLog(LogFormat format, spdlog::level::level_enum level = spdlog::level::debug)
      : logger(make_service_logger(level, format,
                                   std::make_shared<spdlog::sinks::ostream_sink_mt>(out))) {}

  std::vector<std::string> lines() const {
    std::vector<std::string> v;
    std::istringstream in(out.str());
    for (std::string line; std::getline(in, line);) v.push_back(line);
    return v;
  }
  // Every line parsed as one JSON object (the test fails on a line that is not one).
  std::vector<Json> objects() const {
    std::vector<Json> v;
    for (const auto& line : lines()) {
      INFO(line);
      Json j = Json::parse(line);  // throws, failing the test, on anything but JSON
      REQUIRE(j.is_object());
      v.push_back(std::move(j));
    }
    return v;
  }
};

}  // namespace

TEST_CASE("JSON logs are one object per line with ts, level, logger and msg") {
  CapturedLog log(LogFormat::kJson);
  log.logger->info("pool default started");
  log.logger->warn("worker crashed");
  auto objs = log.objects();
  REQUIRE(objs.size() == 2);
  CHECK(objs[0]["level"] == "info");
  CHECK(objs[0]["logger"] == "poold");
  CHECK(objs[0]["msg"] == "pool default started");
  CHECK(objs[1]["level"] == "warning");
  const std::string ts = objs[0]["ts"];
  CHECK(std::regex_match(ts, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z)")));
  // The first four members come in this order, for people reading the raw lines.
  CHECK(log.lines()[0].rfind("{\"ts\":", 0) == 0);
  CHECK(log.lines()[0].find("\"level\"") < log.lines()[0].find("\"logger\""));
  CHECK(log.lines()[0].find("\"logger\"") < log.lines()[0].find("\"msg\""));
}

TEST_CASE("a message with quotes, backslashes, newlines and bad UTF-8 stays one valid line") {
  CapturedLog log(LogFormat::kJson);
  const std::string nasty = "plugin said \"hi\"\\ then\nsecond line\r\n\ttab \x01 and \xff\xfe end";
  log.logger->error("worker output: {}", nasty);
  auto lines = log.lines();
  REQUIRE(lines.size() == 1);
  auto objs = log.objects();
  const std::string msg = objs[0]["msg"];
  CHECK(msg.rfind("worker output: plugin said \"hi\"\\ then\nsecond line\r\n\ttab \x01 and ", 0) ==
        0);
  CHECK(msg.find("\xEF\xBF\xBD") != std::string::npos);  // U+FFFD for the invalid bytes
}

TEST_CASE("key=value pairs in a JSON message become fields, msg keeps the whole text") {
  CapturedLog log(LogFormat::kJson);
  log.logger->info("worker exited pool=default pid=4242 reason=\"killed by the pool\" msg=x pid=1");
  auto o = log.objects().at(0);
  CHECK(o["msg"] ==
        "worker exited pool=default pid=4242 reason=\"killed by the pool\" msg=x pid=1");
  CHECK(o["pool"] == "default");
  CHECK(o["pid"] == 4242);  // a number, and the first occurrence wins
  CHECK(o["reason"] == "killed by the pool");
  CHECK(o.size() == 7);  // ts level logger msg pool pid reason: "msg=x" cannot replace msg
}

TEST_CASE("the text format is spdlog's default line") {
  CapturedLog log(LogFormat::kText);
  log.logger->info("listening on /run/sandpool/poold.sock");
  auto lines = log.lines();
  REQUIRE(lines.size() == 1);
  CHECK(std::regex_match(
      lines[0],
      std::regex(
          R"(\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}\] \[poold\] \[info\] listening on /run/sandpool/poold.sock)")));
}

TEST_CASE("the level filters, in both formats") {
  const auto format = GENERATE(LogFormat::kText, LogFormat::kJson);
  CapturedLog log(format, spdlog::level::warn);
  log.logger->info("hidden");
  log.logger->warn("shown");
  auto lines = log.lines();
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].find("shown") != std::string::npos);
}

TEST_CASE("every configured log level maps onto spdlog's") {
  using sandpool::LogLevel;
  CHECK(to_spdlog_level(LogLevel::kTrace) == spdlog::level::trace);
  CHECK(to_spdlog_level(LogLevel::kWarn) == spdlog::level::warn);
  CHECK(to_spdlog_level(LogLevel::kError) == spdlog::level::err);
  CHECK(to_spdlog_level(LogLevel::kOff) == spdlog::level::off);
}

TEST_CASE("the stderr logger is usable and unregistered, so two can coexist") {
  auto a = make_service_logger(spdlog::level::info, LogFormat::kJson);
  auto b = make_service_logger(spdlog::level::info, LogFormat::kText);
  CHECK(a->name() == "poold");
  CHECK(b->name() == "poold");
  CHECK(a->level() == spdlog::level::info);
}
