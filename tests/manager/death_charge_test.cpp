// Which task a worker's death is charged to (core/death_charge.hpp): a table of rings and
// kills, decided from the pool's own records only.
#include <catch2/catch.hpp>

#include <optional>
#include <vector>

#include "core/death_charge.hpp"

using sandpool::core::charged_entry;
using sandpool::core::RingEntry;

namespace {

struct Row {
  const char* what;
  std::vector<RingEntry> ring;
  std::uint64_t killed_for;
  std::optional<std::size_t> charged;
};

}  // namespace

TEST_CASE("a worker's death is charged to the task the pool's own records name") {
  const Row row = GENERATE(values<Row>({
      {"a crash with an empty ring charges nobody", {}, 0, std::nullopt},
      {"a crash charges the front of the ring", {{7, false}, {8, false}, {9, false}}, 0, 0},
      {"a crash whose front was withdrawn charges nobody",
       {{7, true}, {8, false}},
       0,
       std::nullopt},
      {"a kill for a task charges that task, wherever it sits",
       {{7, false}, {8, false}, {9, false}},
       9,
       2},
      {"a kill for the front charges the front", {{7, false}, {8, false}}, 7, 0},
      {"a kill for a task that answered meanwhile charges nobody",
       {{8, false}, {9, false}},
       7,
       std::nullopt},
      {"a kill for a withdrawn task that kept running charges nobody",
       {{7, true}, {8, false}},
       7,
       std::nullopt},
      {"a kill for a task with an empty ring charges nobody", {}, 7, std::nullopt},
  }));
  INFO(row.what);
  CHECK(charged_entry(row.ring, row.killed_for) == row.charged);
}
