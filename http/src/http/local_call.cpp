#include "http/local_call.hpp"

#include <utility>

namespace sandpool::http {

std::shared_ptr<LocalCall> LocalCall::start(ControlHandler& handler, std::string op,
                                            nlohmann::json args, std::string blob, Rights rights) {
  auto call = std::make_shared<LocalCall>();
  LocalRequest local = local_request(call);
  {
    MutexLock lock(call->mu_);
    call->abandon_ = std::move(local.abandon);
  }
  Request req;
  req.op = std::move(op);
  req.args = args.is_object() ? std::move(args) : nlohmann::json::object();
  req.blob = std::move(blob);
  req.rights = rights;
  req.client_name = "http";
  try {
    handler.handle(std::move(req), local.responder);
  } catch (const std::exception& e) {
    local.responder.error("internal", std::string("the handler failed: ") + e.what());
  }
  return call;
}

bool LocalCall::take(Kind kind, std::string_view code, std::string body, std::string blob) {
  MutexLock lock(mu_);
  if (final_) return false;
  if (kind == Kind::kEvent) {
    if (events_.size() >= max_queued_) return false;
    queued_bytes_ += body.size();
    events_.push_back(std::move(body));
    cv_.notify_all();
    return true;
  }
  final_ = CallReply{kind == Kind::kOk, std::string(code), std::move(body), std::move(blob)};
  cv_.notify_all();
  return true;
}

bool LocalCall::accepting_events() const {
  MutexLock lock(mu_);
  return !final_ && events_.size() < max_queued_;
}

std::size_t LocalCall::queued_output() const {
  MutexLock lock(mu_);
  return queued_bytes_;
}

template <class Ready>
void LocalCall::wait_locked(Clock::time_point deadline, Ready ready) {
  while (!ready()) {
    if (deadline == Clock::time_point::max()) {
      cv_.wait(mu_);  // wait_until(max) may overflow converting the deadline
    } else if (cv_.wait_until(mu_, deadline) == std::cv_status::timeout) {
      return;
    }
  }
}

std::optional<CallReply> LocalCall::wait_final(Clock::time_point deadline) {
  MutexLock lock(mu_);
  wait_locked(deadline, [this] {
    mu_.assert_held();
    return final_.has_value();
  });
  return final_;
}

std::vector<std::string> LocalCall::next_events(Clock::time_point deadline,
                                                std::optional<CallReply>* final) {
  MutexLock lock(mu_);
  wait_locked(deadline, [this] {
    mu_.assert_held();
    return !events_.empty() || final_.has_value();
  });
  std::vector<std::string> out(std::make_move_iterator(events_.begin()),
                               std::make_move_iterator(events_.end()));
  events_.clear();
  queued_bytes_ = 0;
  if (out.empty() && final_) *final = final_;
  return out;
}

void LocalCall::abandon() {
  std::function<void()> fn;
  {
    MutexLock lock(mu_);
    fn = std::move(abandon_);
    abandon_ = nullptr;
    if (!final_) {
      final_ = CallReply{false, "unavailable", R"({"message":"the request was abandoned"})", {}};
      events_.clear();
      queued_bytes_ = 0;
    }
    cv_.notify_all();
  }
  if (fn) fn();  // outside mu_: it may end the stream, whose frames take mu_
}

}  // namespace sandpool::http
