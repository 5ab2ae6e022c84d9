// The TZif reader: headers, the data block of the file's version and the footer, each count
// checked against the bytes present before it is used (RFC 8536 section 3).
#include <sandpool/schedule/tzif.hpp>

#include <algorithm>
#include <string>

namespace sandpool {

namespace {

constexpr std::size_t kHeaderBytes = 44;
// RFC 8536 section 3.2: utoff values should lie within [-89999, 93599] (-25h..+26h).
constexpr std::int32_t kMinOffset = -89999;
constexpr std::int32_t kMaxOffset = 93599;

struct Header {
  int version = 1;
  std::uint64_t isutcnt = 0;
  std::uint64_t isstdcnt = 0;
  std::uint64_t leapcnt = 0;
  std::uint64_t timecnt = 0;
  std::uint64_t typecnt = 0;
  std::uint64_t charcnt = 0;

  // The bytes of the data block that follows the header, times `time_bytes` wide.
  std::uint64_t block_bytes(std::uint64_t time_bytes) const {
    return timecnt * time_bytes + timecnt + typecnt * 6 + charcnt + leapcnt * (time_bytes + 4) +
           isstdcnt + isutcnt;
  }
};

std::uint32_t be32(std::string_view b, std::size_t at) {
  std::uint32_t v = 0;
  for (std::size_t i = 0; i < 4; ++i) v = v << 8 | static_cast<unsigned char>(b[at + i]);
  return v;
}

std::uint64_t be64(std::string_view b, std::size_t at) {
  return std::uint64_t{be32(b, at)} << 32 | be32(b, at + 4);
}

Status bad(const std::string& what) { return Status::invalid("TZif: " + what); }

Result<Header> read_header(std::string_view bytes, std::size_t at) {
  if (bytes.substr(at, 4) != "TZif") return bad("no TZif magic at byte " + std::to_string(at));
  if (bytes.size() - at < kHeaderBytes)
    return bad("truncated header at byte " + std::to_string(at));
  Header h;
  switch (bytes[at + 4]) {
    case '\0':
      h.version = 1;
      break;
    case '2':
    case '3':
    case '4':
      h.version = bytes[at + 4] - '0';
      break;
    default:
      return bad("unknown version byte " +
                 std::to_string(static_cast<unsigned char>(bytes[at + 4])));
  }
  h.isutcnt = be32(bytes, at + 20);
  h.isstdcnt = be32(bytes, at + 24);
  h.leapcnt = be32(bytes, at + 28);
  h.timecnt = be32(bytes, at + 32);
  h.typecnt = be32(bytes, at + 36);
  h.charcnt = be32(bytes, at + 40);
  if (h.typecnt == 0 || h.typecnt > 256) return bad("typecnt " + std::to_string(h.typecnt));
  if (h.charcnt == 0) return bad("charcnt 0");
  if (h.isutcnt != 0 && h.isutcnt != h.typecnt) return bad("isutcnt is neither 0 nor typecnt");
  if (h.isstdcnt != 0 && h.isstdcnt != h.typecnt) {
    return bad("isstdcnt is neither 0 nor typecnt");
  }
  if (h.leapcnt != 0) return bad("leap-second records (a right/ zone) are not supported");
  return h;
}

// Reads the data block at `at` into `out`; times are 4 or 8 bytes wide.
Status read_block(std::string_view bytes, std::size_t at, const Header& h, std::size_t time_bytes,
                  Tzif* out) {
  if (h.block_bytes(time_bytes) > bytes.size() - at) {
    return bad("counts need " + std::to_string(h.block_bytes(time_bytes)) +
               " bytes of data at byte " + std::to_string(at) + ", the file has " +
               std::to_string(bytes.size() - at));
  }
  out->transitions.resize(h.timecnt);
  for (std::size_t i = 0; i < h.timecnt; ++i, at += time_bytes) {
    out->transitions[i] = time_bytes == 8 ? static_cast<std::int64_t>(be64(bytes, at))
                                          : static_cast<std::int32_t>(be32(bytes, at));
    if (i > 0 && out->transitions[i] <= out->transitions[i - 1]) {
      return bad("transition " + std::to_string(i) + " does not ascend");
    }
  }
  out->transition_types.resize(h.timecnt);
  for (std::size_t i = 0; i < h.timecnt; ++i, ++at) {
    out->transition_types[i] = static_cast<std::uint8_t>(bytes[at]);
    if (out->transition_types[i] >= h.typecnt) {
      return bad("transition " + std::to_string(i) + " names type " +
                 std::to_string(out->transition_types[i]) + " of " + std::to_string(h.typecnt));
    }
  }
  out->type_offsets.resize(h.typecnt);
  for (std::size_t i = 0; i < h.typecnt; ++i, at += 6) {
    const auto offset = static_cast<std::int32_t>(be32(bytes, at));
    const auto isdst = static_cast<unsigned char>(bytes[at + 4]);
    const auto desig = static_cast<unsigned char>(bytes[at + 5]);
    if (offset < kMinOffset || offset > kMaxOffset) {
      return bad("type " + std::to_string(i) + " has offset " + std::to_string(offset));
    }
    if (isdst > 1 || desig >= h.charcnt) {
      return bad("type " + std::to_string(i) + " has a bad isdst or designation index");
    }
    out->type_offsets[i] = offset;
  }
  return Status::ok();
}

}  // namespace

Result<Tzif> parse_tzif(std::string_view bytes) {
  if (bytes.size() > kMaxTzifBytes) {
    return bad("over " + std::to_string(kMaxTzifBytes) + " bytes");
  }
  auto first = read_header(bytes, 0);
  if (!first) return first.status();
  Tzif out;
  out.version = first->version;
  if (first->version == 1) {
    if (Status st = read_block(bytes, kHeaderBytes, *first, 4, &out); !st) return st;
    return out;
  }
  // Version 2+: skip the 32-bit block, read the 64-bit one and the footer.
  if (first->block_bytes(4) > bytes.size() - kHeaderBytes) {
    return bad("version 1 counts run past the end of the file");
  }
  const std::size_t second_at = kHeaderBytes + first->block_bytes(4);
  auto second = read_header(bytes, second_at);
  if (!second) return second.status();
  if (second->version != first->version) return bad("the two headers disagree on the version");
  const std::size_t data_at = second_at + kHeaderBytes;
  if (Status st = read_block(bytes, data_at, *second, 8, &out); !st) return st;
  const std::size_t footer_at = data_at + second->block_bytes(8);
  const std::string_view rest = bytes.substr(footer_at);
  if (rest.size() < 2 || rest.front() != '\n' || rest.back() != '\n' ||
      rest.find('\n', 1) != rest.size() - 1) {
    return bad("the footer is not one newline-enclosed line at the end of the file");
  }
  const std::string_view rule = rest.substr(1, rest.size() - 2);
  if (!rule.empty()) {
    auto footer = parse_posix_tz(rule);
    if (!footer) return bad("footer: " + footer.status().message());
    out.footer = *footer;
  }
  return out;
}

std::int64_t Tzif::utc_offset(std::int64_t t) const {
  if (transitions.empty()) return footer ? footer->utc_offset(t) : type_offsets.front();
  if (t < transitions.front()) return type_offsets.front();
  if (t >= transitions.back() && footer) return footer->utc_offset(t);
  const auto after = std::upper_bound(transitions.begin(), transitions.end(), t);
  const auto i = static_cast<std::size_t>(after - transitions.begin()) - 1;
  return type_offsets[transition_types[i]];
}

}  // namespace sandpool
