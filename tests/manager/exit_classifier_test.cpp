#include <catch2/catch.hpp>

#include <csignal>

#include <sandpool/sandbox/worker_args.hpp>

#include "supervision/exit_classifier.hpp"

using namespace sandpool;
using sandpool::supervision::classify_exit;
using sandpool::supervision::ExitReport;

namespace {
ExitReport killed(int sig) { return {ExitStatus{false, 0, sig}, 0, 42}; }
ExitReport exited(int code) { return {ExitStatus{true, code, 0}, 0, 42}; }
}  // namespace

TEST_CASE("a worker's end is classified into the running task's outcome") {
  auto [report, outcome, error_part] = GENERATE(table<ExitReport, Outcome, std::string>({
      {killed(SIGSEGV), Outcome::kLost, "killed by SIGSEGV"},
      {killed(SIGKILL), Outcome::kLost, "killed by SIGKILL"},
      {killed(SIGXCPU), Outcome::kResourceLimit, "resource_limit: cpu"},
      {killed(SIGXFSZ), Outcome::kResourceLimit, "resource_limit: file_size"},
      {exited(3), Outcome::kLost, "exited with code 3"},
      {exited(sandbox::kExitProtocol), Outcome::kProtocolError, "rejected"},
  }));
  auto c = classify_exit(report);
  CHECK(c.outcome == outcome);
  CHECK(c.error.find(error_part) != std::string::npos);
}

TEST_CASE("a SIGSYS report names the forbidden syscall") {
  ExitReport r = exited(sandbox::kExitViolation);
  r.violation_word = 41 + 1;  // socket on x86_64
  auto c = classify_exit(r);
  CHECK(c.outcome == Outcome::kSandboxViolation);
  CHECK(c.error == "sandbox_violation: socket");
}

TEST_CASE("a scribbled SIGSYS word is not believed") {
  ExitReport r = killed(SIGSEGV);
  r.violation_word = 0xffffffffu;
  auto c = classify_exit(r);
  CHECK(c.outcome == Outcome::kSandboxViolation);
  CHECK(c.error == "sandbox_violation: unknown");
}
