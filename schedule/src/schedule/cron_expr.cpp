// The cron expression parser and the next-slot search (docs/schedules.md). Every byte of an
// expression comes from a config file or a control request: it is bounded first, then read
// character by character with positions kept for the error.
#include <sandpool/schedule/cron.hpp>

#include <array>
#include <cctype>
#include <vector>

namespace sandpool {

namespace {

// The latest instant a search starts from: year 9000, far inside std::chrono's calendar, so
// no arithmetic below can overflow whatever a caller passes.
constexpr std::int64_t kLatestInstant = CronExpr::kLatestAfter;
// How far a search for the next matching minute goes: a date on a given weekday (Vixie's
// AND case, "0 0 29 2 mon" with a `*`-led field) recurs within 40 years.
constexpr int kSearchYears = 100;

constexpr std::array<std::string_view, 12> kMonthNames = {"jan", "feb", "mar", "apr", "may", "jun",
                                                          "jul", "aug", "sep", "oct", "nov", "dec"};
constexpr std::array<std::string_view, 7> kDayNames = {"sun", "mon", "tue", "wed",
                                                       "thu", "fri", "sat"};

struct FieldSpec {
  const char* name;
  int min;
  int max;
  int name_base;  // value of names[0]; names empty when the field has none
  const std::string_view* names;
  std::size_t name_count;
};

constexpr FieldSpec kFields[5] = {
    {"minute", 0, 59, 0, nullptr, 0},
    {"hour", 0, 23, 0, nullptr, 0},
    {"day-of-month", 1, 31, 0, nullptr, 0},
    {"month", 1, 12, 1, kMonthNames.data(), kMonthNames.size()},
    {"day-of-week", 0, 7, 0, kDayNames.data(), kDayNames.size()},
};

Status field_error(const FieldSpec& f, std::size_t pos, std::string what) {
  return Status::invalid(std::string(f.name) + " field, position " + std::to_string(pos + 1) +
                         ": " + what);
}

bool is_blank(char c) { return c == ' ' || c == '\t'; }

// Reads one field's text `s` (starting at `offset` of the whole expression) into a bit set.
class FieldReader {
 public:
  FieldReader(const FieldSpec& spec, std::string_view s, std::size_t offset)
      : spec_(spec), s_(s), offset_(offset) {}

  Result<std::uint64_t> read() {
    std::uint64_t bits = 0;
    for (;;) {
      auto item = read_item();
      if (!item) return item.status();
      bits |= *item;
      if (i_ == s_.size()) return bits;
      if (s_[i_] != ',') return error("unexpected '" + printable(s_[i_]) + "'");
      ++i_;
    }
  }

 private:
  Status error(std::string what) const { return field_error(spec_, offset_ + i_, what); }
  static std::string printable(char c) {
    if (std::isprint(static_cast<unsigned char>(c))) return std::string(1, c);
    return "\\x" + std::string(1, "0123456789abcdef"[(c >> 4) & 0xf]) +
           std::string(1, "0123456789abcdef"[c & 0xf]);
  }

  // item := ('*' | value ['-' value]) ['/' step]
  Result<std::uint64_t> read_item() {
    int lo = spec_.min;
    int hi = spec_.max;
    bool single = false;
    if (i_ == s_.size() || s_[i_] == ',') return error("empty list item");
    if (s_[i_] == '*') {
      ++i_;
    } else {
      const std::size_t at = i_;
      auto v = read_value();
      if (!v) return v.status();
      lo = hi = *v;
      single = true;
      if (i_ < s_.size() && s_[i_] == '-') {
        ++i_;
        auto w = read_value();
        if (!w) return w.status();
        hi = *w;
        single = false;
        if (hi < lo) {
          return field_error(
              spec_, offset_ + at,
              "range " + std::to_string(lo) + "-" + std::to_string(hi) + " runs backwards");
        }
      }
    }
    int step = 1;
    if (i_ < s_.size() && s_[i_] == '/') {
      ++i_;
      const std::size_t at = i_;
      auto st = read_number();
      if (!st) return st.status();
      step = *st;
      const int span = spec_.max - spec_.min + 1;
      if (step < 1 || step > span) {
        return field_error(
            spec_, offset_ + at,
            "step " + std::to_string(step) + " is out of range 1-" + std::to_string(span));
      }
      if (single) hi = spec_.max;  // "5/15": from 5 to the field's end
    }
    std::uint64_t bits = 0;
    for (int v = lo; v <= hi; v += step) bits |= std::uint64_t{1} << v;
    return bits;
  }

