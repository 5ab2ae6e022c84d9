// The manager's reading of the worker's backtrace answer: only a complete one, bounded and
// printable whatever the worker scribbled.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <memory>

#include <sandpool/ipc/diagnostics.hpp>

using namespace sandpool::ipc;

namespace {

void answer(DiagnosticArea& a, const std::string& text, std::uint32_t len) {
  std::memcpy(a.backtrace, text.data(), std::min(text.size(), kBacktraceBytes));
  a.backtrace_len.store(len);
  a.backtrace_state.store(static_cast<std::uint32_t>(BacktraceState::kDone));
}

}  // namespace

TEST_CASE("a backtrace is only taken once the worker marked it done") {
  auto a = std::make_unique<DiagnosticArea>();
  CHECK_FALSE(take_backtrace(*a).has_value());
  request_backtrace(*a);
  CHECK(a->backtrace_state.load() == static_cast<std::uint32_t>(BacktraceState::kRequested));
  CHECK_FALSE(take_backtrace(*a).has_value());
  a->backtrace_state.store(static_cast<std::uint32_t>(BacktraceState::kWriting));
  CHECK_FALSE(take_backtrace(*a).has_value());
  answer(*a, "#0 spin+0x1 (libhang.so)\n", 25);
  CHECK(take_backtrace(*a) == "#0 spin+0x1 (libhang.so)");
  request_backtrace(*a);  // a new request forgets the old answer
  CHECK_FALSE(take_backtrace(*a).has_value());
}

TEST_CASE("a hostile backtrace answer is bounded and made printable") {
  auto a = std::make_unique<DiagnosticArea>();
  std::string junk(kBacktraceBytes, 'x');
  junk[0] = '\x1b';
  junk[1] = '\xff';
  junk[2] = '\0';
  junk[3] = '\n';
  answer(*a, junk, 0xffffffffu);  // a length far past the area
  auto text = take_backtrace(*a);
  REQUIRE(text.has_value());
  CHECK(text->size() == kBacktraceBytes);
  CHECK(text->substr(0, 5) == "???\nx");
  CHECK(std::all_of(text->begin(), text->end(),
                    [](char c) { return c == '\n' || (c >= 0x20 && c <= 0x7e); }));
}
