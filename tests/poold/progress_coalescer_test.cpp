// ProgressCoalescer with real Responders over a connection's Outbox (outbox_stream.hpp): a
// reader that keeps up gets every update; one that does not read gets the latest once it
// reads again, with the connection's queued bytes bounded meanwhile; finish() always sends
// the latest kept.
#include <catch2/catch.hpp>
#include <string>

#include <sandpool/service/progress_coalescer.hpp>
#include "outbox_stream.hpp"

namespace sandpool::testing {
namespace {

using poold::ProgressCoalescer;

std::string data_of(const control::Frame& f) { return f.blob; }

TEST_CASE("progress goes out update by update while the submitter reads") {
  auto coalescer = ProgressCoalescer::create();
  Stream s;
  auto p = coalescer->open(s.responder());
  for (int i = 0; i < 50; ++i) {
    p->update(9, "step " + std::to_string(i));
    REQUIRE(s.frames().size() == static_cast<std::size_t>(i + 1));
  }
  CHECK(p->sent() == 50);
  CHECK(p->coalesced() == 0);
  const auto events = s.events();
  CHECK(events.back()["event"] == "progress");
  CHECK(events.back()["id"] == 9);
  CHECK(data_of(s.frames().back()) == "step 49");
}

TEST_CASE("a submitter that does not read gets the latest progress once it does, and no more") {
  auto coalescer = ProgressCoalescer::create();
  Stream s;
  s.pause();
  auto p = coalescer->open(s.responder());
  const std::string big(32 * 1024, 'x');
  for (int i = 0; i < 10000; ++i) p->update(9, big + std::to_string(i));
  // Queued only while the backlog was under its bound: the rest replaced one kept update.
  CHECK(s.queued() < ProgressCoalescer::kMaxBacklog + 2 * big.size());
  const std::uint64_t sent = p->sent();
  CHECK(sent < 20);
  CHECK(p->coalesced() == 10000 - sent - 1);
  s.resume();
  // The retry thread sends the kept (latest) update once the bytes are taken.
  const auto& frames = s.wait_frames(sent + 1);
  REQUIRE(frames.size() == sent + 1);
  CHECK(data_of(frames.back()) == big + "9999");
  p->finish();  // nothing kept any more: nothing more
  CHECK(s.frames().size() == sent + 1);
  p->update(9, "after the end");
  CHECK(s.frames().size() == sent + 1);
}

TEST_CASE("finish sends the kept update whatever the backlog") {
  auto coalescer = ProgressCoalescer::create();
  Stream s;
  s.pause();
  auto p = coalescer->open(s.responder());
  const std::string big(64 * 1024, 'y');
  for (int i = 0; i < 100; ++i) p->update(3, big + std::to_string(i));
  const std::uint64_t sent = p->sent();
  p->finish();
  s.resume();
  const auto& frames = s.wait_frames(sent + 1);
  REQUIRE(frames.size() == sent + 1);
  CHECK(data_of(frames.back()) == big + "99");
}

}  // namespace
}  // namespace sandpool::testing
