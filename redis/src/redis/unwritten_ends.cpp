// unwritten_ends (unwritten_ends.hpp): a node's ends kept across a restart while Redis is away.
#include <sandpool/redis/unwritten_ends.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <limits>
#include <optional>
#include <regex>
#include <type_traits>

#include <nlohmann/json.hpp>
#include <sandpool/base/posix_call.hpp>
#include <sandpool/base/thread_annotations.hpp>
#include <sandpool/base/unique_fd.hpp>
#include <sandpool/store/dead_letter_file.hpp>

namespace sandpool::redis::unwritten_ends {
namespace {

using nlohmann::json;
constexpr int kVersion = 1;

std::string b64(const std::string& bytes) { return dead_letter_file::encode_base64(bytes); }

// The value of E whose name is the string `v`, E's values running from 0 to `last`.
template <class E>
std::optional<E> enum_named(const json& v, E last) {
  if (!v.is_string()) return std::nullopt;
  for (int i = 0; i <= static_cast<int>(last); ++i) {
    if (to_string(static_cast<E>(i)) == v.get_ref<const std::string&>()) return static_cast<E>(i);
  }
  return std::nullopt;
}

std::string line_of(const std::string& pool, const std::string& consumer, const UnwrittenEnd& e) {
  json attempts = json::array();
  for (const Attempt& a : e.account.history) {
    attempts.push_back({{"number", a.number},
                        {"outcome", std::string(to_string(a.outcome))},
                        {"error_base64", b64(a.error)},
                        {"worker_pid", a.worker_pid},
                        {"started_ms", a.started_ms},
                        {"ended_ms", a.ended_ms},
                        {"backtrace_base64", b64(a.backtrace)}});
  }
  json j = {{"version", kVersion},
            {"pool", pool},
            {"node", consumer},
            {"entry", e.entry.entry_id},
            {"band", e.entry.band},
            {"task_id", e.entry.task_id},
            {"type_base64", b64(e.entry.task.type)},
            {"release", e.release},
            {"refused_base64", b64(e.refused)},
            {"state", std::string(to_string(e.account.state))},
            {"reason", std::string(to_string(e.account.reason))},
            {"cancel_reason", std::string(to_string(e.account.cancel_reason))},
            {"result_base64", b64(e.account.result)},
            {"error_base64", b64(e.account.error)},
            {"attempts", std::move(attempts)}};
  if (e.entry.task.options.retries) j["retries"] = *e.entry.task.options.retries;
  return j.dump() + "\n";
}

// The bytes of a base64 member, or nullopt when it is missing or not base64.
std::optional<std::string> bytes_of(const json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end() || !it->is_string()) return std::nullopt;
  return dead_letter_file::decode_base64(it->get_ref<const std::string&>());
}

template <class T>
bool number_of(const json& j, const char* name, T* out) {
  auto it = j.find(name);
  if (it == j.end() || !it->is_number_integer()) return false;
  // Within T: a signed value read as std::int64_t, an unsigned one as std::uint64_t.
  if constexpr (std::is_signed_v<T>) {
    const auto v = it->get<std::int64_t>();
    if (v < std::numeric_limits<T>::min() || v > std::numeric_limits<T>::max()) return false;
    *out = static_cast<T>(v);
  } else {
    if (it->is_number_unsigned() == false && it->get<std::int64_t>() < 0) return false;
    const auto v = it->get<std::uint64_t>();
    if (v > std::numeric_limits<T>::max()) return false;
    *out = static_cast<T>(v);
  }
  return true;
}

// One line as an end of `pool` and `consumer`, or why it is not one.
Result<UnwrittenEnd> end_of(const std::string& line, const std::string& pool,
                            const std::string& consumer) {
  const json j = json::parse(line, nullptr, false);
  if (!j.is_object()) return Status::invalid("not a JSON object");
  int version = 0;
  if (!number_of(j, "version", &version) || version != kVersion) {
    return Status::invalid("version: expected " + std::to_string(kVersion));
  }
  if (j.value("pool", json()) != pool || j.value("node", json()) != consumer) {
    return Status::invalid("of another pool or node");
  }
  UnwrittenEnd e;
  static const std::regex kEntryId("[0-9]{1,20}-[0-9]{1,20}");
  const json entry = j.value("entry", json());
  if (!entry.is_string() || !std::regex_match(entry.get_ref<const std::string&>(), kEntryId)) {
    return Status::invalid("entry: expected a stream entry id");
  }
  e.entry.entry_id = entry.get<std::string>();
  if (!number_of(j, "band", &e.entry.band) || e.entry.band < -1 || e.entry.band > 1) {
    return Status::invalid("band: expected -1, 0 or 1");
  }
  if (!number_of(j, "task_id", &e.entry.task_id) || e.entry.task_id < PoolKeys::kFirstId) {
    return Status::invalid("task_id: expected a cluster task id");
  }
  e.account.id = e.entry.task_id;
  auto type = bytes_of(j, "type_base64");
  if (!type) return Status::invalid("type_base64: expected base64");
  e.entry.task.type = *type;
  e.account.type = *type;
  if (j.contains("retries")) {
    std::uint32_t retries = 0;
    if (!number_of(j, "retries", &retries)) return Status::invalid("retries: out of range");
    e.entry.task.options.retries = retries;
  }
  const json release = j.value("release", json());
  if (!release.is_boolean()) return Status::invalid("release: expected true or false");
  e.release = release.get<bool>();
  if (j.contains("refused_base64")) {  // absent from a file an older poold kept
    auto refused = bytes_of(j, "refused_base64");
    if (!refused) return Status::invalid("refused_base64: expected base64");
    e.refused = std::move(*refused);
  }
  const auto state = enum_named(j.value("state", json()), TaskState::kScheduled);
  const auto reason = enum_named(j.value("reason", json()), DeadReason::kRejected);
  const auto cancel = enum_named(j.value("cancel_reason", json()), CancelReason::kShutdown);
  if (!state || !reason || !cancel) return Status::invalid("state or reason: unknown");
  // An end is terminal, or a failed attempt's retries_exhausted (the writer retries it).
  if (!e.release && !is_terminal(*state)) return Status::invalid("state: not an end");
  e.account.state = *state;
  e.account.reason = *reason;
  e.account.cancel_reason = *cancel;
  auto result = bytes_of(j, "result_base64");
  auto error = bytes_of(j, "error_base64");
  if (!result || !error) return Status::invalid("result_base64 or error_base64: expected base64");
  e.account.result = std::move(*result);
  e.account.error = std::move(*error);
  const json attempts = j.value("attempts", json());
  if (!attempts.is_array() || attempts.size() > kMaxAttempts) {
    return Status::invalid("attempts: expected an array of at most " +
                           std::to_string(kMaxAttempts));
  }
  for (const json& a : attempts) {
    Attempt at;
    const auto outcome = enum_named(a.value("outcome", json()), Outcome::kCancelled);
    auto a_error = bytes_of(a, "error_base64");
    auto trace = bytes_of(a, "backtrace_base64");
    if (!a.is_object() || !outcome || !a_error || !trace || !number_of(a, "number", &at.number) ||
        !number_of(a, "worker_pid", &at.worker_pid) ||
        !number_of(a, "started_ms", &at.started_ms) || !number_of(a, "ended_ms", &at.ended_ms)) {
      return Status::invalid("attempts: an attempt lacks a valid member");
    }
    at.outcome = *outcome;
    at.error = std::move(*a_error);
    at.backtrace = std::move(*trace);
    e.account.history.push_back(std::move(at));
  }
  return e;
}

// Held across append() and across take()'s read and unlink: in one poold, a reload's new
// feeder takes the file while a retiring feeder of the same pool (on its retire thread) may
// append to it; an end appended between the read and the unlink was removed unread.
Mutex& files_mutex() {
  static Mutex m;
  return m;
}

}  // namespace