  // A number within the field's range, or a name.
  Result<int> read_value() {
    const std::size_t at = i_;
    if (i_ < s_.size() && std::isalpha(static_cast<unsigned char>(s_[i_]))) {
      std::string word;
      while (i_ < s_.size() && std::isalpha(static_cast<unsigned char>(s_[i_])) &&
             word.size() < 16) {
        word += static_cast<char>(std::tolower(static_cast<unsigned char>(s_[i_])));
        ++i_;
      }
      for (std::size_t k = 0; k < spec_.name_count; ++k) {
        if (spec_.names[k] == word) return spec_.name_base + static_cast<int>(k);
      }
      if (spec_.name_count == 0) {
        return field_error(spec_, offset_ + at, "\"" + word + "\" is not a number");
      }
      return field_error(spec_, offset_ + at, "unknown name \"" + word + "\"");
    }
    auto n = read_number();
    if (!n) return n.status();
    if (*n < spec_.min || *n > spec_.max) {
      return field_error(spec_, offset_ + at,
                         std::to_string(*n) + " is out of range " + std::to_string(spec_.min) +
                             "-" + std::to_string(spec_.max));
    }
    return *n;
  }

  // Decimal digits, capped (a long run of digits is out of range, not an overflow).
  Result<int> read_number() {
    if (i_ == s_.size() || !std::isdigit(static_cast<unsigned char>(s_[i_]))) {
      if (i_ == s_.size()) return error("a number is missing at the end");
      return error("expected a number, found '" + printable(s_[i_]) + "'");
    }
    int n = 0;
    while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) {
      if (n < 100000) n = n * 10 + (s_[i_] - '0');
      ++i_;
    }
    return n;
  }

  const FieldSpec& spec_;
  std::string_view s_;
  std::size_t offset_;
  std::size_t i_ = 0;
};

struct Word {
  std::string_view text;
  std::size_t offset;
};

std::vector<Word> split_words(std::string_view text) {
  std::vector<Word> words;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_blank(text[i])) ++i;
    const std::size_t start = i;
    while (i < text.size() && !is_blank(text[i])) ++i;
    if (i > start) words.push_back({text.substr(start, i - start), start});
  }
  return words;
}

CivilTime plus_minute(const CivilTime& c) {
  CivilTime m = c;
  m.second = 0;
  return utc_civil(civil_as_utc(m) + 60);
}

}  // namespace

namespace {

// The duration `text`, found at `base` of what the user wrote; errors say "<what>, position N".
Result<std::int64_t> read_duration(std::string_view text, std::size_t base, const char* what) {
  static constexpr std::array<std::pair<char, std::int64_t>, 4> kUnits = {
      {{'d', 86400}, {'h', 3600}, {'m', 60}, {'s', 1}}};
  auto error = [base, what](std::size_t pos, std::string why) {
    return Status::invalid(std::string(what) + ", position " + std::to_string(base + pos + 1) +
                           ": " + why);
  };
  if (text.empty()) return error(0, "empty (e.g. 30s, 5m, 1h30m)");
  std::int64_t total = 0;
  std::size_t next_unit = 0;  // units come in the order d h m s, each once
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t at = i;
    std::int64_t n = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
      if (n <= CronExpr::kMaxInterval) n = n * 10 + (text[i] - '0');
      ++i;
    }
    if (i == at) return error(at, "expected a number (e.g. 30s, 5m, 1h30m)");
    if (i == text.size()) return error(i, "a unit (d, h, m or s) is missing");
    std::size_t u = next_unit;
    while (u < kUnits.size() && kUnits[u].first != text[i]) ++u;
    if (u == kUnits.size()) {
      return error(i, "unit '" + std::string(1, text[i]) +
                          "' is not d, h, m or s, or comes out of the order d h m s");
    }
    total += std::min(n, CronExpr::kMaxInterval + 1) * kUnits[u].second;
    if (total > CronExpr::kMaxInterval) return error(at, "longer than 366d");
    next_unit = u + 1;
    ++i;
  }
  if (total < CronExpr::kMinInterval) return error(0, "shorter than 1s");
  return total;
}

