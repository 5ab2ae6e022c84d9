#include "worker_harness.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iterator>
#include <stdexcept>

namespace sandpool::testing {
namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error("harness: " + what); }

template <typename T>
T value_or_fail(Result<T> r, const char* what) {
  if (!r) fail(std::string(what) + ": " + r.status().to_string());
  return std::move(r).value();
}

template <typename Msg>
WorkerMessage decode_as(const std::string& bytes) {
  Msg m;
  Status s = ipc::decode(bytes, &m);
  if (!s) fail("undecodable message from the worker: " + s.to_string());
  return m;
}

}  // namespace

WorkerMessage decode_worker_message(std::uint16_t kind, const std::string& bytes) {
  switch (static_cast<ipc::MsgKind>(kind)) {
    case ipc::MsgKind::kReady:
      return decode_as<ipc::ReadyMsg>(bytes);
    case ipc::MsgKind::kResult:
      return decode_as<ipc::ResultMsg>(bytes);
    case ipc::MsgKind::kProgress:
      return decode_as<ipc::ProgressMsg>(bytes);
    case ipc::MsgKind::kLog:
      return decode_as<ipc::LogMsg>(bytes);
    default:
      fail("unexpected message kind " + std::to_string(kind) + " from the worker");
  }
}

std::string plugin_path(const std::string& name) {
  return std::string(SANDPOOL_PLUGIN_DIR) + "/lib" + name + ".so";
}

std::string test_plugin_path(const std::string& name) {
  return std::string(SANDPOOL_TEST_PLUGIN_DIR) + "/lib" + name + ".so";
}

sandbox::WorkerArgs worker_args(const std::string& plugin) {
  sandbox::WorkerArgs args;
  args.plugin_path = plugin;
  return args;
}

WorkerHarness::WorkerHarness(ipc::SharedRegion region, ipc::Doorbell doorbell)
    : region_(std::move(region)),
      doorbell_(std::move(doorbell)),
      sender_(region_.task_producer()),
      receiver_(region_.result_consumer(), region_.max_message()) {}

