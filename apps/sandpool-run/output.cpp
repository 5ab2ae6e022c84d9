#include "output.hpp"

#include <boost/archive/iterators/base64_from_binary.hpp>
#include <boost/archive/iterators/transform_width.hpp>
#include <nlohmann/json.hpp>

namespace sandpool::run {
namespace {

std::string base64(std::string_view in) {
  using namespace boost::archive::iterators;
  using It = base64_from_binary<transform_width<std::string_view::const_iterator, 6, 8>>;
  std::string out(It(in.begin()), It(in.end()));
  out.append((3 - in.size() % 3) % 3, '=');
  return out;
}

std::string escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    switch (c) {
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\\':
        out += "\\\\";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          static const char* hex = "0123456789abcdef";
          out += "\\x";
          out += hex[c >> 4];
          out += hex[c & 15];
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out;
}

}  // namespace

bool is_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    int n = 0;
    std::uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      n = 1, cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      n = 2, cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      n = 3, cp = c & 0x07;
    } else {
      return false;
    }
    for (int k = 1; k <= n; ++k) {
      if (i + k >= s.size()) return false;
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    static constexpr std::uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += n + 1;
  }
  return true;
}

std::string json_line(std::uint64_t line, const TaskResult& r, std::string_view result_file) {
  nlohmann::ordered_json j;
  j["line"] = line;
  j["id"] = r.id;
  j["state"] = std::string(to_string(r.state));
  if (r.state == TaskState::kDeadLettered) j["reason"] = std::string(to_string(r.reason));
  j["attempts"] = r.attempts();
  if (r.state == TaskState::kCompleted && !result_file.empty()) {
    j["result_file"] = std::string(result_file);
    j["result_bytes"] = r.result.size();
  } else if (r.state == TaskState::kCompleted) {
    if (is_utf8(r.result)) {
      j["result"] = r.result;
    } else {
      j["result_base64"] = base64(r.result);
    }
  }
  if (r.state == TaskState::kCompleted || r.error.empty()) {
    j["error"] = nullptr;
  } else {
    // Worker-supplied text: replace invalid UTF-8 rather than fail the line.
    j["error"] = r.error;
  }
  // The attempts, whenever one of them went wrong (a first-time success stays one short
  // line); a hung attempt carries where its worker was.
  if (r.state != TaskState::kCompleted || r.attempts() > 1) {
    nlohmann::ordered_json history = nlohmann::ordered_json::array();
    for (const Attempt& a : r.history) {
      nlohmann::ordered_json aj;
      aj["number"] = a.number;
      aj["outcome"] = std::string(to_string(a.outcome));
      aj["error"] = a.error;
      aj["worker_pid"] = a.worker_pid;
      aj["started_ms"] = a.started_ms;
      aj["ended_ms"] = a.ended_ms;
      if (!a.backtrace.empty()) aj["backtrace"] = a.backtrace;
      history.push_back(std::move(aj));
    }
    j["history"] = std::move(history);
  }
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string text_line(std::uint64_t line, const TaskResult& r, std::string_view result_file) {
  std::string out = std::to_string(line);
  out += '\t';
  out += to_string(r.state);
  out += '\t';
  if (r.state == TaskState::kCompleted && !result_file.empty()) {
    out += escape("wrote " + std::to_string(r.result.size()) + " bytes to " +
                  std::string(result_file));
  } else {
    out += escape(r.state == TaskState::kCompleted ? r.result : r.error);
  }
  return out;
}

}  // namespace sandpool::run