// The five fields a macro (lowercased) stands for; nullopt: not a macro (@every is not one).
std::optional<std::string_view> macro_expansion(const std::string& macro) {
  static constexpr std::pair<std::string_view, std::string_view> kMacros[] = {
      {"@hourly", "0 * * * *"},  {"@daily", "0 0 * * *"},   {"@midnight", "0 0 * * *"},
      {"@weekly", "0 0 * * 0"},  {"@monthly", "0 0 1 * *"}, {"@yearly", "0 0 1 1 *"},
      {"@annually", "0 0 1 1 *"}};
  for (const auto& [name, expansion] : kMacros) {
    if (macro == name) return expansion;
  }
  return std::nullopt;
}

// Returns true iff some month of `months` (bits 1..12) holds some day of `days` (bits
// 1..31), in a leap year (Feb 29 exists).
bool some_day_occurs(std::uint16_t months, std::uint32_t days) {
  for (int m = 1; m <= 12; ++m) {
    if (!(months >> m & 1)) continue;
    const int longest = days_in_month(2000, m);
    for (int d = 1; d <= longest; ++d) {
      if ((days >> d & 1) != 0) return true;
    }
  }
  return false;
}

}  // namespace

Result<std::int64_t> parse_every_duration(std::string_view text) {
  return read_duration(text, 0, "duration");
}

Result<CronExpr> CronExpr::parse(std::string_view text) {
  if (text.size() > kMaxText) {
    return Status::invalid("cron expression longer than " + std::to_string(kMaxText) +
                           " characters");
  }
  const std::vector<Word> words = split_words(text);
  if (words.empty()) return Status::invalid("empty cron expression");
  CronExpr e;
  const std::size_t first = words.front().offset;
  const std::size_t last = words.back().offset + words.back().text.size();
  e.text_ = std::string(text.substr(first, last - first));

  std::string_view w0 = words[0].text;
  if (w0.front() == '@') {
    std::string macro;
    for (char c : w0) macro += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (macro == "@every") {
      if (words.size() != 2) {
        const std::size_t pos = words.size() < 2 ? text.size() : words[2].offset;
        return Status::invalid("@every, position " + std::to_string(pos + 1) +
                               ": expected one duration (e.g. @every 30s, @every 1h30m)");
      }
      auto d = read_duration(words[1].text, words[1].offset, "@every duration");
      if (!d) return d.status();
      e.interval_ = *d;
      return e;
    }
    if (const auto expansion = macro_expansion(macro)) {
      if (words.size() != 1) {
        return Status::invalid(macro + ", position " + std::to_string(words[1].offset + 1) +
                               ": a macro takes nothing after it");
      }
      auto expanded = parse(*expansion);
      if (!expanded) return expanded.status();
      expanded->text_ = e.text_;
      return expanded;
    }
    return Status::invalid("position " + std::to_string(words[0].offset + 1) +
                           ": unknown macro \"" + std::string(w0.substr(0, 32)) +
                           "\" (@hourly @daily @weekly @monthly @yearly @every)");
  }

  if (words.size() != 5) {
    if (words.size() > 5) {
      return Status::invalid("position " + std::to_string(words[5].offset + 1) +
                             ": more than 5 fields (minute hour day-of-month month "
                             "day-of-week)");
    }
    return field_error(kFields[words.size()], text.size(),
                       "missing (5 fields: minute hour day-of-month month day-of-week)");
  }
  std::array<std::uint64_t, 5> bits{};
  for (std::size_t f = 0; f < 5; ++f) {
    auto b = FieldReader(kFields[f], words[f].text, words[f].offset).read();
    if (!b) return b.status();
    bits[f] = *b;
  }
  e.minutes_ = bits[0];
  e.hours_ = static_cast<std::uint32_t>(bits[1]);
  e.days_ = static_cast<std::uint32_t>(bits[2]);
  e.months_ = static_cast<std::uint16_t>(bits[3]);
  std::uint64_t dow = bits[4];
  if (dow & (std::uint64_t{1} << 7)) dow = (dow | 1) & 0x7f;  // 7 is Sunday too
  e.weekdays_ = static_cast<std::uint8_t>(dow);
  e.day_star_ = words[2].text.front() == '*';
  e.weekday_star_ = words[4].text.front() == '*';

  // When the days are chosen by day-of-month alone or together with the weekday (a field
  // led by `*`), some chosen month must hold some chosen day, or the expression never fires.
  if (e.day_star_ || e.weekday_star_) {
    if (!some_day_occurs(e.months_, e.days_)) {
      return field_error(kFields[2], words[2].offset,
                         "no chosen day occurs in the chosen months, the expression never "
                         "fires");
    }
  }
  return e;
}

