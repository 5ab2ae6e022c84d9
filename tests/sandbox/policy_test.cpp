#include <catch2/catch.hpp>

#include <sandpool/sandbox/policy.hpp>

using namespace sandpool::sandbox;

TEST_CASE("every seccomp profile parses back from its name") {
  const SeccompProfile p =
      GENERATE(SeccompProfile::kStrict, SeccompProfile::kRelaxed, SeccompProfile::kOff);
  REQUIRE(parse_profile(profile_name(p)) == p);
}

TEST_CASE("profile names are the documented lower-case words") {
  CHECK(profile_name(SeccompProfile::kStrict) == "strict");
  CHECK(profile_name(SeccompProfile::kRelaxed) == "relaxed");
  CHECK(profile_name(SeccompProfile::kOff) == "off");
}

TEST_CASE("an unknown profile name does not parse") {
  const char* name = GENERATE("", "STRICT", "strict ", "none", "relax");
  INFO(name);
  CHECK_FALSE(parse_profile(name).has_value());
}

TEST_CASE("the default limits bound memory, files and processes") {
  const ResourceLimits d;
  CHECK(d.address_space == (1ull << 30));
  CHECK(d.file_size == (1ull << 30));
  CHECK(d.processes == 256);
  CHECK(d.open_files == 64);
  CHECK(d.cpu_seconds == 0);  // derived by the pool from its timeouts
  CHECK(unlimited_resources(d).empty());
}

TEST_CASE("a limit set to 0 is named as unlimited, in the config's words") {
  ResourceLimits l;
  l.address_space = 0;
  l.file_size = 0;
  CHECK(unlimited_resources(l) == std::vector<std::string>{"memory", "file_size"});
  l.processes = 0;
  l.open_files = 0;
  CHECK(unlimited_resources(l) ==
        std::vector<std::string>{"memory", "processes", "file_size", "open_files"});
}
