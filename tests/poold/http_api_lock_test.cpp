// The HTTP API's lock (http/src/http/api.hpp, Api::mu_) is a leaf: a call it ends, after
// stop() or at its deadline, is abandoned without it, so what the abandon runs (the stream's
// on_cancel, which takes the event hub's lock in poold) never nests inside it.
#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>
#include <sandpool/control/control.hpp>

#include "http/api.hpp"
#include "http/http_access.hpp"

namespace sandpool::testing {
namespace {

// Keeps every request open, and when one is cancelled asks the Api for its open streams
// from another thread (which needs the Api's lock): whether that answered while the
// cancellation ran says whether the lock was free then.
class CancelProbe final : public ControlHandler {
 public:
  // Generous: a lock held by the cancelling thread is never released while it waits.
  static constexpr auto kPatience = std::chrono::seconds(30);

  void handle(Request, Responder responder) override {
    responder.on_cancel([this] {
      cancelled = true;
      std::promise<void> asked;
      std::future<void> answer = asked.get_future();
      asker = std::thread([this, asked = std::move(asked)]() mutable {
        (void)api->open_streams();
        asked.set_value();
      });
      answered_while_cancelling = answer.wait_for(kPatience) == std::future_status::ready;
    });
    open.push_back(std::move(responder));
  }

  http::Api* api = nullptr;
  std::vector<Responder> open;
  bool cancelled = false;
  bool answered_while_cancelling = false;
  std::thread asker;
};

TEST_CASE("http api: a call made after stop() is abandoned without the api's lock held") {
  CancelProbe probe;
  http::HttpAccess access = http::HttpAccess::with_tokens("", "");
  http::Api api(probe, access, http::ApiOptions{});
  probe.api = &api;
  api.stop();

  http::Caller admin;
  admin.access = http::Access::kAdmin;
  const http::CallReply reply = api.call("status", nlohmann::json::object(), {}, admin);
  if (probe.asker.joinable()) probe.asker.join();
  CHECK_FALSE(reply.ok);
  CHECK(reply.code == "unavailable");
  REQUIRE(probe.cancelled);
  CHECK(probe.answered_while_cancelling);
}

}  // namespace
}  // namespace sandpool::testing