bool CronExpr::day_matches(int year, int month, int day) const {
  const bool by_day = (days_ >> day & 1) != 0;
  const bool by_weekday = (weekdays_ >> day_of_week(year, month, day) & 1) != 0;
  // Vixie cron's rule: when both fields are restricted (neither led by `*`), a day matches
  // either; otherwise it must match both (the `*` one matches everything or its step).
  if (day_star_ || weekday_star_) return by_day && by_weekday;
  return by_day || by_weekday;
}

bool CronExpr::matches(const CivilTime& c) const {
  if (interval_ != 0) return false;
  return (minutes_ >> c.minute & 1) && (hours_ >> c.hour & 1) && (months_ >> c.month & 1) &&
         day_matches(c.year, c.month, c.day);
}

std::optional<CivilTime> CronExpr::next_match(CivilTime c) const {
  c.second = 0;
  const int last_year = c.year + kSearchYears;
  auto next_day = [&c] {
    c.hour = 0;
    c.minute = 0;
    if (++c.day > days_in_month(c.year, c.month)) {
      c.day = 1;
      if (++c.month > 12) {
        c.month = 1;
        ++c.year;
      }
    }
  };
  while (c.year <= last_year) {
    if (!(months_ >> c.month & 1)) {
      c.day = days_in_month(c.year, c.month);
      next_day();
    } else if (!day_matches(c.year, c.month, c.day)) {
      next_day();
    } else if (!(hours_ >> c.hour & 1)) {
      c.minute = 0;
      if (++c.hour == 24) {
        c.hour = 23;
        next_day();
      }
    } else if (!(minutes_ >> c.minute & 1)) {
      if (++c.minute == 60) {
        c.minute = 0;
        if (++c.hour == 24) {
          c.hour = 23;
          next_day();
        }
      }
    } else {
      return c;
    }
  }
  return std::nullopt;
}

std::optional<std::int64_t> CronExpr::next_after(std::int64_t after, const TimeZone& zone,
                                                 std::int64_t anchor) const {
  if (after < 0 || after > kLatestInstant) return std::nullopt;
  if (interval_ != 0) {
    if (anchor < 0 || anchor > kLatestInstant) return std::nullopt;
    if (after < anchor) return anchor;
    return anchor + ((after - anchor) / interval_ + 1) * interval_;
  }
  // Civil minutes in order; each fires at zone.fire_instant, which never decreases with the
  // civil time, so the first one past `after` is the answer. Those at or before civil(after)
  // fire at or before `after`; a few after it may too (the repeated hour's second pass, the
  // minutes of a gap that already fired at its end): skipped, at most a gap's worth.
  CivilTime c = plus_minute(zone.civil(after));
  for (int skipped = 0; skipped <= 24 * 60; ++skipped) {
    const auto m = next_match(c);
    if (!m) return std::nullopt;
    const std::int64_t t = zone.fire_instant(*m);
    if (t > after) return t;
    c = plus_minute(*m);
  }
  return std::nullopt;
}

}  // namespace sandpool
