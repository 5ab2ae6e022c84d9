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
