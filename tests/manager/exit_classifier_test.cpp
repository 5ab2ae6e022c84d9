#include <catch2/catch.hpp>

#include <csignal>

#include <sandpool/ipc/layout.hpp>
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

TEST_CASE("a worker that ran out of address space is resource_limit: memory") {
  const auto memory = static_cast<std::uint32_t>(ipc::FatalReport::kMemory);
  auto [report, outcome] = GENERATE_COPY(table<ExitReport, Outcome>({
      {ExitReport{ExitStatus{false, 0, SIGSEGV}, 0, 42, memory}, Outcome::kResourceLimit},
      {ExitReport{ExitStatus{false, 0, SIGBUS}, 0, 42, memory}, Outcome::kResourceLimit},
      {ExitReport{ExitStatus{false, 0, SIGABRT}, 0, 42, memory}, Outcome::kResourceLimit},
      {exited(sandbox::kExitMemory), Outcome::kResourceLimit},
      // The report explains only those deaths; a plain crash stays lost.
      {killed(SIGSEGV), Outcome::kLost},
      {ExitReport{ExitStatus{false, 0, SIGKILL}, 0, 42, memory}, Outcome::kLost},
      {ExitReport{ExitStatus{true, 3, 0}, 0, 42, memory}, Outcome::kLost},
  }));
  auto c = classify_exit(report);
  CHECK(c.outcome == outcome);
  if (outcome == Outcome::kResourceLimit) {
    CHECK(c.error.rfind("resource_limit: memory", 0) == 0);
    CHECK(c.error.find("worker 42") != std::string::npos);
  }
}

TEST_CASE("a worker SIGKILLed while its cgroup counts an OOM kill is resource_limit: memory") {
  ExitReport r = killed(SIGKILL);
  r.cgroup_oom = true;
  auto c = classify_exit(r);
  CHECK(c.outcome == Outcome::kResourceLimit);
  CHECK(c.error.rfind("resource_limit: memory (cgroup memory limit", 0) == 0);
  // The counter explains a SIGKILL only: another death in the same cgroup stays what it is.
  r = killed(SIGSEGV);
  r.cgroup_oom = true;
  CHECK(classify_exit(r).outcome == Outcome::kLost);
}
