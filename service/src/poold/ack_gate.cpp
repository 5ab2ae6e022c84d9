#include <sandpool/service/ack_gate.hpp>

#include <algorithm>

namespace sandpool::poold {

AckGate::Accepted AckGate::on_accepted(std::shared_ptr<AckGate> gate, std::size_t index) {
  return
      [gate = std::move(gate), index](std::uint64_t, const Status& s) { gate->accepted(index, s); };
}

void AckGate::accepted(std::size_t index, const Status& s) {
  std::optional<Sending> sending;
  {
    MutexLock lock(mu_);
    ++answered_;
    if (!s) refusals_.emplace_back(index, s);
    sending = take_sending_locked();
  }
  if (sending) send(std::move(*sending));
}

void AckGate::release(std::size_t acks, Reply reply) {
  std::optional<Sending> sending;
  {
    MutexLock lock(mu_);
    expected_ = acks;
    reply_ = std::move(reply);
    sending = take_sending_locked();
  }
  if (sending) send(std::move(*sending));
}

std::optional<AckGate::Sending> AckGate::take_sending_locked() {
  if (sent_ || !expected_ || answered_ < *expected_) return std::nullopt;
  sent_ = true;
  std::sort(refusals_.begin(), refusals_.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  return Sending{std::move(reply_), refusals_, std::move(held_)};
}

void AckGate::send(Sending s) {
  if (s.reply) s.reply(s.refusals);
  for (auto& [index, end] : s.held) {
    if (!refused(index)) end();
  }
}

void AckGate::after_reply(std::size_t index, std::function<void()> end) {
  {
    MutexLock lock(mu_);
    if (!sent_) {
      held_.emplace_back(index, std::move(end));
      return;
    }
  }
  if (!refused(index)) end();
}

bool AckGate::refused(std::size_t index) const {
  MutexLock lock(mu_);
  return std::any_of(refusals_.begin(), refusals_.end(),
                     [index](const auto& r) { return r.first == index; });
}

}  // namespace sandpool::poold
