// Reading a plugin's dynamic section for the libraries it expects beside itself
// (origin_libraries.hpp): the real with_library plugin, the search-path rules, and files
// that are not what they claim.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <sandpool/base/unique_fd.hpp>

#include "origin_libraries.hpp"
#include "worker_host/worker_harness.hpp"

using sandpool::UniqueFd;
using sandpool::testing::plugin_path;
using sandpool::testing::test_plugin_path;
using sandpool::worker::DynamicNeeds;
using sandpool::worker::libraries_beside;
using sandpool::worker::read_dynamic_needs;

namespace {

DynamicNeeds needs_of(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  REQUIRE(fd);
  auto needs = read_dynamic_needs(fd.get());
  INFO(needs.status().to_string());
  REQUIRE(needs.is_ok());
  return *needs;
}

// A scratch file holding `bytes`; removed with the object.
struct ScratchFile {
  explicit ScratchFile(const std::string& bytes) {
    char name[] = "/tmp/sp-elf-XXXXXX";
    const int fd = ::mkstemp(name);
    REQUIRE(fd >= 0);
    path = name;
    REQUIRE(::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
    ::close(fd);
  }
  ~ScratchFile() { ::unlink(path.c_str()); }
  std::string path;
};

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("the with_library plugin needs libsp_beside.so and searches $ORIGIN for it") {
  const DynamicNeeds needs = needs_of(test_plugin_path("with_library"));
  CHECK(std::set<std::string>(needs.needed.begin(), needs.needed.end()).count("libsp_beside.so"));
  CHECK(std::find(needs.search_path.begin(), needs.search_path.end(), "$ORIGIN") !=
        needs.search_path.end());
  const auto beside = libraries_beside(
      needs, [](const std::string& rel) { return rel == "libsp_beside.so"; },
      [](const std::string&) { return false; });
  CHECK(beside == std::vector<std::string>{"libsp_beside.so"});
}

TEST_CASE("a plugin without a search path of its own expects nothing beside it") {
  const DynamicNeeds needs = needs_of(plugin_path("echo"));
  CHECK(needs.search_path.empty());
  CHECK(libraries_beside(
            needs, [](const std::string&) { return true; }, [](const std::string&) { return true; })
            .empty());
}

TEST_CASE("the search path is followed in order, as glibc follows it") {
  struct Case {
    const char* what;
    std::vector<std::string> search;
    std::vector<std::string> expected;
  };
  const Case c = GENERATE(
      Case{"$ORIGIN itself", {"$ORIGIN"}, {"liba.so"}},
      Case{"${ORIGIN} with a subdirectory", {"${ORIGIN}/lib"}, {"lib/liba.so"}},
      Case{"a parent directory", {"$ORIGIN/../lib"}, {"../lib/liba.so"}},
      Case{"the first $ORIGIN entry that has it", {"$ORIGIN/none", "$ORIGIN/lib"}, {"lib/liba.so"}},
      Case{"an absolute entry that has it comes first", {"/opt/has", "$ORIGIN"}, {}},
      Case{"an absolute entry without it is passed over", {"/opt/none", "$ORIGIN"}, {"liba.so"}},
      Case{"$ORIGINAL is not $ORIGIN", {"$ORIGINAL"}, {}},
      Case{"other tokens are glibc's", {"$LIB"}, {}});
  INFO(c.what);
  DynamicNeeds needs;
  needs.needed = {"liba.so", "dir/libslash.so"};  // a name with '/' is never looked up here
  needs.search_path = c.search;
  const std::set<std::string> present = {"liba.so", "lib/liba.so", "../lib/liba.so",
                                         "dir/libslash.so", "$ORIGINAL/liba.so"};
  const auto beside = libraries_beside(
      needs, [&](const std::string& rel) { return present.count(rel) > 0; },
      [](const std::string& abs) { return abs == "/opt/has/liba.so"; });
  CHECK(beside == c.expected);
}

TEST_CASE("a file that is not a whole ELF object expects nothing beside it, without a crash") {
  const std::string real = file_bytes(test_plugin_path("with_library"));
  REQUIRE(real.size() > 4096);
  struct Case {
    const char* what;
    std::string bytes;
    bool readable;  // false: nothing can be made of it
  };
  std::string huge_phoff = real;
  // e_phoff (offset 32 in a 64-bit header) pointing far past the end.
  for (int i = 0; i < 8; ++i) huge_phoff[32 + i] = static_cast<char>(0xff);
  std::string huge_phnum = real;
  huge_phnum[56] = static_cast<char>(0xff);  // e_phnum: 65535 program headers
  huge_phnum[57] = static_cast<char>(0xff);
  const Case c =
      GENERATE_COPY(Case{"empty", "", false}, Case{"text", "not an ELF file at all", false},
                    Case{"a header cut short", real.substr(0, 20), false},
                    Case{"cut after the header", real.substr(0, 64), false},
                    Case{"program headers past the end", huge_phoff, false},
                    Case{"too many program headers", huge_phnum, false},
                    Case{"cut in the middle", real.substr(0, real.size() / 3), true});
  INFO(c.what);
  ScratchFile f(c.bytes);
  const DynamicNeeds needs = needs_of(f.path);  // read_dynamic_needs succeeds: no crash
  if (!c.readable) {
    CHECK(needs.needed.empty());
    CHECK(needs.search_path.empty());
  }
}
