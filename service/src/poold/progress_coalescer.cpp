#include <sandpool/service/progress_coalescer.hpp>

#include <utility>

#include <sandpool/base/thread_name.hpp>

#include <sandpool/control/op_json.hpp>

namespace sandpool::poold {

void ProgressCoalescer::Stream::send_locked(std::uint64_t task_id, std::string_view data) {
  // A waited submit's event frame (ops::Submit's Event).
  const ops::SubmitEvent progress{"progress", task_id, false};
  if (responder_.event(ops::encode(progress), std::string(data))) ++sent_;
}

void ProgressCoalescer::Stream::update(std::uint64_t task_id, std::string_view data) {
  bool park = false;
  {
    MutexLock lock(mu_);
    if (finished_) return;
    if (responder_.queued_output() < kMaxBacklog) {
      if (has_kept_) ++coalesced_;  // this newer update supersedes it
      has_kept_ = false;
      send_locked(task_id, data);
      return;
    }
    if (has_kept_) ++coalesced_;
    kept_.assign(data);
    kept_id_ = task_id;
    has_kept_ = true;
    park = !std::exchange(parked_, true);
  }
  if (!park) return;
  if (auto owner = owner_.lock()) owner->park(shared_from_this());
}

void ProgressCoalescer::Stream::finish() {
  MutexLock lock(mu_);
  if (finished_) return;
  finished_ = true;
  if (has_kept_) send_locked(kept_id_, kept_);
  has_kept_ = false;
  kept_ = std::string();
}

bool ProgressCoalescer::Stream::retry() {
  MutexLock lock(mu_);
  if (has_kept_ && !finished_ && responder_.queued_output() < kMaxBacklog) {
    send_locked(kept_id_, kept_);
    has_kept_ = false;
  }
  parked_ = has_kept_ && !finished_;
  return parked_;
}

std::uint64_t ProgressCoalescer::Stream::sent() const {
  MutexLock lock(mu_);
  return sent_;
}

std::uint64_t ProgressCoalescer::Stream::coalesced() const {
  MutexLock lock(mu_);
  return coalesced_;
}

std::shared_ptr<ProgressCoalescer> ProgressCoalescer::create() {
  std::shared_ptr<ProgressCoalescer> c(new ProgressCoalescer());
  c->thread_ = std::thread([raw = c.get()] { raw->run(); });
  name_thread(c->thread_.native_handle(), "sp-progress");
  return c;
}

ProgressCoalescer::~ProgressCoalescer() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<ProgressCoalescer::Stream> ProgressCoalescer::open(Responder responder) {
  return std::make_shared<Stream>(weak_from_this(), std::move(responder));
}

void ProgressCoalescer::park(std::shared_ptr<Stream> stream) {
  bool wake = false;
  {
    MutexLock lock(mu_);
    wake = parked_.empty();
    parked_.push_back(std::move(stream));
  }
  if (wake) cv_.notify_one();
}

void ProgressCoalescer::run() {
  MutexLock lock(mu_);
  while (!stopping_) {
    if (parked_.empty()) {
      cv_.wait(mu_);
      continue;
    }
    const auto retry_at = std::chrono::steady_clock::now() + kRetry;
    while (!stopping_ && cv_.wait_until(mu_, retry_at) != std::cv_status::timeout) {
    }
    if (stopping_) break;
    std::vector<std::shared_ptr<Stream>> due = std::move(parked_);
    parked_.clear();
    lock.unlock();
    std::vector<std::shared_ptr<Stream>> still;
    for (auto& s : due) {
      if (s->retry()) still.push_back(std::move(s));
    }
    due.clear();  // the last reference to a finished stream may go here, off the lock
    lock.lock();
    for (auto& s : still) parked_.push_back(std::move(s));
  }
}

}  // namespace sandpool::poold
