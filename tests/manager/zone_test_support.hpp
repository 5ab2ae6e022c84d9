// What the zone tests share: glibc as the oracle (localtime_r run in a child process with TZ
// set, so the test process's own zone is never touched), TZif files built byte by byte, and
// zone files written into a scratch directory (PublicDir) that serves as a tz database root.
#pragma once

#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "public_dir.hpp"

namespace sandpool::testing {

// Runs `fn` in a forked child and returns what it produced. The child runs no Catch2 code;
// the parent reads the pipe to its end, then reaps the child and requires a clean exit.
inline std::vector<std::int64_t> run_in_child(
    const std::function<std::vector<std::int64_t>()>& fn) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    const std::vector<std::int64_t> out = fn();
    const char* p = reinterpret_cast<const char*>(out.data());
    std::size_t left = out.size() * sizeof(std::int64_t);
    while (left > 0) {
      const ssize_t n = ::write(fds[1], p, left);
      if (n <= 0) ::_exit(1);
      p += n;
      left -= static_cast<std::size_t>(n);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string bytes;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    REQUIRE(n >= 0);
    if (n == 0) break;
    bytes.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  REQUIRE(bytes.size() % sizeof(std::int64_t) == 0);
  std::vector<std::int64_t> out(bytes.size() / sizeof(std::int64_t));
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

// Returns glibc's UTC offsets (tm_gmtoff) at each of `instants` with TZ set to each of
// `zones` in turn (a zone name, a POSIX rule, or ":/path" of a TZif file), zone by zone, all
// read in one child process.
inline std::vector<std::int64_t> glibc_offsets(const std::vector<std::string>& zones,
                                               const std::vector<std::int64_t>& instants) {
  auto out = run_in_child([&] {
    std::vector<std::int64_t> offsets;
    for (const std::string& tz : zones) {
      if (::setenv("TZ", tz.c_str(), 1) != 0) ::_exit(2);
      ::tzset();
      for (const std::int64_t t : instants) {
        const time_t tt = static_cast<time_t>(t);
        struct tm tm {};
        if (::localtime_r(&tt, &tm) == nullptr) ::_exit(3);
        offsets.push_back(tm.tm_gmtoff);
      }
    }
    return offsets;
  });
  REQUIRE(out.size() == zones.size() * instants.size());
  return out;
}

// The same for one zone.
inline std::vector<std::int64_t> glibc_offsets(const std::string& tz,
                                               const std::vector<std::int64_t>& instants) {
  return glibc_offsets(std::vector<std::string>{tz}, instants);
}

// A TZif file's parts; build_tzif() lays them out as RFC 8536 says.
struct TzifParts {
  char version = '2';  // '\0' (version 1), '2', '3', '4'
  std::vector<std::int64_t> transitions;
  std::vector<std::uint8_t> transition_types;
  std::vector<std::int32_t> type_offsets;  // each type: this offset, isdst 0, designation 0
  std::string footer;                      // the TZ string between the footer's newlines
};

inline void put_be(std::string& out, std::uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out.push_back(static_cast<char>(v >> (8 * i) & 0xff));
}

// The 44-byte header with these counts (isut and isstd 0, leap 0, charcnt 4).
inline std::string tzif_header(char version, std::uint32_t timecnt, std::uint32_t typecnt) {
  std::string h = "TZif";
  h.push_back(version);
  h.append(15, '\0');
  for (std::uint32_t count : {0u, 0u, 0u, timecnt, typecnt, 4u}) put_be(h, count, 4);
  return h;
}

inline std::string tzif_block(const TzifParts& p, int time_bytes) {
  std::string b;
  for (std::int64_t t : p.transitions) put_be(b, static_cast<std::uint64_t>(t), time_bytes);
  for (std::uint8_t i : p.transition_types) b.push_back(static_cast<char>(i));
  for (std::int32_t off : p.type_offsets) {
    put_be(b, static_cast<std::uint32_t>(off), 4);
    b.push_back('\0');
    b.push_back('\0');
  }
  b.append("XYZ", 4);  // the designations: one, NUL included
  return b;
}

inline std::string build_tzif(const TzifParts& p) {
  const auto timecnt = static_cast<std::uint32_t>(p.transitions.size());
  const auto typecnt = static_cast<std::uint32_t>(p.type_offsets.size());
  if (p.version == '\0') return tzif_header('\0', timecnt, typecnt) + tzif_block(p, 4);
  // The version 1 block is left empty but for its one type, as zic -b slim writes it.
  const TzifParts v1{p.version, {}, {}, {p.type_offsets.at(0)}, ""};
  return tzif_header(p.version, 0, 1) + tzif_block(v1, 4) +
         tzif_header(p.version, timecnt, typecnt) + tzif_block(p, 8) + "\n" + p.footer + "\n";
}

inline std::string read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Writes the zone file `name` (its directories made) under `root`; returns its path.
inline std::string put_zone(const PublicDir& root, const std::string& name,
                            const std::string& bytes) {
  std::filesystem::create_directories(
      std::filesystem::path(root.path() + "/" + name).parent_path());
  return root.write(name, bytes);
}

// Checks that `zone` (a TimeZone, Tzif or PosixTz) gives expected[i] at at[i] for every i;
// the first five that differ are reported with `what`.
template <typename Zone>
void check_offsets(const std::string& what, const Zone& zone, const std::vector<std::int64_t>& at,
                   const std::int64_t* expected) {
  std::size_t differ = 0;
  for (std::size_t i = 0; i < at.size(); ++i) {
    const std::int64_t got = zone.utc_offset(at[i]);
    if (got != expected[i] && differ++ < 5) {
      CAPTURE(what, at[i], expected[i]);
      CHECK(got == expected[i]);
    }
  }
  CHECK(differ == 0);
}

}  // namespace sandpool::testing
