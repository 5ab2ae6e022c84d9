// The bench report's value format (bench/report.cpp): every figure a line `GROUP METRIC VALUE
// UNIT` that a reader and the tests parse back, so a value must never come out in exponent form.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "report.hpp"

using sandpool::bench::format_value;

TEST_CASE("the bench writes a figure near a thousand as a whole number, not 1e+03") {
  CHECK(format_value(999.7) == "1000");
  CHECK(format_value(999.4) == "999");
  CHECK(format_value(-999.7) == "-1000");
  CHECK(format_value(1000.0) == "1000");
  CHECK(format_value(123456.6) == "123457");
}

TEST_CASE("the bench keeps three significant digits below a hundred") {
  CHECK(format_value(12.345) == "12.3");
  CHECK(format_value(0.5) == "0.5");
  CHECK(format_value(99.94) == "99.9");
  CHECK(format_value(99.96) == "100");
  CHECK(format_value(7.0) == "7");
  CHECK(format_value(std::nan("")) == "nan");
}
