// The kernel's seccomp audit record (seccomp_audit.hpp): parsed from /dev/kmsg's format, and
// looked up in a log file written here, pid, signal, age and architecture checked.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <string>

#include "supervision/seccomp_audit.hpp"

using sandpool::supervision::find_seccomp_record;
using sandpool::supervision::parse_seccomp_record;

namespace {

// What a seccomp kill prints (captured on this project's test VM, kernel 6.18).
std::string kill_record(int pid, int syscall, const char* arch = "c000003e",
                        const char* time = "314052339", int sig = 31) {
  return "5,340," + std::string(time) +
         ",-;audit: type=1326 audit(1796539902.177:1): auid=4294967295 uid=0 gid=0 "
         "ses=4294967295 pid=" +
         std::to_string(pid) +
         " comm=\"sandpool-worker\" exe=\"/x/sandpool-worker\" sig=" + std::to_string(sig) +
         " arch=" + arch + " syscall=" + std::to_string(syscall) +
         " compat=0 ip=0x7f9c660784f7 code=0x80000000";
}

struct LogFile {
  explicit LogFile(const std::string& text) {
    char name[] = "/tmp/sp-kmsg-XXXXXX";
    const int fd = ::mkstemp(name);
    REQUIRE(fd >= 0);
    ::close(fd);
    path = name;
    std::ofstream(path) << text;
  }
  ~LogFile() { std::remove(path.c_str()); }
  std::string path;
};

}  // namespace

TEST_CASE("a seccomp audit record is parsed from the kernel log's format") {
  const auto r = parse_seccomp_record(kill_record(7233, 110));
  REQUIRE(r);
  CHECK(r->pid == 7233);
  CHECK(r->syscall == 110);
  CHECK(r->signal == SIGSYS);
  CHECK(r->arch == 0xc000003eu);
  CHECK(r->time_us == 314052339u);
}

TEST_CASE("other kernel log lines are not seccomp records") {
  const std::string line =
      GENERATE(std::string("6,339,1233500,-;EXT4-fs (vda): mounted filesystem r/w"),
               std::string("5,341,1,-;audit: type=1400 audit(1:2): apparmor=\"DENIED\" pid=5"),
               std::string(" SUBSYSTEM=virtio"), std::string(""),
               std::string("5,342,1,-;audit: type=1326 pid=5 sig=31 arch=c000003e"));  // no syscall
  CHECK_FALSE(parse_seccomp_record(line));
}

TEST_CASE("the newest record of the worker's pid names its syscall") {
  LogFile log(kill_record(99, 1, "c000003e", "100") + "\n" + kill_record(42, 2, "c000003e", "200") +
              "\n" + kill_record(42, 13, "c000003e", "300") + "\n");
  const auto found = find_seccomp_record(42, 150, 0, log.path);
  REQUIRE(found.syscall);
  CHECK(*found.syscall == 13);
}

TEST_CASE("a record older than the worker, or of another signal, is not its") {
  LogFile log(kill_record(42, 13, "c000003e", "100") + "\n" +
              kill_record(42, 13, "c000003e", "300", 9) + "\n");
  const auto found = find_seccomp_record(42, 200, 0, log.path);
  CHECK_FALSE(found.syscall);
  CHECK(found.note.find("holds no seccomp record for pid 42") != std::string::npos);
}

TEST_CASE("a record of another architecture is reported as such, not named") {
  LogFile log(kill_record(42, 11, "40000003") + "\n");  // i386's munmap, by int 0x80
  const auto found = find_seccomp_record(42, 0, 0, log.path);
  CHECK_FALSE(found.syscall);
  CHECK(found.note.find("another architecture (audit arch 0x40000003)") != std::string::npos);
}

TEST_CASE("an unreadable kernel log is said to be so") {
  const auto found = find_seccomp_record(42, 0, 0, "/nonexistent/kmsg");
  CHECK_FALSE(found.syscall);
  CHECK(found.note.find("cannot be read") != std::string::npos);
}
