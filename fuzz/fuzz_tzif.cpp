// libFuzzer target: a named zone's TZif file (schedule/src/schedule/tzif.cpp) and the POSIX TZ
// rule of its footer (posix_tz.cpp), as a hostile file under the zone root would hold them,
// and the offsets and DST resolution a schedule asks of what parsed.
//
// Input layout: [0] the mode (even: the rest is a TZif file; odd: the rest is a TZ rule),
// [1..] the bytes.
//
// Built twice (fuzz/CMakeLists.txt): as the fuzzer, and with SANDPOOL_FUZZ_SEED_MAIN as a
// small program that writes the seed corpus into the directory it is given.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <sandpool/schedule/posix_tz.hpp>
#include <sandpool/schedule/time_zone.hpp>
#include <sandpool/schedule/tzif.hpp>

namespace sandpool {
namespace {

void require(bool ok) {
  if (!ok) __builtin_trap();
}

// RFC 8536's bound on an offset, which the parsers enforce (a TZ rule's: 24:59:59).
bool plausible(std::int64_t offset) { return offset >= -89999 && offset <= 93599; }

template <typename Rule>
class FuzzedZone final : public TimeZone {
 public:
  explicit FuzzedZone(const Rule& rule) : rule_(rule) {}
  std::string_view name() const override { return "fuzzed"; }
  std::int64_t utc_offset(std::int64_t t) const override { return rule_.utc_offset(t); }

 private:
  const Rule& rule_;
};

// The instants a schedule asks about (1970-9000, the scheduler's range) and the edges.
constexpr std::int64_t kInstants[] = {0,           -1,          1774746000, 1792888200,
                                      2147483647,  2147483648,  4102444800, 221845392000,
                                      -2208988800, -62135596800};

template <typename Rule>
void check_zone(const Rule& rule) {
  for (const std::int64_t t : kInstants) require(plausible(rule.utc_offset(t)));
  const FuzzedZone<Rule> zone(rule);
  // A slot's fire instant reads as a civil time at or after the slot's (a gap moves it
  // later, never earlier) whatever the zone holds.
  for (const CivilTime c : {CivilTime{2026, 3, 29, 2, 30, 0}, CivilTime{2026, 10, 25, 2, 30, 0},
                            CivilTime{2050, 4, 5, 1, 45, 0}, CivilTime{1970, 1, 1, 0, 0, 0}}) {
    const std::int64_t t = zone.fire_instant(c);
    require(t >= civil_as_utc(c) - 93599 && t <= civil_as_utc(c) + 89999 + 86400);
  }
}

void run(std::string_view in) {
  if (in.empty()) return;
  const bool rule_only = (static_cast<unsigned char>(in[0]) & 1) != 0;
  in.remove_prefix(1);
  if (rule_only) {
    const auto rule = parse_posix_tz(in);
    if (!rule) {
      require(rule.status().code() == Code::kInvalidArgument);
      require(rule.status().message().size() < kMaxPosixTzLength + 200);
      return;
    }
    check_zone(*rule);
    return;
  }
  const auto tzif = parse_tzif(in);
  if (!tzif) {
    require(tzif.status().code() == Code::kInvalidArgument);
    require(tzif.status().message().size() < 2 * kMaxPosixTzLength + 200);
    return;
  }
  require(tzif->transitions.size() == tzif->transition_types.size());
  require(tzif->transitions.size() <= in.size() / 5);  // never more than the bytes can hold
  for (std::size_t i = 0; i < tzif->transitions.size(); ++i) {
    require(i == 0 || tzif->transitions[i] > tzif->transitions[i - 1]);
    require(tzif->transition_types[i] < tzif->type_offsets.size());
    // From the last transition on a footer decides (a lying one may disagree).
    const bool last_with_footer = i + 1 == tzif->transitions.size() && tzif->footer;
    require(last_with_footer || tzif->utc_offset(tzif->transitions[i]) ==
                                    tzif->type_offsets[tzif->transition_types[i]]);
  }
  check_zone(*tzif);
}

}  // namespace
}  // namespace sandpool

#ifndef SANDPOOL_FUZZ_SEED_MAIN

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  sandpool::run(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}

#else  // the seed generator

#include <fstream>
#include <iterator>
#include <utility>

#include "seed_corpus.hpp"

namespace sandpool {
namespace {

int write_seeds(const std::string& dir) {
  bool ok = true;
  // Real files from the system's tz database: the 30-minute DST, no DST, a footer at /-1.
  for (const char* zone :
       {"Europe/Berlin", "Australia/Lord_Howe", "Asia/Kolkata", "America/Nuuk"}) {
    std::ifstream in(std::string(kDefaultZoneRoot) + "/" + zone, std::ios::binary);
    const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    ok = ok && in.good() && !bytes.empty();
    std::string name = zone;
    for (char& c : name) c = c == '/' ? '_' : c;
    run(std::string(1, '\0') + bytes);
    ok = ok && fuzz::write_seed(dir + "/file_" + name, std::string(1, '\0') + bytes);
  }
  const std::pair<const char*, const char*> rules[] = {
      {"rule_berlin", "CET-1CEST,M3.5.0,M10.5.0/3"},
      {"rule_quoted", "<+1030>-10:30<+11>-11,M10.1.0,M4.1.0"},
      {"rule_v3_times", "<-02>2<-01>,M3.5.0/-1,M10.5.0/25"},
      {"rule_julian", "XXX3YYY,J60/1:30,59/167"},
      {"rule_all_year", "EST5EDT4,0/0,J365/25"},
      {"rule_bad", "CET-1CEST,M3.5.0"},
  };
  for (const auto& [name, text] : rules) {
    const std::string bytes = std::string(1, '\1') + text;
    run(bytes);
    ok = ok && fuzz::write_seed(dir + "/" + name, bytes);
  }
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace sandpool

int main(int argc, char** argv) {
  return sandpool::fuzz::seed_main(argc, argv, "fuzz_tzif", sandpool::write_seeds);
}

#endif
