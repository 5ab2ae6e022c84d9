#include <sandpool/store/dead_letter_file.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <ctime>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include <sandpool/base/posix_call.hpp>
#include <sandpool/base/unique_fd.hpp>

namespace sandpool::dead_letter_file {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

constexpr std::string_view kAlphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// Returns true iff `s` is well-formed UTF-8 (no overlong forms, surrogates or values past
// U+10FFFF): what the JSON library can write as a string unchanged.
bool is_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t len = 0;
    std::uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      len = 2;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > s.size()) return false;
    for (std::size_t k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    static constexpr std::uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += len;
  }
  return true;
}

// A text field: a JSON string when it is UTF-8, else {"base64": ...}.
ordered_json text_json(const std::string& s) {
  if (is_utf8(s)) return s;
  return ordered_json{{"base64", encode_base64(s)}};
}

// Reads what text_json wrote; throws std::runtime_error naming `field` otherwise.
std::string text_of(const json& j, const char* field) {
  auto it = j.find(field);
  if (it == j.end()) throw std::runtime_error(std::string("missing \"") + field + "\"");
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->size() == 1 && it->contains("base64") && (*it)["base64"].is_string()) {
    auto bytes = decode_base64((*it)["base64"].get<std::string>());
    if (bytes) return *bytes;
  }
  throw std::runtime_error(std::string("\"") + field + "\": a string or {\"base64\": ...}");
}

// An integer field within [lo, hi]; throws naming `field` otherwise.
template <typename T>
T int_of(const json& j, const char* field, T lo = std::numeric_limits<T>::min(),
         T hi = std::numeric_limits<T>::max()) {
  auto it = j.find(field);
  if (it == j.end()) throw std::runtime_error(std::string("missing \"") + field + "\"");
  const std::string range = std::to_string(lo) + ".." + std::to_string(hi);
  const auto fits = [&](auto v) {
    return std::cmp_greater_equal(v, lo) && std::cmp_less_equal(v, hi);
  };
  if (it->is_number_unsigned()) {
    const auto v = it->get<std::uint64_t>();
    if (fits(v)) return static_cast<T>(v);
  } else if (it->is_number_integer()) {
    const auto v = it->get<std::int64_t>();
    if (fits(v)) return static_cast<T>(v);
  }
  throw std::runtime_error(std::string("\"") + field + "\": an integer in " + range);
}

template <typename E>
E enum_of(const json& j, const char* field, E first, E last) {
  const std::string name = text_of(j, field);
  for (int i = static_cast<int>(first); i <= static_cast<int>(last); ++i) {
    if (to_string(static_cast<E>(i)) == name) return static_cast<E>(i);
  }
  throw std::runtime_error(std::string("\"") + field + "\": unknown value '" + name + "'");
}

ordered_json attempt_json(const Attempt& a) {
  ordered_json j;
  j["number"] = a.number;
  j["outcome"] = std::string(to_string(a.outcome));
  j["error"] = text_json(a.error);
  j["worker_pid"] = a.worker_pid;
  j["started_ms"] = a.started_ms;
  j["ended_ms"] = a.ended_ms;
  j["backtrace"] = text_json(a.backtrace);
  return j;
}

Attempt attempt_of(const json& j) {
  if (!j.is_object()) throw std::runtime_error("\"attempts\": objects");
  Attempt a;
  a.number = int_of<std::uint32_t>(j, "number");
  a.outcome = enum_of(j, "outcome", Outcome::kOk, Outcome::kCancelled);
  a.error = text_of(j, "error");
  a.worker_pid = int_of<std::int32_t>(j, "worker_pid");
  a.started_ms = int_of<std::int64_t>(j, "started_ms");
  a.ended_ms = int_of<std::int64_t>(j, "ended_ms");
  a.backtrace = text_of(j, "backtrace");
  return a;
}

