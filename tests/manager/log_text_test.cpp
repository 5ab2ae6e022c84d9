// log_text(): what a worker or a client wrote, escaped and capped for one log line.
#include <catch2/catch.hpp>

#include <string>

#include <sandpool/base/log_text.hpp>

using sandpool::kMaxLogText;
using sandpool::log_text;

TEST_CASE("printable ASCII and well-formed UTF-8 reach the log unchanged") {
  CHECK(log_text("task 7 done: 42 rows") == "task 7 done: 42 rows");
  const std::string utf8 = "h\xc3\xa9llo \xe2\x80\x94 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x8e\x89";
  CHECK(log_text(utf8) == utf8);
  CHECK(log_text("") == "");
}

TEST_CASE("a terminal escape sequence is shown, not sent: ESC becomes backslash x1b") {
  CHECK(log_text("\x1b[2J\x1b]0;owned\x07") == "\\x1b[2J\\x1b]0;owned\\x07");
  CHECK(log_text(std::string("a\0b", 3)) == "a\\x00b");
  CHECK(log_text("del\x7f") == "del\\x7f");
}

TEST_CASE("a newline cannot forge the next log line, and tabs and returns are spelled out") {
  const std::string forged = "ok\n2030-01-01 00:00:00 [critical] poold: fake\r\tx";
  const std::string out = log_text(forged);
  CHECK(out == "ok\\n2030-01-01 00:00:00 [critical] poold: fake\\r\\tx");
  CHECK(out.find('\n') == std::string::npos);
}

TEST_CASE("a backslash is doubled, so every escape in the log stands for an input byte") {
  CHECK(log_text("C:\\x1b") == "C:\\\\x1b");
  CHECK(log_text("\\") == "\\\\");
}

TEST_CASE("C1 controls and bytes that are not UTF-8 are escaped byte by byte") {
  using Case = std::pair<std::string, std::string>;
  const Case c = GENERATE(Case{"\xc2\x9b"
                               "31m",
                               "\\xc2\\x9b31m"},                             // CSI as U+009B
                          Case{"\xc2\x85", "\\xc2\\x85"},                    // NEL
                          Case{"\xff", "\\xff"},                             // never UTF-8
                          Case{"\xe2\x82", "\\xe2\\x82"},                    // cut short
                          Case{"\xc0\xaf", "\\xc0\\xaf"},                    // overlong '/'
                          Case{"\xe0\x80\xaf", "\\xe0\\x80\\xaf"},           // overlong
                          Case{"\xed\xa0\x80", "\\xed\\xa0\\x80"},           // a surrogate
                          Case{"\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80"},  // past U+10FFFF
                          Case{"\x80x", "\\x80x"});                          // a lone continuation
  CHECK(log_text(c.first) == c.second);
  CHECK(log_text("\xc2\xa0") == "\xc2\xa0");  // U+00A0, just past the C1 range, passes
}

TEST_CASE("a long text is cut to the cap and marked, and a text at the cap is not") {
  const std::string at_cap(kMaxLogText, 'a');
  CHECK(log_text(at_cap) == at_cap);
  const std::string out = log_text(std::string(10 * kMaxLogText, 'y'));
  CHECK(out.size() == kMaxLogText);
  CHECK(out.ends_with(" [truncated]"));
  CHECK(log_text("0123456789abcdefghij", 16) == "0123 [truncated]");
}

TEST_CASE("the cut never splits an escape or a character") {
  const std::string escapes = log_text(std::string(3000, '\x1b'), 100);
  REQUIRE(escapes.ends_with(" [truncated]"));
  const std::string kept = escapes.substr(0, escapes.size() - 12);
  CHECK(kept.size() % 4 == 0);
  CHECK(kept.size() > 100 - 12 - 4);
  for (std::size_t i = 0; i < kept.size(); i += 4) CHECK(kept.substr(i, 4) == "\\x1b");

  std::string han;
  for (int i = 0; i < 100; ++i) han += "\xe6\x97\xa5";
  const std::string cut = log_text(han, 50);
  REQUIRE(cut.ends_with(" [truncated]"));
  CHECK((cut.size() - 12) % 3 == 0);
  CHECK(log_text(cut.substr(0, cut.size() - 12)) == cut.substr(0, cut.size() - 12));
}
