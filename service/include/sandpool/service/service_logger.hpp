// The service logger: poold's spdlog logger, writing one line per event to stderr (which
// systemd hands to the journal), as text or as JSON.
#pragma once

#include <spdlog/common.h>
#include <spdlog/formatter.h>

#include <memory>
#include <string>
#include <string_view>

#include <sandpool/base/status.hpp>
#include <sandpool/config/config.hpp>

namespace spdlog {
class logger;
}

namespace sandpool::poold {

// The config's log format (text: spdlog's default line, as sandpool-run writes; json: one
// object per line, see make_json_log_formatter()); the config parser reads both names.
using LogFormat = sandpool::LogFormat;

// The spdlog level of a configured log level.
spdlog::level::level_enum to_spdlog_level(LogLevel level);

// The JSON line format: {"ts":"2026-11-26T02:07:10.123456Z","level":"info","logger":"poold",
// "msg":"...", <fields>}. ts is UTC with microseconds; level is spdlog's name (trace, debug,
// info, warning, error, critical); msg is the whole message, always. Each key=value pair in
// the message (parse_log_fields) becomes one more member after msg: a JSON number when the
// value is a canonical integer, else a string. A field named ts, level, logger or msg, or a
// repeated key, is left in msg only (the first occurrence wins). Bytes that are not UTF-8
// become U+FFFD. Thread-safety: an spdlog formatter; the sink serialises calls.
std::unique_ptr<spdlog::formatter> make_json_log_formatter();

// Returns a logger named `name` writing to stderr at `level`, in `format` (text with colours
// only when stderr is a terminal). Not registered with spdlog's registry: poold's main may
// spdlog::set_default_logger() it so the pool library's default logger writes through it.
// Thread-safety: the returned logger may be used from any thread (mutex-guarded sink).
std::shared_ptr<spdlog::logger> make_service_logger(spdlog::level::level_enum level,
                                                    LogFormat format, std::string name = "poold");
// The same writing to `sink` (tests, or another destination).
std::shared_ptr<spdlog::logger> make_service_logger(spdlog::level::level_enum level,
                                                    LogFormat format, spdlog::sink_ptr sink,
                                                    std::string name = "poold");

}  // namespace sandpool::poold
