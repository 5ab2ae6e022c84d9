// The spill-file format (dead_letter_file.hpp): every field round-trips byte for byte, a bad
// line is named by its number, base64 is RFC 4648's; and which SQLite failures keep a letter
// pending (write_failure.hpp).
#include <sqlite3.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <limits>

#include <nlohmann/json.hpp>
#include <sandpool/store/dead_letter_file.hpp>

#include "dead_letter_test_support.hpp"
#include "retry/write_failure.hpp"

using namespace sandpool;
using namespace sandpool::testing;
namespace dlf = sandpool::dead_letter_file;

namespace {

std::string all_bytes() {
  std::string s;
  for (int i = 0; i < 256; ++i) s += static_cast<char>(i);
  return s;
}

// Letters that stress each field: binary payloads, text that is not UTF-8, extremes.
std::vector<DeadLetter> odd_letters() {
  std::vector<DeadLetter> v;
  DeadLetter a = letter(std::numeric_limits<std::uint64_t>::max(), "pool\xffname", "ty\xc3\x28pe",
                        DeadReason::kPoolRemoved, -5);
  a.payload = all_bytes();
  a.task.error = "line one\nline \"two\"\t\x01 and \xed\xa0\x80 (a surrogate)";
  a.options.timeout = std::chrono::milliseconds(0);
  a.options.retries = std::numeric_limits<std::uint32_t>::max();
  a.options.priority = std::numeric_limits<std::int32_t>::min();
  a.options.key = "k\xf8y";
  a.task.history = {
      {1, Outcome::kSandboxViolation, "socket() \xff", -1, std::numeric_limits<std::int64_t>::min(),
       std::numeric_limits<std::int64_t>::max(), "#0 \xfe"},
      {7, Outcome::kCancelled, "", 0, 0, 0}};
  v.push_back(a);
  DeadLetter b = letter(0, "", "", DeadReason::kPermanent, 0);  // empty everything
  b.payload.clear();
  b.task.error.clear();
  v.push_back(b);
  DeadLetter c =
      letter(12, "images", "resize \xe2\x9c\x93 utf-8", DeadReason::kExpired, 1700000000123);
  c.payload = std::string(1, '\0');
  v.push_back(c);
  return v;
}

}  // namespace

TEST_CASE("every field of a letter survives the spill-file line byte for byte", "[dead_letters]") {
  std::string text;
  for (const DeadLetter& l : odd_letters()) {
    const std::string line = dlf::to_line(l);
    CHECK(line.back() == '\n');
    CHECK(line.find('\n') == line.size() - 1);  // one line each
    text += line;
  }
  auto parsed = dlf::parse(text, "t.jsonl");
  INFO(parsed.status().to_string());
  REQUIRE(parsed.is_ok());
  const auto want = odd_letters();
  REQUIRE(parsed->size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    const DeadLetter& g = (*parsed)[i];
    const DeadLetter& w = want[i];
    INFO("letter " << i);
    CHECK(g.letter_id == 0);
    CHECK(g.task.state == TaskState::kDeadLettered);
    CHECK(g.pool == w.pool);
    CHECK(g.task.id == w.task.id);
    CHECK(g.task.type == w.task.type);
    CHECK(g.task.reason == w.task.reason);
    CHECK(g.task.error == w.task.error);
    CHECK(g.payload == w.payload);
    CHECK(g.options.timeout == w.options.timeout);
    CHECK(g.options.retries == w.options.retries);
    CHECK(g.options.priority == w.options.priority);
    CHECK(g.options.key == w.options.key);
    CHECK(g.dead_lettered_ms == w.dead_lettered_ms);
    REQUIRE(g.task.history.size() == w.task.history.size());
    for (std::size_t k = 0; k < w.task.history.size(); ++k) {
      CHECK(g.task.history[k].number == w.task.history[k].number);
      CHECK(g.task.history[k].outcome == w.task.history[k].outcome);
      CHECK(g.task.history[k].error == w.task.history[k].error);
      CHECK(g.task.history[k].worker_pid == w.task.history[k].worker_pid);
      CHECK(g.task.history[k].started_ms == w.task.history[k].started_ms);
      CHECK(g.task.history[k].ended_ms == w.task.history[k].ended_ms);
      CHECK(g.task.history[k].backtrace == w.task.history[k].backtrace);
    }
  }
}

