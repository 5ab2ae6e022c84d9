// libFuzzer target: a schedule's cron expression (schedule/src/schedule/cron_expr.cpp), as a config
// file or a control request gives it, and the next-slot search from an arbitrary instant in
// UTC and in the process zone (whatever TZ the fuzzer runs with).
//
// Input layout: [0..7] the instant to search from, u64 little-endian (taken modulo 2^40 s,
// beyond year 9000 as well, which the search must refuse), [8..] the expression's text.
//
// Built twice (fuzz/CMakeLists.txt): as the fuzzer, and with SANDPOOL_FUZZ_SEED_MAIN as a
// small program that writes the seed corpus into the directory it is given.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <sandpool/schedule/cron.hpp>

namespace sandpool {
namespace {

void require(bool ok) {
  if (!ok) __builtin_trap();
}

void check_next(const CronExpr& e, std::int64_t after, const TimeZone& zone) {
  const auto next = e.next_after(after, zone);
  if (!next) return;
  require(*next > after);
  if (e.interval() != 0) {
    require(*next - after <= e.interval());
    require(*next % e.interval() == 0);  // anchored at the epoch
    return;
  }
  // A cron slot fires on a whole minute of the zone: the matching one, or (in a gap) the
  // first minute after it, so its seconds are zero wherever the zone's offset is whole minutes.
  if (zone.utc_offset(*next) % 60 == 0) require(zone.civil(*next).second == 0);
  if (&zone == &utc_zone()) {
    require(e.matches(zone.civil(*next)));
    // Nothing fires in between: the slot before `next` is at or before `after` (asked only
    // within next_after's range: a slot found from just before its end may lie past it).
    if (*next - 1 <= CronExpr::kLatestAfter) {
      const auto again = e.next_after(*next - 1, zone);
      require(again && *again == *next);
    }
  }
}

void run(std::string_view in) {
  if (in.size() < 8) return;
  std::uint64_t raw = 0;
  for (int i = 0; i < 8; ++i) raw |= std::uint64_t{static_cast<std::uint8_t>(in[i])} << (8 * i);
  const auto after = static_cast<std::int64_t>(raw % (std::uint64_t{1} << 40));
  in.remove_prefix(8);
  const auto parsed = CronExpr::parse(in);
  if (!parsed) {
    const Status st = parsed.status();
    const std::string& msg = st.message();
    require(st.code() == Code::kInvalidArgument);
    require(!msg.empty() && msg.size() < 400);
    return;
  }
  require(parsed->text().size() <= in.size());
  // The kept text parses to the same expression.
  const auto again = CronExpr::parse(parsed->text());
  require(again.is_ok() && again->interval() == parsed->interval());
  check_next(*parsed, after, utc_zone());
  check_next(*parsed, after, local_zone());
  if (again->interval() == 0) {
    require(again->next_after(after, utc_zone()) == parsed->next_after(after, utc_zone()));
  }
}

}  // namespace
}  // namespace sandpool

#ifndef SANDPOOL_FUZZ_SEED_MAIN

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  sandpool::run(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}

#else  // the seed generator

#include <utility>

#include "seed_corpus.hpp"

namespace sandpool {
namespace {

std::string seed(std::uint64_t after, std::string_view text) {
  std::string s;
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((after >> (8 * i)) & 0xff));
  s += text;
  return s;
}

int write_seeds(const std::string& dir) {
  const std::uint64_t spring = 1774746000;  // 2026-03-29T01:00:00Z, Berlin's gap end
  const std::uint64_t autumn = 1792888200;  // 2026-10-25T00:30:00Z, Berlin's repeated 02:30
  const std::pair<const char*, std::string> seeds[] = {
      {"every_minute", seed(spring - 3600, "*/1 * * * *")},
      {"lists_ranges_steps", seed(autumn, "5,10-20/5,59 8-18/2 1,15 */3 mon-fri")},
      {"names", seed(spring, "0 12 * JAN-mar,Dec sun,sat")},
      {"vixie_or", seed(autumn, "0 0 13 * fri")},
      {"leap_day", seed(spring, "0 0 29 feb *")},
      {"gap_slot", seed(spring - 7200, "30 2 * * *")},
      {"macro", seed(autumn, "@weekly")},
      {"every", seed(spring, "@every 1h30m")},
      {"every_bad", seed(spring, "@every 30m1h")},
      {"bad_range", seed(0, "5-2 * * * *")},
      {"too_many", seed(0, "0 0 * * * *")},
      {"never", seed(0, "0 0 31 2 *")},
      {"far_future", seed(std::uint64_t{1} << 39, "* * * * *")},
  };
  bool ok = true;
  for (const auto& [name, bytes] : seeds) {
    run(bytes);  // the seeds themselves must keep every property
    ok = ok && fuzz::write_seed(dir + "/" + name, bytes);
  }
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace sandpool

int main(int argc, char** argv) {
  return sandpool::fuzz::seed_main(argc, argv, "fuzz_cron", sandpool::write_seeds);
}

#endif