DeadLetter letter_of(const json& j) {
  if (!j.is_object()) throw std::runtime_error("not a JSON object");
  const int version = int_of<int>(j, "version");
  if (version != kFormatVersion) {
    throw std::runtime_error("format version " + std::to_string(version) +
                             ", but this sandpool reads version " + std::to_string(kFormatVersion));
  }
  DeadLetter l;
  l.pool = text_of(j, "pool");
  l.task.id = int_of<std::uint64_t>(j, "task_id");
  l.task.type = text_of(j, "type");
  l.task.state = TaskState::kDeadLettered;
  l.task.reason = enum_of(j, "reason", DeadReason::kPermanent, DeadReason::kRejected);
  l.task.error = text_of(j, "error");
  l.dead_lettered_ms = int_of<std::int64_t>(j, "dead_lettered_ms");
  auto payload = decode_base64(text_of(j, "payload_base64"));
  if (!payload) throw std::runtime_error("\"payload_base64\": not base64");
  l.payload = std::move(*payload);
  auto opts = j.find("options");
  if (opts == j.end() || !opts->is_object()) throw std::runtime_error("\"options\": an object");
  if (opts->contains("timeout_ms")) {
    l.options.timeout = std::chrono::milliseconds(int_of<std::int64_t>(*opts, "timeout_ms", 0));
  }
  if (opts->contains("retries")) l.options.retries = int_of<std::uint32_t>(*opts, "retries");
  l.options.priority = int_of<std::int32_t>(*opts, "priority");
  l.options.key = text_of(*opts, "key");
  if (opts->contains("tenant")) l.options.tenant = text_of(*opts, "tenant");  // since schema 4
  l.task.tenant = l.options.tenant;
  auto attempts = j.find("attempts");
  if (attempts == j.end() || !attempts->is_array()) {
    throw std::runtime_error("\"attempts\": an array");
  }
  for (const json& a : *attempts) l.task.history.push_back(attempt_of(a));
  return l;
}

// "20250102T030405.678Z": UTC, sortable, no characters a shell or a file system minds.
std::string utc_stamp(std::int64_t ms) {
  const std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  ::gmtime_r(&secs, &tm);
  std::array<char, 32> buf{};
  const std::size_t n = std::strftime(buf.data(), buf.size(), "%Y%m%dT%H%M%S", &tm);
  std::array<char, 8> frac{};
  std::snprintf(frac.data(), frac.size(), ".%03dZ", static_cast<int>(ms % 1000));
  return std::string(buf.data(), n) + frac.data();
}

// Opens a new file named after `base` (base.jsonl, base-2.jsonl, ...), never an existing one.
Result<std::pair<UniqueFd, std::string>> create_new(const std::string& base) {
  for (int n = 1;; ++n) {
    const std::string path = base + (n == 1 ? "" : "-" + std::to_string(n)) + ".jsonl";
    auto fd = posix_call("open(" + path + ")", [&] {
      return ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    });
    if (fd) return std::make_pair(UniqueFd(*fd), path);
    if (fd.status().sys_errno() != EEXIST || n >= 1000) return fd.status();
  }
}

Status write_all(int fd, std::string_view bytes, const std::string& path) {
  while (!bytes.empty()) {
    auto n =
        posix_call("write(" + path + ")", [&] { return ::write(fd, bytes.data(), bytes.size()); });
    if (!n) return n.status();
    bytes.remove_prefix(static_cast<std::size_t>(*n));
  }
  return Status::ok();
}

// Makes the new directory entry durable.
Status sync_dir(const std::string& dir) {
  auto fd = posix_call("open(" + dir + ")",
                       [&] { return ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); });
  if (!fd) return fd.status();
  UniqueFd owner(*fd);
  return posix_call("fsync(" + dir + ")", [&] { return ::fsync(owner.get()); }).status();
}

}  // namespace

std::string encode_base64(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const std::uint32_t v = static_cast<std::uint8_t>(bytes[i]) << 16 |
                            static_cast<std::uint8_t>(bytes[i + 1]) << 8 |
                            static_cast<std::uint8_t>(bytes[i + 2]);
    for (int shift = 18; shift >= 0; shift -= 6) out += kAlphabet[(v >> shift) & 0x3f];
  }
  const std::size_t rest = bytes.size() - i;
  if (rest > 0) {
    std::uint32_t v = static_cast<std::uint8_t>(bytes[i]) << 16;
    if (rest == 2) v |= static_cast<std::uint8_t>(bytes[i + 1]) << 8;
    out += kAlphabet[(v >> 18) & 0x3f];
    out += kAlphabet[(v >> 12) & 0x3f];
    out += rest == 2 ? kAlphabet[(v >> 6) & 0x3f] : '=';
    out += '=';
  }
  return out;
}

