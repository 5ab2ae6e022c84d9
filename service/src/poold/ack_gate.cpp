#include <sandpool/service/ack_gate.hpp>

#include <algorithm>

namespace sandpool::poold {

AckGate::Accepted AckGate::on_accepted(std::shared_ptr<AckGate> gate, std::size_t index) {
  return
      [gate = std::move(gate), index](std::uint64_t, const Status& s) { gate->accepted(index, s); };
}

void AckGate::accepted(std::size_t index, const Status& s) {
  std::unique_lock<std::mutex> lock(mu_);
  ++answered_;
  if (!s) refusals_.emplace_back(index, s);
  maybe_send(std::move(lock));
}

void AckGate::release(std::size_t acks, Reply reply) {
  std::unique_lock<std::mutex> lock(mu_);
  expected_ = acks;
  reply_ = std::move(reply);
  maybe_send(std::move(lock));
}

void AckGate::maybe_send(std::unique_lock<std::mutex> lock) {
  if (sent_ || !expected_ || answered_ < *expected_) return;
  sent_ = true;
  std::sort(refusals_.begin(), refusals_.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  Reply reply = std::move(reply_);
  const Refusals refusals = refusals_;
  auto held = std::move(held_);
  lock.unlock();
  if (reply) reply(refusals);
  for (auto& [index, end] : held) {
    if (!refused(index)) end();
  }
}

void AckGate::after_reply(std::size_t index, std::function<void()> end) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!sent_) {
      held_.emplace_back(index, std::move(end));
      return;
    }
  }
  if (!refused(index)) end();
}

bool AckGate::refused(std::size_t index) const {
  std::lock_guard<std::mutex> lock(mu_);
  return std::any_of(refusals_.begin(), refusals_.end(),
                     [index](const auto& r) { return r.first == index; });
}

}  // namespace sandpool::poold
