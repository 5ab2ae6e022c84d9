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
ExitReport with_word(ExitReport r, std::uint32_t word) {
  r.violation_word = word;
  return r;
}
ExitReport with_memory_report(ExitReport r) {
  r.fatal_report = static_cast<std::uint32_t>(ipc::FatalReport::kMemory);
  return r;
}
constexpr std::uint32_t kSocketWord = 41 + 1;  // socket on x86_64, + 1
}  // namespace

TEST_CASE("a worker's end is classified into the running task's outcome") {
  auto [report, outcome, error_part] = GENERATE(table<ExitReport, Outcome, std::string>({
      {killed(SIGSEGV), Outcome::kLost, "killed by SIGSEGV"},
      {killed(SIGKILL), Outcome::kLost, "killed by SIGKILL"},
      {killed(SIGXCPU), Outcome::kResourceLimit, "resource_limit: cpu"},
      {killed(SIGXFSZ), Outcome::kResourceLimit, "resource_limit: file_size"},
      {exited(3), Outcome::kLost, "exited with code 3"},
      {exited(sandbox::kExitProtocol), Outcome::kProtocolError, "task ring undecodable"},
      {exited(sandbox::kExitRegionCorrupt), Outcome::kProtocolError, "scribbled on"},
  }));
  auto c = classify_exit(report);
  CHECK(c.outcome == outcome);
  CHECK(c.error.find(error_part) != std::string::npos);
}

TEST_CASE("a SIGSYS report names the forbidden syscall") {
  auto c = classify_exit(with_word(exited(sandbox::kExitViolation), kSocketWord));
  CHECK(c.outcome == Outcome::kSandboxViolation);
  CHECK(c.error == "sandbox_violation: socket");
}

TEST_CASE("the reporter's exit with a word out of range is a violation of an unknown syscall") {
  const std::uint32_t word = GENERATE(0u, 4097u, 0xffffffffu);
  auto c = classify_exit(with_word(exited(sandbox::kExitViolation), word));
  CHECK(c.outcome == Outcome::kSandboxViolation);
  CHECK(c.error.rfind("sandbox_violation: unknown (worker 42 left through its SIGSYS reporter",
                      0) == 0);
}

// Every (status, word, report) combination that matters: the status alone decides the
// outcome; the worker-writable words only name or detail it (issue 40).
TEST_CASE("a worker-writable word never turns an exit into a sandbox violation") {
  const ExitReport status =
      GENERATE(killed(SIGSEGV), killed(SIGKILL), killed(SIGBUS), killed(SIGABRT), killed(SIGXCPU),
               killed(SIGXFSZ), killed(SIGTERM), exited(0), exited(3),
               exited(sandbox::kExitProtocol), exited(sandbox::kExitRegionCorrupt),
               exited(sandbox::kExitMemory), exited(sandbox::kExitLockdown));
  const std::uint32_t word = GENERATE(1u, kSocketWord, 4096u, 4097u, 0xffffffffu);
  const bool memory = GENERATE(false, true);
  ExitReport scribbled = with_word(status, word);
  if (memory) scribbled = with_memory_report(scribbled);
  ExitReport clean = memory ? with_memory_report(status) : status;
  INFO(describe(status.status) << ", word " << word << ", memory report " << memory);
  const auto c = classify_exit(scribbled);
  CHECK(c.outcome != Outcome::kSandboxViolation);
  CHECK(c.outcome != Outcome::kFailed);
  // The word changes nothing at all: the same outcome and text as without it.
  CHECK(c.outcome == classify_exit(clean).outcome);
  CHECK(c.error == classify_exit(clean).error);
}

TEST_CASE("the scribbled worker of issue 40 is a retried protocol_error, not a violation") {
  // Exit 70 (it found its task ring undecodable) with the word a scribble left behind.
  for (const std::uint32_t word : {kSocketWord, 0xffffffffu, 0xa5a5a5a5u}) {
    const auto c = classify_exit(with_word(exited(sandbox::kExitProtocol), word));
    CHECK(c.outcome == Outcome::kProtocolError);
    CHECK(c.error.find("sandbox_violation") == std::string::npos);
  }
}

TEST_CASE("a worker killed by SIGSYS is a sandbox violation whatever its word says") {
  const std::uint32_t word = GENERATE(0u, kSocketWord, 0xffffffffu);
  const auto c = classify_exit(with_word(killed(SIGSYS), word));
  CHECK(c.outcome == Outcome::kSandboxViolation);
  // The reporter never leaves by SIGSYS, so its word is not the name.
  CHECK(c.error.find("socket") == std::string::npos);
}

TEST_CASE("a worker killed by SIGSYS without reporting is named by the kernel's record") {
  ExitReport r = with_word(killed(SIGSYS), kSocketWord);  // a lie the record overrides
  r.audited_syscall = 13;                                 // rt_sigaction on x86_64
  const auto c = classify_exit(r);
  CHECK(c.outcome == Outcome::kSandboxViolation);
  CHECK(c.error.rfind("sandbox_violation: rt_sigaction (worker 42 killed by SIGSYS", 0) == 0);
  CHECK(c.error.find("audit record") != std::string::npos);
}

TEST_CASE("without the kernel's record, the unknown syscall's message says why") {
  ExitReport r = killed(SIGSYS);
  r.audit_note = "/dev/kmsg holds no seccomp record for pid 42";
  const auto c = classify_exit(r);
  CHECK(c.outcome == Outcome::kSandboxViolation);
  CHECK(c.error.rfind("sandbox_violation: unknown (worker 42 killed by SIGSYS without reporting",
                      0) == 0);
  CHECK(c.error.find("blocked SIGSYS") != std::string::npos);
  CHECK(c.error.find("/dev/kmsg holds no seccomp record for pid 42") != std::string::npos);
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
