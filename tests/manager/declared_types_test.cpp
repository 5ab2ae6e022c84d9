#include <catch2/catch.hpp>

#include "core/declared_types.hpp"

using sandpool::Code;
using sandpool::core::kMaxDeclaredTypes;
using sandpool::core::validate_declared_types;

TEST_CASE("declared task types: up to 64 of 1..128 printable bytes, no space, none twice") {
  CHECK(validate_declared_types({}, "p.so"));
  CHECK(validate_declared_types({"echo", "a.b-c_d:1", std::string(128, 'x')}, "p.so"));
  CHECK(validate_declared_types(std::vector<std::string>(1, "~!"), "p.so"));
  std::vector<std::string> many;
  for (std::size_t i = 0; i < kMaxDeclaredTypes; ++i) many.push_back("t" + std::to_string(i));
  CHECK(validate_declared_types(many, "p.so"));
  many.push_back("one more");
  const auto too_many = validate_declared_types(many, "p.so");
  REQUIRE_FALSE(too_many);
  CHECK(too_many.code() == Code::kPlugin);
  CHECK(too_many.message() == "plugin p.so declares 65 task types (at most 64)");
}

TEST_CASE("a refused declared type is named escaped, never raw") {
  auto [types, message] = GENERATE(table<std::vector<std::string>, std::string>({
      {{"ok", ""}, "plugin p.so declares task type 1 (\"\") of 0 bytes (1 to 128)"},
      {{std::string(129, 'y')},
       "plugin p.so declares task type 0 (\"" + std::string(40, 'y') +
           "...\") of 129 bytes (1 to 128)"},
      {{"e\x1b[31m"},
       "plugin p.so declares task type 0 (\"e\\x1b[31m\") with a byte that is not printable "
       "ASCII (spaces and control characters are refused)"},
      {{"a b"},
       "plugin p.so declares task type 0 (\"a\\x20b\") with a byte that is not "
       "printable ASCII (spaces and control characters are refused)"},
      {{"caf\xc3\xa9"},
       "plugin p.so declares task type 0 (\"caf\\xc3\\xa9\") with a byte that "
       "is not printable ASCII (spaces and control characters are refused)"},
      {{"x", "y", "x"}, "plugin p.so declares task type 2 (\"x\") twice"},
  }));
  const auto s = validate_declared_types(types, "p.so");
  REQUIRE_FALSE(s);
  CHECK(s.message() == message);
}
