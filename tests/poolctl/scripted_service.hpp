// A stand-in for poold in poolctl's tests: a real ControlServer on a temporary socket whose
// handler answers every operation the way docs/protocol.md says the service does, from a
// small fixed world (pool "default" with two workers, task 7 with a history, dead letters
// 1 and 2). It records each request so tests can check what poolctl sent.
//
// Thread-safety: handle() runs on the server thread; the accessors may be called from the
// test thread at any time.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <sandpool/control/control.hpp>

namespace sandpool::testing {

struct SeenRequest {
  std::string op;
  nlohmann::json args;
  std::string blob;
};

class ScriptedService : public ControlHandler {
 public:
  // Starts the server on <dir>/poold.sock (the test fails if it cannot).
  explicit ScriptedService(const std::string& dir);
  ~ScriptedService() override;

  const std::string& socket() const { return socket_; }
  void handle(Request request, Responder responder) override;

  std::vector<SeenRequest> requests(const std::string& op) const;
  std::uint64_t batch_tasks() const;  // tasks received through submit_batch
  // Blocks until an `events --follow` stream is open (returns false after 60 s).
  bool wait_for_follower();
  // Sends one event to the open follow streams.
  void publish(const nlohmann::json& event);
  // Ends the open follow streams with an ok reply.
  void end_follow_streams();
  void stop();  // stops the server: clients see the connection close

 private:
  void answer(const Request& r, const Responder& out);
  void answer_submit(const Request& r, const Responder& out);
  void answer_batch(const Request& r, const Responder& out);
  void answer_dlq(const Request& r, const Responder& out);
  void answer_events(const Request& r, const Responder& out);

  std::string socket_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<SeenRequest> seen_;
  std::vector<Responder> followers_;
  std::uint64_t batch_tasks_ = 0;
  std::uint64_t stats_calls_ = 0;
  std::uint64_t next_id_ = 100;
  std::unique_ptr<ControlServer> server_;  // last: stopped before the rest goes
};

}  // namespace sandpool::testing