TEST_CASE("a spill line is plain JSON a person can read: text as strings, bytes as base64",
          "[dead_letters]") {
  DeadLetter l = letter(42, "images", "resize", DeadReason::kRetriesExhausted, 1700000000123);
  l.payload = "hi";
  l.task.error = std::string("bad \xff");
  l.task.history = {{1, Outcome::kError, "nope", 77, 1, 2}};
  const auto j = nlohmann::json::parse(dlf::to_line(l));
  CHECK(j["version"] == 1);
  CHECK(j["pool"] == "images");
  CHECK(j["task_id"] == 42);
  CHECK(j["type"] == "resize");
  CHECK(j["reason"] == "retries_exhausted");
  CHECK(j["error"] == nlohmann::json{{"base64", dlf::encode_base64("bad \xff")}});
  CHECK(j["dead_lettered_ms"] == 1700000000123);
  CHECK(j["payload_base64"] == "aGk=");
  CHECK(j["options"] == nlohmann::json{{"priority", 0}, {"key", ""}});
  CHECK(j["attempts"][0]["outcome"] == "error");
  CHECK(j["attempts"][0]["worker_pid"] == 77);
}

TEST_CASE("base64 follows RFC 4648 and refuses what is not base64", "[dead_letters]") {
  auto [plain, encoded] = GENERATE(table<std::string, std::string>({{"", ""},
                                                                    {"f", "Zg=="},
                                                                    {"fo", "Zm8="},
                                                                    {"foo", "Zm9v"},
                                                                    {"foob", "Zm9vYg=="},
                                                                    {"fooba", "Zm9vYmE="},
                                                                    {"foobar", "Zm9vYmFy"}}));
  CHECK(dlf::encode_base64(plain) == encoded);
  CHECK(dlf::decode_base64(encoded) == plain);
  CHECK(dlf::decode_base64(dlf::encode_base64(all_bytes())) == all_bytes());
  for (const char* bad : {"Zg=", "Zm9v!A==", "Z===", "Zg==Zg==", "Zm=v", "Zm 9v"}) {
    INFO(bad);
    CHECK_FALSE(dlf::decode_base64(bad).has_value());
  }
}

TEST_CASE("a malformed line is refused with its number and what is wrong, and nothing parses",
          "[dead_letters]") {
  const std::string good = dlf::to_line(letter(1));
  auto good_json = nlohmann::json::parse(good);
  auto with = [&](const std::string& key, const nlohmann::json& value) {
    auto j = good_json;
    if (value.is_null()) {
      j.erase(key);
    } else {
      j[key] = value;
    }
    return j.dump();
  };
  auto [line, says] = GENERATE_REF(table<std::string, std::string>({
      {"{\"version\": 1, ", "parse error"},
      {"[1, 2]", "not a JSON object"},
      {with("pool", nullptr), "missing \"pool\""},
      {with("version", 2), "format version 2"},
      {with("reason", "bored"), "\"reason\": unknown value 'bored'"},
      {with("task_id", -1), "\"task_id\": an integer"},
      {with("payload_base64", "***"), "\"payload_base64\": not base64"},
      {with("attempts", "none"), "\"attempts\": an array"},
      {with("options", nullptr), "\"options\": an object"},
      {with("error", nlohmann::json{{"base64", 3}}), "\"error\": a string or"},
  }));
  INFO(line);
  // Line 3 of the file (a blank line 2 is skipped), counted from first_line 10: line 12.
  const std::string text = good + "\n" + line + "\n" + good;
  auto parsed = dlf::parse(text, "spill.jsonl", 10);
  REQUIRE_FALSE(parsed.is_ok());
  CHECK(parsed.status().code() == Code::kInvalidArgument);
  CHECK_THAT(parsed.status().message(),
             Catch::StartsWith("spill.jsonl line 12: ") && Catch::Contains(says));
}