std::optional<std::string> decode_base64(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  std::array<int, 256> value{};
  value.fill(-1);
  for (std::size_t k = 0; k < kAlphabet.size(); ++k) {
    value[static_cast<unsigned char>(kAlphabet[k])] = static_cast<int>(k);
  }
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (std::size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    const int pad = last ? (text[i + 3] == '=') + (text[i + 2] == '=') : 0;
    if (pad == 1 && text[i + 2] == '=') return std::nullopt;  // "x=y=" is not padding
    std::uint32_t v = 0;
    for (int k = 0; k < 4 - pad; ++k) {
      const int d = value[static_cast<unsigned char>(text[i + k])];
      if (d < 0) return std::nullopt;
      v |= static_cast<std::uint32_t>(d) << (18 - 6 * k);
    }
    out += static_cast<char>((v >> 16) & 0xff);
    if (pad < 2) out += static_cast<char>((v >> 8) & 0xff);
    if (pad < 1) out += static_cast<char>(v & 0xff);
  }
  return out;
}

std::string to_line(const DeadLetter& l) {
  ordered_json j;
  j["version"] = kFormatVersion;
  j["pool"] = text_json(l.pool);
  j["task_id"] = l.task.id;
  j["type"] = text_json(l.task.type);
  j["reason"] = std::string(to_string(l.task.reason));
  j["error"] = text_json(l.task.error);
  j["dead_lettered_ms"] = l.dead_lettered_ms;
  ordered_json opts;
  if (l.options.timeout) opts["timeout_ms"] = l.options.timeout->count();
  if (l.options.retries) opts["retries"] = *l.options.retries;
  opts["priority"] = l.options.priority;
  opts["key"] = text_json(l.options.key);
  if (!l.options.tenant.empty()) opts["tenant"] = text_json(l.options.tenant);
  j["options"] = std::move(opts);
  ordered_json attempts = ordered_json::array();
  for (const Attempt& a : l.task.history) attempts.push_back(attempt_json(a));
  j["attempts"] = std::move(attempts);
  j["payload_base64"] = encode_base64(l.payload);
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

Result<std::vector<DeadLetter>> parse(std::string_view text, std::string_view source,
                                      std::uint64_t first_line) {
  std::vector<DeadLetter> out;
  std::uint64_t line_no = first_line;
  for (std::size_t pos = 0; pos < text.size(); ++line_no) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    try {
      out.push_back(letter_of(json::parse(line)));
    } catch (const std::exception& e) {  // json::exception, or a field letter_of refused
      return Status::invalid(std::string(source) + " line " + std::to_string(line_no) + ": " +
                             e.what());
    }
  }
  return out;
}

Result<std::string> write_spill(const std::string& dir,
                                const std::vector<const DeadLetter*>& letters,
                                std::int64_t now_ms) {
  std::string text;
  for (const DeadLetter* l : letters) text += to_line(*l);
  auto created = create_new(dir + "/" + std::string(kSpillPrefix) + utc_stamp(now_ms));
  if (!created) return created.status();
  auto& [fd, path] = *created;
  Status s = write_all(fd.get(), text, path);
  const int raw_fd = fd.get();  // clang 14 cannot capture a structured binding
  if (s) s = posix_call("fsync(" + path + ")", [raw_fd] { return ::fsync(raw_fd); }).status();
  fd.reset();
  if (s) s = sync_dir(dir);
  if (!s) {
    ::unlink(path.c_str());
    return s;
  }
  return path;
}

Result<std::string> read_file(const std::string& path) {
  auto fd =
      posix_call("open(" + path + ")", [&] { return ::open(path.c_str(), O_RDONLY | O_CLOEXEC); });
  if (!fd) return fd.status();
  UniqueFd owner(*fd);
  std::string out;
  std::array<char, 65536> buf{};
  for (;;) {
    auto n = posix_call("read(" + path + ")",
                        [&] { return ::read(owner.get(), buf.data(), buf.size()); });
    if (!n) return n.status();
    if (*n == 0) return out;
    out.append(buf.data(), static_cast<std::size_t>(*n));
  }
}

}  // namespace sandpool::dead_letter_file
