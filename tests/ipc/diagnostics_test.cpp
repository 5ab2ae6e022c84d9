// The manager's reading of the workers' backtrace answers: complete only once every thread
// asked has answered, bounded and printable whatever the worker scribbled.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include <sandpool/ipc/diagnostics.hpp>

using namespace sandpool::ipc;

namespace {

void answer(DiagnosticArea& a, const std::string& text) {
  answer_backtrace(a, text.data(), text.size());
}

}  // namespace

TEST_CASE("a backtrace is complete once every signalled thread answered") {
  auto a = std::make_unique<DiagnosticArea>();
  CHECK(backtrace_generation(*a) == 0);  // never asked: a handler answers nothing
  CHECK_FALSE(take_backtrace(*a, BacktraceRead::kWhatArrived).has_value());

  request_backtrace(*a);
  const std::uint32_t first = backtrace_generation(*a);
  CHECK(first != 0);
  answer(*a, "thread 7 (task thread)\n#0 spin+0x1 (libhang.so)\n");  // before the count is set
  CHECK_FALSE(take_backtrace(*a).has_value());
  expect_backtraces(*a, 2);
  CHECK_FALSE(take_backtrace(*a).has_value());
  CHECK(take_backtrace(*a, BacktraceRead::kWhatArrived) ==
        "thread 7 (task thread)\n#0 spin+0x1 (libhang.so)\n(1 of 2 signalled threads answered)");
  answer(*a, "thread 9\n#0 park+0x2 (libhang.so)\n");
  CHECK(take_backtrace(*a) ==
        "thread 7 (task thread)\n#0 spin+0x1 (libhang.so)\nthread 9\n#0 park+0x2 (libhang.so)");

  request_backtrace(*a);  // a new request forgets the old answer
  CHECK(backtrace_generation(*a) != first);
  CHECK_FALSE(take_backtrace(*a, BacktraceRead::kWhatArrived).has_value());
}

TEST_CASE("answers past the area are cut, and the reader says so") {
  auto a = std::make_unique<DiagnosticArea>();
  request_backtrace(*a);
  expect_backtraces(*a, 6);
  const std::string section(kBacktraceBytes / 4 + 10, 'f');
  for (int i = 0; i < 6; ++i) answer(*a, section);
  auto text = take_backtrace(*a);
  REQUIRE(text.has_value());
  CHECK(text->rfind(std::string(kBacktraceBytes, 'f'), 0) == 0);
  CHECK(text->ends_with("(truncated: the threads wrote more than fits)"));
}

TEST_CASE("a hostile backtrace answer is bounded and made printable") {
  auto a = std::make_unique<DiagnosticArea>();
  request_backtrace(*a);
  std::string junk(kBacktraceBytes, 'x');
  junk[0] = '\x1b';
  junk[1] = '\xff';
  junk[2] = '\0';  // a reserved byte never written: dropped
  junk[3] = '\n';
  std::memcpy(a->backtrace, junk.data(), junk.size());
  a->backtrace_used.store(0xffffffffu);  // a length far past the area
  a->backtrace_expected.store(1);
  a->backtrace_answered.store(0xffffffffu);
  auto text = take_backtrace(*a);
  REQUIRE(text.has_value());
  CHECK(text->substr(0, 4) == "??\nx");
  CHECK(text->size() < kBacktraceBytes + 64);
  CHECK(std::all_of(text->begin(), text->end(),
                    [](char c) { return c == '\n' || (c >= 0x20 && c <= 0x7e); }));
}