TEST_CASE("blank lines and a missing final newline are fine", "[dead_letters]") {
  std::string text = "\n" + dlf::to_line(letter(1)) + "  \n\n" + dlf::to_line(letter(2));
  text.pop_back();  // no final newline
  auto parsed = dlf::parse(text, "x");
  REQUIRE(parsed.is_ok());
  CHECK(task_ids(*parsed) == std::vector<std::uint64_t>{1, 2});
  CHECK(dlf::parse("", "x")->empty());
}

TEST_CASE("a spill file is new, 0600, named by its UTC time, and never overwrites another",
          "[dead_letters]") {
  TempDir dir;
  const DeadLetter one = letter(1), two = letter(2);
  const std::int64_t at = 1700000000123;  // 2023-11-14 22:13:20.123 UTC
  auto first = dlf::write_spill(dir.path, {&one}, at);
  REQUIRE(first.is_ok());
  CHECK(*first == dir.path + "/unwritten-dead-letters-20231114T221320.123Z.jsonl");
  auto second = dlf::write_spill(dir.path, {&one, &two}, at);
  REQUIRE(second.is_ok());
  CHECK(*second == dir.path + "/unwritten-dead-letters-20231114T221320.123Z-2.jsonl");
  struct stat st {};
  REQUIRE(::stat(second->c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);
  auto text = dlf::read_file(*first);
  REQUIRE(text.is_ok());
  CHECK(task_ids(*dlf::parse(*text, *first)) == std::vector<std::uint64_t>{1});
  text = dlf::read_file(*second);
  REQUIRE(text.is_ok());
  CHECK(task_ids(*dlf::parse(*text, *second)) == std::vector<std::uint64_t>{1, 2});
  auto nowhere = dlf::write_spill(dir.path + "/missing", {&one}, at);
  CHECK(nowhere.status().code() == Code::kSystem);
}

TEST_CASE("only the letter's own faults spill it, the database's conditions keep it pending",
          "[dead_letters]") {
  auto [rc, kind] = GENERATE(table<int, WriteFailure>({
      {SQLITE_BUSY, WriteFailure::kCondition},
      {SQLITE_LOCKED, WriteFailure::kCondition},
      {SQLITE_FULL, WriteFailure::kCondition},
      {SQLITE_IOERR_WRITE, WriteFailure::kCondition},
      {SQLITE_IOERR_FSYNC, WriteFailure::kCondition},
      {SQLITE_READONLY, WriteFailure::kCondition},
      {SQLITE_READONLY_DBMOVED, WriteFailure::kCondition},
      {SQLITE_CORRUPT, WriteFailure::kCondition},
      {SQLITE_NOTADB, WriteFailure::kCondition},
      {SQLITE_CANTOPEN, WriteFailure::kCondition},
      {SQLITE_NOMEM, WriteFailure::kCondition},
      {SQLITE_PROTOCOL, WriteFailure::kCondition},
      {SQLITE_PERM, WriteFailure::kCondition},
      {SQLITE_TOOBIG, WriteFailure::kLetter},
      {SQLITE_CONSTRAINT, WriteFailure::kLetter},
      {SQLITE_CONSTRAINT_TRIGGER, WriteFailure::kLetter},
      {SQLITE_MISMATCH, WriteFailure::kLetter},
      {SQLITE_RANGE, WriteFailure::kLetter},
      {SQLITE_ERROR, WriteFailure::kUnclear},
      {SQLITE_INTERNAL, WriteFailure::kUnclear},
      {SQLITE_MISUSE, WriteFailure::kUnclear},
  }));
  INFO("sqlite code " << rc);
  CHECK(classify_write_failure(rc) == kind);
}
