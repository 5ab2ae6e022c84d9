// The interned task types (pool/src/core/interned_types.hpp): each stored once for the
// process, named by records with a 4-byte index, bounded, read from any thread without a lock.
// The table is the process's: the test that fills it comes last (ctest runs each case in a
// process of its own anyway).
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "core/interned_types.hpp"
#include "core/task_record.hpp"

using sandpool::SubmitOptions;
using sandpool::core::intern_type;
using sandpool::core::interned_type;
using sandpool::core::kMaxInternedTypeBytes;
using sandpool::core::kMaxInternedTypes;
using sandpool::core::TaskPtr;
using sandpool::core::TaskRecord;
using sandpool::core::TaskType;
using sandpool::core::TaskTypes;

TEST_CASE("a type interned twice is stored once and reads back whole") {
  const std::string name = "resize.thumbnail";
  const auto first = intern_type(name);
  REQUIRE(first);
  const auto again = intern_type(std::string(name));  // another buffer, the same name
  REQUIRE(again);
  CHECK(*again == *first);
  CHECK(interned_type(*first) == name);
  CHECK(interned_type(*first).data() == interned_type(*again).data());
  CHECK(interned_type(*first).data() != name.data());  // a copy of its own, not the caller's
  const auto other = intern_type("resize.thumbnai");
  REQUIRE(other);
  CHECK(*other != *first);
}

TEST_CASE("an empty type, or one longer than a declared type may be, is not interned") {
  CHECK_FALSE(intern_type(""));
  CHECK(intern_type(std::string(kMaxInternedTypeBytes, 'x')));
  CHECK_FALSE(intern_type(std::string(kMaxInternedTypeBytes + 1, 'x')));
}

TEST_CASE("a record of an interned type is the same size whatever the type's length") {
  const std::string payload(64, 'p');
  const std::string type = GENERATE(std::string("sleep"), std::string("sleep.sixteen-ch"),
                                    std::string(kMaxInternedTypeBytes, 't'));
  const TaskPtr rec =
      TaskRecord::make(7, TaskType::interned(*intern_type(type)), payload, SubmitOptions{});
  CHECK(rec->type() == type);
  CHECK(rec->payload() == payload);
  // 216 bytes: jemalloc's 224-byte class (docs/performance.md, "The task type interned").
  CHECK(rec->allocation_size() == sizeof(TaskRecord) + payload.size());
  // Its type given by name instead is copied in front of the payload, as before.
  const TaskPtr inline_rec = TaskRecord::make(8, type, payload, SubmitOptions{});
  CHECK(inline_rec->type() == type);
  CHECK(inline_rec->payload() == payload);
  CHECK(inline_rec->allocation_size() == sizeof(TaskRecord) + type.size() + payload.size());
}

TEST_CASE("a record of an interned type keeps a payload too large to be inline apart") {
  const std::string payload(TaskRecord::kInlinePayloadMax + 1, 'q');
  const TaskPtr rec = TaskRecord::make(9, TaskType::interned(*intern_type("sleep.sixteen-ch")),
                                       payload, SubmitOptions{});
  CHECK(rec->type() == "sleep.sixteen-ch");
  CHECK(rec->payload() == payload);
  CHECK(rec->allocation_size() == sizeof(TaskRecord) + sizeof(std::string));
}

TEST_CASE("a pool's types find what it serves, interned, and nothing else") {
  const TaskTypes types({"echo", "email.send-batch"});
  CHECK(types.names() == std::vector<std::string>{"echo", "email.send-batch"});
  const auto echo = types.find("echo");
  REQUIRE(echo);
  REQUIRE(echo->index());
  CHECK(echo->name() == "echo");
  const auto email = types.find("email.send-batch");
  REQUIRE(email);
  REQUIRE(email->index());
  CHECK(*email->index() == *intern_type("email.send-batch"));
  CHECK_FALSE(types.find("ech"));
  CHECK_FALSE(types.find("echo "));
  CHECK_FALSE(types.find(""));
  CHECK_FALSE(TaskTypes().find("echo"));
}

TEST_CASE("a record names its type after its pool's types are gone") {
  TaskPtr rec;
  {
    const TaskTypes types({"gone.with-its-pool"});
    rec = TaskRecord::make(1, *types.find("gone.with-its-pool"), "x", SubmitOptions{});
  }
  CHECK(rec->type() == "gone.with-its-pool");
}

TEST_CASE("submitters on many threads intern the same types once and read them without a lock") {
  constexpr int kThreads = 4;
  constexpr int kRecords = 2000;
  const std::vector<std::string> shared = {"shared.type-one", "shared.type-two",
                                           "shared.type-three"};
  std::atomic<int> go{0};
  std::vector<std::vector<std::uint32_t>> seen(kThreads);
  std::vector<int> wrong(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      go.fetch_add(1);
      while (go.load() < kThreads) {
      }
      // Each thread makes a pool's types of the shared names and one of its own, as pools
      // starting at once do, then submits records of them and reads their types back.
      std::vector<std::string> names = shared;
      names.push_back("own.type-of-thread-" + std::to_string(t));
      const TaskTypes types(names);
      for (const std::string& n : shared) seen[t].push_back(*types.find(n)->index());
      for (int i = 0; i < kRecords; ++i) {
        const std::string& n = names[static_cast<std::size_t>(i) % names.size()];
        const TaskPtr rec = TaskRecord::make(static_cast<std::uint64_t>(i), *types.find(n),
                                             std::string(64, 'p'), SubmitOptions{});
        if (rec->type() != n || rec->payload().size() != 64) ++wrong[t];
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    CHECK(wrong[t] == 0);
    CHECK(seen[t] == seen[0]);  // one index per name, whichever thread interned it first
  }
  for (std::size_t i = 0; i < shared.size(); ++i) CHECK(interned_type(seen[0][i]) == shared[i]);
}

TEST_CASE("a full table interns no more, and a record keeps its type inline then") {
  const auto kept = intern_type("interned.before-full");
  REQUIRE(kept);
  // Distinct names until the table refuses one: at most kMaxInternedTypes in all.
  std::uint32_t added = 0;
  while (intern_type("bound.filler-" + std::to_string(added))) {
    ++added;
    REQUIRE(added <= kMaxInternedTypes);
  }
  CHECK_FALSE(intern_type("refused.when-full"));
  CHECK(intern_type("interned.before-full") == kept);  // the table answers what it holds
  // A pool started now serves the new type all the same: its records carry it inline.
  const TaskTypes types({"interned.before-full", "refused.when-full"});
  const auto late = types.find("refused.when-full");
  REQUIRE(late);
  CHECK_FALSE(late->index());
  const TaskPtr rec = TaskRecord::make(1, *late, std::string(64, 'p'), SubmitOptions{});
  CHECK(rec->type() == "refused.when-full");
  CHECK(rec->payload() == std::string(64, 'p'));
  CHECK(rec->allocation_size() == sizeof(TaskRecord) + 17 + 64);
  CHECK(types.find("interned.before-full")->index() == kept);
}
