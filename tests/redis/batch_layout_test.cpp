// The batch-entry layout's packed formats (batch_layout.hpp): what is packed unpacks the same,
// and bytes that are truncated, oversized or garbled are refused, never misread.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include <sandpool/redis/batch_layout.hpp>

using namespace sandpool;
namespace batch = sandpool::redis::batch;

namespace {

std::vector<redis::StreamTask> some_tasks(std::size_t n) {
  std::vector<redis::StreamTask> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    out[i].type = i % 2 ? "echo" : "sleep";
    out[i].payload = std::string(i, static_cast<char>(i));  // binary, the first one empty
    if (i % 3 == 0) out[i].options.timeout = std::chrono::milliseconds(1000 + i);
    if (i % 4 == 0) out[i].options.retries = static_cast<std::uint32_t>(i);
    out[i].options.priority = static_cast<std::int32_t>(i) - 2;
    if (i % 5 == 0) out[i].options.key = "k" + std::to_string(i);
    if (i % 7 == 0) out[i].options.tenant = "t" + std::to_string(i);
  }
  return out;
}

batch::EndRecord an_end(std::uint32_t index) {
  batch::EndRecord e;
  e.index = index;
  e.finished_ms = 1765000000000 + index;
  e.attempts = 2;
  e.state = "dead_lettered";
  e.reason = "retries_exhausted";
  e.error = "boom";
  e.result = std::string("\0\1\2", 3);
  e.attempt_log = {"1 error 42 1 1", "2 error 42 2 1"};
  return e;
}

}  // namespace

TEST_CASE("a batch's tasks unpack as they were packed, options and binary payloads included") {
  const auto tasks = some_tasks(GENERATE(1, 7, 512));
  const std::string blob = batch::pack_tasks(tasks.data(), tasks.size()).value();
  const auto back = batch::unpack_tasks(blob, tasks.size()).value();
  REQUIRE(back.size() == tasks.size());
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    INFO(i);
    CHECK(back[i].type == tasks[i].type);
    CHECK(back[i].payload == tasks[i].payload);
    CHECK(back[i].options == tasks[i].options);
  }
}

TEST_CASE("a batch that cannot be packed is refused: none, too many, scheduled, keyed, untyped") {
  auto tasks = some_tasks(513);
  CHECK(batch::pack_tasks(tasks.data(), 0).status().code() == Code::kInvalidArgument);
  CHECK(batch::pack_tasks(tasks.data(), 513).status().code() == Code::kInvalidArgument);
  tasks[3].options.idempotency_key = "once";
  CHECK(batch::pack_tasks(tasks.data(), 4).status().code() == Code::kInvalidArgument);
  tasks[3].options.idempotency_key.clear();
  REQUIRE(tasks[3].options.set_not_before_ms(1765000000000));
  CHECK(batch::pack_tasks(tasks.data(), 4).status().code() == Code::kInvalidArgument);
  tasks[3].options.not_before.reset();
  tasks[2].type.clear();
  CHECK(batch::pack_tasks(tasks.data(), 4).status().code() == Code::kInvalidArgument);
}

TEST_CASE("packed tasks cut short anywhere are refused, not misread") {
  const auto tasks = some_tasks(5);
  const std::string blob = batch::pack_tasks(tasks.data(), tasks.size()).value();
  for (std::size_t cut = 0; cut < blob.size(); ++cut) {
    INFO(cut);
    CHECK(batch::unpack_tasks(std::string_view(blob).substr(0, cut), 5).status().code() ==
          Code::kProtocol);
  }
}

TEST_CASE("packed tasks with a wrong count, version, length or trailing bytes are refused") {
  const auto tasks = some_tasks(3);
  const std::string blob = batch::pack_tasks(tasks.data(), tasks.size()).value();
  CHECK(batch::unpack_tasks(blob, 4).status().code() == Code::kProtocol);  // n says 4
  std::string v2 = blob;
  v2[0] = 2;
  CHECK(batch::unpack_tasks(v2, 3).status().code() == Code::kProtocol);
  std::string huge = blob;  // the first task's length says 4 GiB - 1
  huge[3] = huge[4] = huge[5] = huge[6] = '\xff';
  CHECK(batch::unpack_tasks(huge, 3).status().code() == Code::kProtocol);
  std::string longer = blob;  // the first record one byte longer: its fields end inside it
  longer[3] = static_cast<char>(longer[3] + 1);
  CHECK(batch::unpack_tasks(longer, 3).status().code() == Code::kProtocol);
  CHECK(batch::unpack_tasks(blob + "x", 3).status().code() == Code::kProtocol);
  // The first record one byte longer, the byte inside it: every length agrees, but its fields
  // leave a byte over.
  std::string padded = blob;
  const std::size_t first_len = static_cast<unsigned char>(blob[3]);
  padded.insert(7 + first_len, 1, '\0');
  padded[3] = static_cast<char>(first_len + 1);
  CHECK(batch::unpack_tasks(padded, 3).status().code() == Code::kProtocol);
  std::string many(3, '\0');  // version 1, count 65535
  many[0] = 1;
  many[1] = many[2] = '\xff';
  CHECK(batch::unpack_tasks(many, 65535).status().code() == Code::kProtocol);
}

