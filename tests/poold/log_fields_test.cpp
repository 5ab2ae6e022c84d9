#include "poold/log_fields.hpp"

#include <catch2/catch.hpp>

using sandpool::poold::LogField;
using sandpool::poold::parse_log_fields;

namespace {

LogField str(std::string k, std::string v) { return {std::move(k), std::move(v), false}; }
LogField num(std::string k, std::string v) { return {std::move(k), std::move(v), true}; }

}  // namespace

TEST_CASE("key=value words are fields, in order, other words are text") {
  using Fields = std::vector<LogField>;
  auto [message, expected] = GENERATE(table<std::string, Fields>({
      {"worker started", {}},
      {"worker pid=42 exited", {num("pid", "42")}},
      {"pool=default pid=42", {str("pool", "default"), num("pid", "42")}},
      {"reason=\"out of memory\" n=-3", {str("reason", "out of memory"), num("n", "-3")}},
      {R"(said="a \"quoted\" \\ word")", {str("said", R"(a "quoted" \ word)")}},
      {"empty= next=1", {str("empty", ""), num("next", "1")}},
      {"url=http://h/?a=b", {str("url", "http://h/?a=b")}},
      {"see http://h/?a=b", {}},
      {"1x=2 -k=3 a-b=4", {}},
      {"net.addr=127.0.0.1:9100", {str("net.addr", "127.0.0.1:9100")}},
      {"line1\nkey=v\tk2=w", {str("key", "v"), str("k2", "w")}},
      {"bad=\"unterminated rest", {}},
      {"zero=0 padded=007 plus=+1 big=99999999999999999999 neg0=-0 f=1.5",
       {num("zero", "0"), str("padded", "007"), str("plus", "+1"),
        str("big", "99999999999999999999"), str("neg0", "-0"), str("f", "1.5")}},
  }));
  INFO(message);
  CHECK(parse_log_fields(message) == expected);
}