std::unique_ptr<WorkerHarness> WorkerHarness::spawn(const sandbox::WorkerArgs& in,
                                                    const ipc::RegionConfig& config) {
  ipc::SharedRegion region =
      value_or_fail(ipc::SharedRegion::create(config, in.plugin_config_json), "region");
  ipc::Doorbell doorbell = value_or_fail(ipc::Doorbell::create(), "doorbell");
  std::unique_ptr<WorkerHarness> h(new WorkerHarness(std::move(region), std::move(doorbell)));

  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) fail("pipe2");
  h->out_.reset(out[0]);
  ::fcntl(out[0], F_SETFL, O_NONBLOCK);  // read_output drains what is there, never blocks
  UniqueFd out_write(out[1]);
  // The plugin as the manager hands it over: its directory, and the file opened in it.
  const std::string dir = std::filesystem::path(in.plugin_path).parent_path().string();
  const std::string name = std::filesystem::path(in.plugin_path).filename().string();
  UniqueFd plugin_dir(::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!plugin_dir) fail("open(" + dir + ")");
  UniqueFd plugin(::openat(plugin_dir.get(), name.c_str(), O_RDONLY | O_CLOEXEC));
  if (!plugin) fail("open(" + in.plugin_path + ")");

  sandbox::WorkerArgs args = in;
  args.channel_fd = 3;
  args.doorbell_fd = 4;
  args.plugin_fd = 6;
  args.plugin_dir_fd = 7;
  std::vector<std::string> strings = sandbox::to_argv(args);
  strings.insert(strings.begin(), SANDPOOL_WORKER_PATH);
  std::vector<char*> argv;
  for (std::string& s : strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  // (from, to): every source moves above the targets first, so placing one cannot clobber
  // another; dup2 clears close-on-exec on the copies.
  const int from[] = {h->region_.fd(),  h->doorbell_.worker_fd(), plugin.get(),
                      plugin_dir.get(), out_write.get(),          out_write.get()};
  const int to[] = {3, 4, 6, 7, STDOUT_FILENO, STDERR_FILENO};

  const pid_t pid = ::fork();
  if (pid < 0) fail("fork");
  if (pid == 0) {
    // Only async-signal-safe calls until exec.
    int moved[std::size(from)];
    for (std::size_t i = 0; i < std::size(from); ++i) {
      moved[i] = ::fcntl(from[i], F_DUPFD_CLOEXEC, 10);
      if (moved[i] < 0) ::_exit(126);
    }
    for (std::size_t i = 0; i < std::size(from); ++i) {
      if (::dup2(moved[i], to[i]) != to[i]) ::_exit(126);
    }
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  h->doorbell_.release_worker_end();
  h->pid_ = pid;
  h->pidfd_.reset(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  if (!h->pidfd_) fail("pidfd_open");
  return h;
}

WorkerHarness::~WorkerHarness() {
  if (pid_ > 0 && !status_) {
    ::kill(pid_, SIGKILL);
    reap(0);
  }
}

bool WorkerHarness::reap(int options) {
  int status = 0;
  if (::waitpid(pid_, &status, options) != pid_) return false;
  status_ = status;
  return true;
}

ipc::TaskMsg WorkerHarness::task(std::uint64_t id, std::string type, std::string payload) const {
  ipc::TaskMsg t;
  t.id = id;
  t.type = std::move(type);
  t.payload = std::move(payload);
  return t;
}

void WorkerHarness::queue_raw(ipc::MsgKind kind, const std::string& bytes) {
  if (sender_.send(static_cast<std::uint16_t>(kind), bytes) == ipc::RingStatus::kCorrupt) {
    fail("the worker corrupted the task ring");
  }
}

void WorkerHarness::publish() {
  if (sender_.pump() == ipc::RingStatus::kCorrupt) fail("the worker corrupted the task ring");
  if (sender_.publish()) ipc::futex_wake(&header().task_ring.data_seq);
}

void WorkerHarness::read_output() {
  if (!out_) return;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(out_.get(), buf, sizeof buf);
    if (n > 0) {
      output_.append(buf, static_cast<std::size_t>(n));
      continue;
    }
    if (n == 0) out_.reset();  // EOF: every writer is gone
    return;                    // EAGAIN (nothing more now) or an error
  }
}

void WorkerHarness::wait_events(Clock::time_point until) {
  pollfd fds[3];
  nfds_t n = 0;
  fds[n++] = {doorbell_.fd(), POLLIN, 0};
  if (out_) fds[n++] = {out_.get(), POLLIN, 0};
  if (!exited_) fds[n++] = {pidfd_.get(), POLLIN, 0};
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
  if (left.count() > 0) ::poll(fds, n, static_cast<int>(left.count()));
  doorbell_.drain();
  for (nfds_t i = 0; i < n; ++i) {
    if (fds[i].revents == 0) continue;
    if (fds[i].fd == pidfd_.get()) exited_ = true;
    if (out_ && fds[i].fd == out_.get()) read_output();
  }
}

std::optional<WorkerMessage> WorkerHarness::next(std::chrono::milliseconds timeout) {
  const Clock::time_point until = Clock::now() + timeout;
  for (;;) {
    publish();  // keep queued task-ring messages flowing
    std::uint16_t kind = 0;
    std::string bytes;
    const ipc::RingStatus s = receiver_.next(&kind, &bytes);
    if (receiver_.release()) ipc::futex_wake(&header().result_ring.space_seq);
    if (s == ipc::RingStatus::kCorrupt) fail("the worker corrupted the result ring");
    if (s == ipc::RingStatus::kOk) return decode_worker_message(kind, bytes);
    // A dead worker's ring is drained before we say it is gone.
    if (exited_ || Clock::now() >= until) return std::nullopt;
    // Announce both waits, so the worker rings the doorbell for new results and for
    // task-ring space alike; then re-check before blocking.
    const bool room_wanted =
        sender_.has_queued() && sender_.ring().prepare_wait(std::min(
                                    sender_.queued_bytes(), sender_.ring().max_record_payload()));
    if (receiver_.ring().prepare_sleep() && (!sender_.has_queued() || room_wanted)) {
      wait_events(until);
    }
    receiver_.ring().cancel_sleep();
    sender_.ring().cancel_wait();
  }
}

std::optional<ipc::ReadyMsg> WorkerHarness::expect_ready() {
  while (auto m = next()) {
    if (auto* log = std::get_if<ipc::LogMsg>(&*m)) {
      logs_.push_back(*log);
      continue;
    }
    if (auto* ready = std::get_if<ipc::ReadyMsg>(&*m)) return *ready;
    fail("expected ReadyMsg first");
  }
  return std::nullopt;
}

std::optional<ipc::ResultMsg> WorkerHarness::next_result() {
  while (auto m = next()) {
    if (auto* log = std::get_if<ipc::LogMsg>(&*m)) logs_.push_back(*log);
    if (auto* result = std::get_if<ipc::ResultMsg>(&*m)) return *result;
  }
  return std::nullopt;
}

bool WorkerHarness::logged(const std::string& text) const {
  return std::any_of(logs_.begin(), logs_.end(),
                     [&](const ipc::LogMsg& m) { return m.text.find(text) != std::string::npos; });
}

bool WorkerHarness::wait_until(const std::function<bool()>& ready,
                               std::chrono::milliseconds timeout) {
  const Clock::time_point until = Clock::now() + timeout;
  for (;;) {
    if (ready()) return true;
    const Clock::time_point now = Clock::now();
    if (now >= until) return false;
    wait_events(std::min(until, now + std::chrono::milliseconds(2)));
  }
}

std::optional<int> WorkerHarness::wait_exit(std::chrono::milliseconds timeout) {
  const Clock::time_point until = Clock::now() + timeout;
  // Keep consuming while waiting: a worker blocked on a full result ring cannot exit.
  while (!status_) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
    if (auto m = next(std::max(left, std::chrono::milliseconds(0)))) {
      if (auto* log = std::get_if<ipc::LogMsg>(&*m)) {
        logs_.push_back(*log);
      } else {
        late_.push_back(std::move(*m));
      }
      continue;
    }
    if (exited_) {
      reap(0);
      break;
    }
    if (Clock::now() >= until) return std::nullopt;
  }
  read_output();  // the rest, up to EOF: the worker's copies of the pipe are closed
  return status_;
}

}  // namespace sandpool::testing
