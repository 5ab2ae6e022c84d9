#include <sandpool/service/service_logger.hpp>

#include <spdlog/logger.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <time.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "poold/log_fields.hpp"

namespace sandpool::poold {
namespace {

using Json = nlohmann::ordered_json;  // members in insertion order: ts, level, logger, msg first

// 2026-11-26T02:07:10.123456Z
std::string utc_timestamp(spdlog::log_clock::time_point t) {
  using namespace std::chrono;
  const auto us = duration_cast<microseconds>(t.time_since_epoch()).count();
  const time_t secs = static_cast<time_t>(us / 1'000'000);
  struct tm tm {};
  ::gmtime_r(&secs, &tm);
  std::array<char, 40> buf{};
  const std::size_t n = ::strftime(buf.data(), buf.size(), "%Y-%m-%dT%H:%M:%S", &tm);
  return std::string(buf.data(), n) + fmt::format(".{:06d}Z", us % 1'000'000);
}

class JsonLogFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const std::string_view text(msg.payload.data(), msg.payload.size());
    Json line;
    line["ts"] = utc_timestamp(msg.time);
    const auto level = spdlog::level::to_string_view(msg.level);
    line["level"] = std::string_view(level.data(), level.size());
    line["logger"] = std::string_view(msg.logger_name.data(), msg.logger_name.size());
    line["msg"] = text;
    for (auto& f : parse_log_fields(text)) {
      if (line.contains(f.key)) continue;
      if (f.is_integer) {
        line[f.key] = std::stoll(f.value);
      } else {
        line[f.key] = std::move(f.value);
      }
    }
    const std::string out = line.dump(-1, ' ', false, Json::error_handler_t::replace);
    dest.append(out.data(), out.data() + out.size());
    dest.push_back('\n');
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonLogFormatter>();
  }
};

}  // namespace

spdlog::level::level_enum to_spdlog_level(LogLevel level) {
  using spdlog::level::level_enum;
  switch (level) {
    case LogLevel::kTrace:
      return level_enum::trace;
    case LogLevel::kDebug:
      return level_enum::debug;
    case LogLevel::kInfo:
      return level_enum::info;
    case LogLevel::kWarn:
      return level_enum::warn;
    case LogLevel::kError:
      return level_enum::err;
    case LogLevel::kCritical:
      return level_enum::critical;
    case LogLevel::kOff:
      return level_enum::off;
  }
  return level_enum::info;
}

std::unique_ptr<spdlog::formatter> make_json_log_formatter() {
  return std::make_unique<JsonLogFormatter>();
}

std::shared_ptr<spdlog::logger> make_service_logger(spdlog::level::level_enum level,
                                                    LogFormat format, std::string name) {
  spdlog::sink_ptr sink;
  if (format == LogFormat::kJson) {
    sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  } else {
    sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  }
  return make_service_logger(level, format, std::move(sink), std::move(name));
}

std::shared_ptr<spdlog::logger> make_service_logger(spdlog::level::level_enum level,
                                                    LogFormat format, spdlog::sink_ptr sink,
                                                    std::string name) {
  if (format == LogFormat::kJson) {
    sink->set_formatter(make_json_log_formatter());
  } else {
    sink->set_formatter(std::make_unique<spdlog::pattern_formatter>());  // spdlog's default
  }
  auto logger = std::make_shared<spdlog::logger>(std::move(name), std::move(sink));
  logger->set_level(level);
  // stderr is unbuffered, but a file sink handed in is not: a warning must not sit in a
  // buffer when the process dies.
  logger->flush_on(spdlog::level::warn);
  return logger;
}

}  // namespace sandpool::poold