std::string path_in(const std::string& dir, const std::string& pool) {
  return dir + "/redis-unwritten-ends-" + pool + ".jsonl";
}

Result<std::size_t> append(const std::string& path, const std::string& pool,
                           const std::string& consumer, const std::deque<UnwrittenEnd>& ends) {
  MutexLock lock(files_mutex());
  std::error_code ec;
  std::uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) size = 0;
  std::string text;
  std::size_t kept = 0;
  for (const UnwrittenEnd& e : ends) {
    std::string line = line_of(pool, consumer, e);
    if (size + text.size() + line.size() > kMaxFileBytes) break;
    text += line;
    ++kept;
  }
  if (kept == 0) return kept;
  auto fd = posix_call("open(" + path + ")", [&] {
    return ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  });
  if (!fd) return fd.status();
  UniqueFd file(*fd);
  for (std::string_view left = text; !left.empty();) {
    auto n = posix_call("write(" + path + ")",
                        [&] { return ::write(file.get(), left.data(), left.size()); });
    if (!n) return n.status();
    left.remove_prefix(static_cast<std::size_t>(*n));
  }
  SP_RETURN_IF_ERROR(
      posix_call("fsync(" + path + ")", [&] { return ::fsync(file.get()); }).status());
  const std::string dir = std::filesystem::path(path).parent_path().string();
  auto dfd = posix_call("open(" + dir + ")",
                        [&] { return ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); });
  if (!dfd) return dfd.status();
  UniqueFd d(*dfd);
  SP_RETURN_IF_ERROR(posix_call("fsync(" + dir + ")", [&] { return ::fsync(d.get()); }).status());
  return kept;
}

Result<ReadBack> read(const std::string& path, const std::string& pool,
                      const std::string& consumer) {
  std::error_code ec;
  const std::uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) {
    if (ec == std::errc::no_such_file_or_directory) {
      return Status::error(Code::kNotFound, path + ": none");
    }
    return Status::error(Code::kSystem, path + ": " + ec.message());
  }
  if (size > kMaxFileBytes) {
    return Status::error(Code::kTooLarge, path + ": " + std::to_string(size) + " bytes, over the " +
                                              std::to_string(kMaxFileBytes) + " an end file holds");
  }
  auto text = dead_letter_file::read_file(path);
  if (!text) return text.status();
  ReadBack out;
  std::size_t at = 0, line_no = 0;
  while (at < text->size()) {
    std::size_t end = text->find('\n', at);
    if (end == std::string::npos) end = text->size();  // a last line cut short: refused below
    const std::string line = text->substr(at, end - at);
    at = end + 1;
    ++line_no;
    if (line.empty()) continue;
    auto e = end_of(line, pool, consumer);
    if (e) {
      out.ends.push_back(std::move(e).value());
      continue;
    }
    if (out.refused++ == 0) {
      out.first_refusal = path + " line " + std::to_string(line_no) + ": " + e.status().message();
    }
  }
  return out;
}

Result<ReadBack> take(const std::string& path, const std::string& pool,
                      const std::string& consumer) {
  MutexLock lock(files_mutex());
  auto kept = read(path, pool, consumer);
  if (!kept) return kept;
  SP_RETURN_IF_ERROR(
      posix_call("unlink(" + path + ")", [&] { return ::unlink(path.c_str()); }).status());
  return kept;
}

}  // namespace sandpool::redis::unwritten_ends
