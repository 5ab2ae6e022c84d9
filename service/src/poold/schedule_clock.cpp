#include <sandpool/service/schedule_clock.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cctype>

#include <sandpool/base/posix_call.hpp>
#include <sandpool/base/unique_fd.hpp>
#include <sandpool/base/wall_clock.hpp>

namespace sandpool::poold {

std::optional<std::int64_t> parse_clock_offset(const std::string& text) {
  std::size_t i = 0;
  auto blank = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  while (i < text.size() && blank(text[i])) ++i;
  bool negative = false;
  if (i < text.size() && (text[i] == '-' || text[i] == '+')) negative = text[i++] == '-';
  std::int64_t v = 0;
  std::size_t digits = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])) && digits < 11) {
    v = v * 10 + (text[i++] - '0');
    ++digits;
  }
  while (i < text.size() && blank(text[i])) ++i;
  if (digits == 0 || digits > 10 || i != text.size()) return std::nullopt;
  if (v > 10LL * 366 * 86400) return std::nullopt;
  return negative ? -v : v;
}

std::int64_t ScheduleWallClock::now_ms() const {
  const std::int64_t now = wall_clock_ms();
  if (offset_file_.empty()) return now;
  // Bounded read: a test's file of a few bytes; anything longer is no offset.
  UniqueFd fd(::open(offset_file_.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) return now;
  char buf[64];
  auto n = posix_call("read", [&] { return ::read(fd.get(), buf, sizeof buf); });
  if (!n || *n <= 0 || static_cast<std::size_t>(*n) >= sizeof buf) return now;
  const auto offset = parse_clock_offset(std::string(buf, static_cast<std::size_t>(*n)));
  return offset ? now + *offset * 1000 : now;
}

}  // namespace sandpool::poold