TEST_CASE("end records unpack as they were packed, appended one after another") {
  std::string ends;
  REQUIRE(batch::pack_end(an_end(0), ends).is_ok());
  batch::EndRecord moved;
  moved.index = 511;
  moved.kind = batch::EndRecord::Kind::kMoved;
  REQUIRE(batch::pack_end(moved, ends).is_ok());
  const auto back = batch::unpack_ends(ends, 512).value();
  REQUIRE(back.size() == 2);
  CHECK(back[0] == an_end(0));
  CHECK(back[1] == moved);
}

TEST_CASE("end records truncated, oversized, garbled or past the batch are refused") {
  std::string one;
  REQUIRE(batch::pack_end(an_end(3), one).is_ok());
  for (std::size_t cut = 1; cut < one.size(); ++cut) {
    INFO(cut);
    CHECK(batch::unpack_ends(std::string_view(one).substr(0, cut), 8).status().code() ==
          Code::kProtocol);
  }
  CHECK(batch::unpack_ends(one, 3).status().code() == Code::kProtocol);  // index 3 of 3
  // An index no batch can hold, whatever count the (hostile) batch hash claims: the record's
  // index field rewritten to 600 (found by fuzz_batch_layout: pack_end refused it again).
  std::string index600 = one;
  index600[5] = static_cast<char>(600 & 0xff);
  index600[6] = static_cast<char>(600 >> 8);
  CHECK(batch::unpack_ends(index600, 100000).status().code() == Code::kProtocol);
  std::string v9 = one;
  v9[4] = 9;
  CHECK(batch::unpack_ends(v9, 8).status().code() == Code::kProtocol);
  std::string kind = one;
  kind[7] = 7;
  CHECK(batch::unpack_ends(kind, 8).status().code() == Code::kProtocol);
  std::string huge = one;
  huge[0] = huge[1] = huge[2] = huge[3] = '\xff';
  CHECK(batch::unpack_ends(huge, 8).status().code() == Code::kProtocol);
  // The attempts' count (the record's last fixed field, before the two attempts) set to
  // 65535: more than the bytes left, refused before anything is made for them.
  const std::size_t count_at = one.size() - 2 * 4 - 2 * 14 - 2;
  std::string many = one;
  many[count_at] = many[count_at + 1] = '\xff';
  CHECK(batch::unpack_ends(many, 8).status().code() == Code::kProtocol);
  // A record over 64 KiB is not packed, and one that says it is is not read.
  batch::EndRecord big = an_end(1);
  big.result.assign(batch::kMaxEndBytes, 'r');
  std::string unpacked;
  CHECK(batch::pack_end(big, unpacked).code() == Code::kTooLarge);
  CHECK(unpacked.empty());
  batch::EndRecord near = an_end(1);
  near.result.assign(batch::kMaxEndBytes - 200, 'r');
  std::string over;
  REQUIRE(batch::pack_end(near, over).is_ok());
  CHECK(batch::unpack_ends(over, 8).is_ok());
  // 300 more bytes of result, both lengths told: a record whole and consistent, but too big.
  const auto put_u32 = [&](std::size_t at, std::uint32_t v) {
    for (int k = 0; k < 4; ++k) over[at + k] = static_cast<char>((v >> (8 * k)) & 0xff);
  };
  const std::size_t result_len_at = 4 + 1 + 2 + 1 + 8 + 4 + (1 + 13) + (1 + 17) + (4 + 4);
  over.insert(result_len_at + 4, 300, 'r');
  put_u32(0, static_cast<std::uint32_t>(over.size() - 4));
  put_u32(result_len_at, static_cast<std::uint32_t>(near.result.size() + 300));
  CHECK(batch::unpack_ends(over, 8).status().code() == Code::kProtocol);
  batch::EndRecord past = an_end(512);
  std::string out;
  CHECK(batch::pack_end(past, out).code() == Code::kInvalidArgument);
}
