// A real ControlServer on a temporary socket, a fake handler, and the real Client.
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "control_fixture.hpp"

using namespace sandpool;
using namespace sandpool::testing;
using nlohmann::json;

namespace {

ControlServerOptions options_for(const TempDir& dir) {
  ControlServerOptions o;
  o.path = dir.file("poold.sock");
  o.server_name = "fake-poold";
  return o;
}

}  // namespace

TEST_CASE("the handshake tells the client the server's version, name and its rights") {
  TempDir dir;
  FakeHandler handler;
  auto server = start_server(options_for(dir), handler);
  Client client = connect_client(server->path(), "poolctl");
  CHECK(server_hello(client)["version"] == 1);
  CHECK(server_hello(client)["server"] == "fake-poold");
  CHECK(client.rights() == "admin");  // the test runs as the server's own uid
  auto st = raw_body(client, "status");
  REQUIRE(st);
  CHECK((*st)["client"] == "poolctl");
  CHECK((*st)["rights"] == "admin");
}

TEST_CASE("a client speaking another protocol version gets unsupported_version and a close") {
  TempDir dir;
  FakeHandler handler;
  auto server = start_server(options_for(dir), handler);
  RawConnection raw(server->path());
  raw.hello(2);
  auto reply = raw.read();
  REQUIRE(reply);
  CHECK(reply->kind == control::FrameKind::kError);
  CHECK(reply->name == "unsupported_version");
  CHECK(reply->id == 1);
  CHECK_FALSE(raw.read());
}

TEST_CASE("requests before the hello are refused and the connection closed") {
  TempDir dir;
  FakeHandler handler;
  auto server = start_server(options_for(dir), handler);
  RawConnection raw(server->path());
  raw.send(control::FrameKind::kRequest, 3, "status", "{}");
  auto reply = raw.read();
  REQUIRE(reply);
  CHECK(reply->name == "bad_request");
  CHECK_FALSE(raw.read());
  CHECK(handler.ops().empty());
}

TEST_CASE("pipelined requests are answered out of order on one connection") {
  TempDir dir;
  FakeHandler handler;
  handler.park("task");
  auto server = start_server(options_for(dir), handler);
  Client client = connect_client(server->path());

  // Callbacks run on the client's reader thread: they record, the test thread checks.
  std::mutex mu;
  std::vector<std::uint64_t> order;  // the task each reply named, in arrival order
  std::promise<void> both;
  auto done = [&](std::uint64_t which) {
    return [&, which](Result<Reply> r) {
      std::lock_guard<std::mutex> lock(mu);
      order.push_back(r && r->body["task"] == which ? which : 0);
      if (order.size() == 2) both.set_value();
    };
  };
  REQUIRE(raw_start(client, "task", {{"id", 1}}, {}, {}, done(1)));
  REQUIRE(raw_start(client, "task", {{"id", 2}}, {}, {}, done(2)));
  auto parked = handler.take_parked(2);

  // While both wait, another request on the same connection is answered.
  REQUIRE(raw_body(client, "status"));

  // Answer the second first, from another thread, as a pool's loop would.
  std::thread([&] {
    parked[1].responder.ok({{"task", parked[1].request.args["id"]}});
    parked[0].responder.ok({{"task", parked[0].request.args["id"]}});
  }).join();
  REQUIRE(both.get_future().wait_for(kPatience) == std::future_status::ready);
  CHECK(order == std::vector<std::uint64_t>{2, 1});
}

TEST_CASE("many threads share one client, each request gets its own reply") {
  TempDir dir;
  FakeHandler handler;
  auto server = start_server(options_for(dir), handler);
  Client client = connect_client(server->path());
  std::vector<std::thread> threads;
  std::atomic<int> good{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        auto r = raw_body(client, "scale", {{"pool", "pool" + std::to_string(t)}, {"workers", i}});
        if (r && (*r)["args"]["workers"] == i && (*r)["args"]["pool"] == "pool" + std::to_string(t))
          ++good;
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(good == 800);
}

TEST_CASE("replies sent from many threads reach the right requests of many threads") {
  TempDir dir;
  FakeHandler handler;
  // The handler answers on other threads, each request with events and then its reply.
  std::mutex mu;
  std::vector<std::thread> repliers;
  handler.on_request = [&](Request req, const Responder& r) {
    std::lock_guard<std::mutex> lock(mu);
    repliers.emplace_back([r, n = req.args["n"]] {
      r.event({{"n", n}});
      r.ok({{"n", n}});
    });
  };
  auto server = start_server(options_for(dir), handler);
  Client client = connect_client(server->path());
  constexpr int kPerThread = 300;
  std::atomic<int> right{0};
  std::atomic<int> finished{0};
  std::atomic<int> refused{0};
  std::promise<void> all;
  std::vector<std::thread> senders;
  for (int t = 0; t < 2; ++t) {
    senders.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const int n = t * kPerThread + i;
        auto events = std::make_shared<std::atomic<int>>(0);
        auto started = raw_start(
            client, "scale", {{"n", n}}, {},
            [events, n](const Reply& e) {
              if (e.body["n"] == n) ++*events;
            },
            [&, events, n](Result<Reply> r) {
              if (r && r->body["n"] == n && events->load() == 1) ++right;
              if (++finished == 2 * kPerThread) all.set_value();
            });
        if (!started) ++refused;  // counted: Catch2 assertions are not thread-safe
      }
    });
  }
  for (auto& s : senders) s.join();
  REQUIRE(refused == 0);
  REQUIRE(all.get_future().wait_for(kPatience) == std::future_status::ready);
  CHECK(right == 2 * kPerThread);
  std::lock_guard<std::mutex> lock(mu);
  for (auto& th : repliers) th.join();
}

TEST_CASE("a waited submit streams progress, then the raw result") {
  TempDir dir;
  FakeHandler handler;
  auto server = start_server(options_for(dir), handler);
  Client client = connect_client(server->path());
  SubmitRequest task;
  task.type = "echo";
  task.payload = std::string("ab\0c", 4);
  task.options.idempotency_key = "k1";
  std::vector<std::string> progress;
  auto r = client.submit_wait(task, [&](std::uint64_t id, const std::string& p) {
    CHECK(id == 7);
    progress.push_back(p);
  });
  REQUIRE(r);
  CHECK(r->id == 7);
  CHECK(r->state == "completed");
  CHECK(r->result == std::string("c\0ba", 4));
  CHECK(progress == std::vector<std::string>{"half", "all"});

  auto plain = client.submit(task);
  REQUIRE(plain);
  CHECK(plain->id == 7);
}

TEST_CASE("submit passes every option through and an async submit completes by callback") {
  TempDir dir;
  FakeHandler handler;
  handler.park("submit");
  auto server = start_server(options_for(dir), handler);
  Client client = connect_client(server->path());
  SubmitRequest task;
  task.type = "upper";
  task.payload = "hello";
  task.pool = "p1";
  task.options.priority = 5;
  task.options.timeout = std::chrono::milliseconds(1500);
  task.options.retries = 2;
  task.options.key = "aff";
  task.options.idempotency_key = "idem";
  std::promise<Result<TaskReply>> done;
  REQUIRE(client.submit_async(task, [&](Result<TaskReply> r) { done.set_value(std::move(r)); }));
  auto parked = handler.take_parked(1);
  const json& a = parked[0].request.args;
  CHECK(a["type"] == "upper");
  CHECK(a["pool"] == "p1");
  CHECK(a["priority"] == 5);
  CHECK(a["timeout_ms"] == 1500);
  CHECK(a["retries"] == 2);
  CHECK(a["key"] == "aff");
  CHECK(a["idempotency_key"] == "idem");
  CHECK(a["wait"] == true);
  CHECK(parked[0].request.blob == "hello");
  parked[0].responder.ok({{"id", 9}, {"state", "dead_lettered"}, {"reason", "permanent"}});
  auto fut = done.get_future();
  REQUIRE(fut.wait_for(kPatience) == std::future_status::ready);
  auto r = fut.get();
  REQUIRE(r);
  CHECK(r->state == "dead_lettered");
  CHECK(r->reason == "permanent");
}

namespace {

// A handler's view of submit_batch: each task's options and payload.
std::vector<std::pair<json, std::string>> batch_tasks(const Request& req) {
  std::vector<std::pair<json, std::string>> out;
  std::size_t off = 0;
  const json& lens = req.args["payload_lens"];
  for (std::size_t i = 0; i < lens.size(); ++i) {
    const auto len = lens[i].get<std::size_t>();
    json options = req.args.contains("tasks") ? req.args["tasks"][i] : req.args["defaults"];
    out.emplace_back(std::move(options), req.blob.substr(off, len));
    off += len;
  }
  return out;
}

}  // namespace

TEST_CASE("a batch carries every payload raw and returns an id or an error per task") {
  TempDir dir;
  FakeHandler handler;
  std::mutex mu;
  std::vector<std::pair<json, std::string>> seen;
  handler.on_request = [&](Request req, const Responder& r) {
    auto tasks = batch_tasks(req);
    json ids = json::array(), errors = json::array(), existing = json::array();
    std::uint64_t id = 100;
    for (std::size_t i = 0; i < tasks.size(); ++i) {
      if (tasks[i].second == "full") {
        ids.push_back(0);
        errors.push_back({{"index", i}, {"code", "queue_full"}, {"message", "queue is full"}});
      } else {
        if (tasks[i].first.value("idempotency_key", "") == "again") existing.push_back(i);
        ids.push_back(id++);
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      seen = std::move(tasks);
    }
    r.ok({{"ids", ids}, {"errors", errors}, {"existing", existing}});
  };
  auto server = start_server(options_for(dir), handler);
  Client client = connect_client(server->path());

  SECTION("tasks sharing their options send them once") {
    std::vector<SubmitRequest> tasks(3);
    tasks[0].payload = "one";
    tasks[1].payload = "full";
    tasks[2].payload = std::string(1000, '\0');
    for (auto& t : tasks) t.type = "echo";
    auto r = client.submit_batch(tasks);
    REQUIRE(r);
    REQUIRE(r->size() == 3);
    CHECK((*r)[0].id == 100);
    CHECK((*r)[0].status.is_ok());
    CHECK((*r)[1].status.code() == Code::kQueueFull);
    CHECK((*r)[2].id == 101);
    std::lock_guard<std::mutex> lock(mu);
    REQUIRE(seen.size() == 3);
    CHECK(seen[2].second == std::string(1000, '\0'));
    CHECK(seen[1].first["type"] == "echo");
  }
  SECTION("tasks with their own options carry them each") {
    std::vector<SubmitRequest> tasks(2);
    tasks[0].type = "echo";
    tasks[0].payload = "a";
    tasks[1].type = "upper";
    tasks[1].payload = "b";
    tasks[1].options.idempotency_key = "again";
    auto r = client.submit_batch(tasks);
    REQUIRE(r);
    CHECK_FALSE((*r)[0].existing);
    CHECK((*r)[1].existing);
    std::lock_guard<std::mutex> lock(mu);
    REQUIRE(seen.size() == 2);
    CHECK(seen[1].first["type"] == "upper");
    CHECK(seen[1].second == "b");
  }
}

TEST_CASE("an events stream delivers until the client stops it and the handler sees the cancel") {
  TempDir dir;
  FakeHandler handler;
  handler.park("events");
  auto server = start_server(options_for(dir), handler);
  Client client = connect_client(server->path());
  // The producer thread and the client's reader thread record; the test thread checks
  // (Catch2 assertions are not thread-safe).
  std::promise<void> cancelled;
  json request_args;
  int events_queued = 0;
  bool cancel_seen = false, late_event_sent = true, open_after = true;
  std::thread producer([&] {
    auto p = handler.take_parked(1);
    request_args = p[0].request.args;
    p[0].responder.on_cancel([&] { cancelled.set_value(); });
    for (int i = 0; i < 5; ++i) {
      events_queued += p[0].responder.event({{"event", "task_ended"}, {"task_id", i}});
    }
    cancel_seen = cancelled.get_future().wait_for(kPatience) == std::future_status::ready;
    late_event_sent = p[0].responder.event({{"event", "late"}});
    open_after = p[0].responder.is_open();
  });
  int seen = 0;
  int out_of_order = 0;
  Status st = client.events(true, "p1", [&](const ops::PoolEventRecord& e) {
    out_of_order += e.task_id != static_cast<std::uint64_t>(seen);
    return ++seen < 5;
  });
  producer.join();
  CHECK(request_args["follow"] == true);
  CHECK(request_args["pool"] == "p1");
  CHECK(events_queued == 5);
  CHECK(cancel_seen);
  CHECK_FALSE(late_event_sent);
  CHECK_FALSE(open_after);
  CHECK(out_of_order == 0);
  CHECK(st.is_ok());
  CHECK(seen == 5);
  REQUIRE(raw_body(client, "status"));  // the connection carries on after the cancelled stream
}

TEST_CASE("a read-only peer may observe but is refused an admin operation") {
  TempDir dir;
  FakeHandler handler;
  auto o = options_for(dir);
  o.access.self_is_admin = false;
  o.access.root_is_admin = false;
  o.access.grants = {
      {AccessGrant::Kind::kUid, static_cast<std::uint32_t>(::getuid()), Rights::kRead}};
  auto server = start_server(o, handler);
  Client client = connect_client(server->path());
  CHECK(client.rights() == "read");
  REQUIRE(raw_body(client, "status"));
  auto r = as_json(client.scale("p", 3));
  REQUIRE_FALSE(r);
  CHECK(r.status().code() == Code::kPermissionDenied);
  CHECK(error_code_of(r.status()) == "forbidden");
  CHECK(handler.ops() == std::vector<std::string>{"status"});
}

TEST_CASE("a peer outside the allow-list is refused at connect") {
  TempDir dir;
  FakeHandler handler;
  auto o = options_for(dir);
  o.access.self_is_admin = false;
  o.access.root_is_admin = false;
  o.access.grants = {
      {AccessGrant::Kind::kUid, static_cast<std::uint32_t>(::getuid()) + 1, Rights::kAdmin}};
  auto server = start_server(o, handler);
  auto c = Client::connect(server->path());
  REQUIRE_FALSE(c);
  CHECK(c.status().code() == Code::kPermissionDenied);
}

TEST_CASE("an unanswered, a throwing and an unknown request each get an error reply") {
  TempDir dir;
  FakeHandler handler;
  handler.on_request = [](Request req, const Responder& r) {
    if (req.op == "reload") throw std::runtime_error("boom");
    if (req.op == "drain") return;  // drops the responder
    FakeHandler::respond(std::move(req), r);
  };
  auto server = start_server(options_for(dir), handler);
  Client client = connect_client(server->path());
  auto thrown = as_json(client.reload());
  REQUIRE_FALSE(thrown);
  CHECK(error_code_of(thrown.status()) == "internal");
  CHECK(thrown.status().message().find("boom") != std::string::npos);
  auto dropped = as_json(client.drain("p"));
  REQUIRE_FALSE(dropped);
  CHECK(error_code_of(dropped.status()) == "internal");
  auto unknown = raw_call(client, "frobnicate");
  REQUIRE_FALSE(unknown);
  CHECK(error_code_of(unknown.status()) == "unknown_op");
  REQUIRE(raw_body(client, "status"));
}

TEST_CASE("a responder that outlives its server is a no-op and the client learns it is gone") {
  TempDir dir;
  FakeHandler handler;
  handler.park("task");
  auto server = start_server(options_for(dir), handler);
  Client client = connect_client(server->path());
  std::promise<Status> done;
  REQUIRE(raw_start(client, "task", {{"id", 1}}, {}, {},
                    [&](Result<Reply> r) { done.set_value(r.status()); }));
  auto parked = handler.take_parked(1);
  server.reset();
  auto fut = done.get_future();
  REQUIRE(fut.wait_for(kPatience) == std::future_status::ready);
  CHECK(fut.get().code() == Code::kUnavailable);
  CHECK_FALSE(parked[0].responder.is_open());
  CHECK_FALSE(parked[0].responder.ok({{"late", true}}));
  auto after = raw_body(client, "status");
  REQUIRE_FALSE(after);
  CHECK(after.status().code() == Code::kUnavailable);
}

TEST_CASE("a handler that stops the server from shutdown still gets its answer out") {
  TempDir dir;
  FakeHandler handler;
  ControlServer* server_ptr = nullptr;
  handler.on_request = [&](Request req, const Responder& r) {
    if (req.op != "shutdown") return FakeHandler::respond(std::move(req), r);
    r.ok({{"stopping", true}});
    server_ptr->stop();
  };
  auto server = start_server(options_for(dir), handler);
  server_ptr = server.get();
  Client client = connect_client(server->path());
  auto r = as_json(client.shutdown());
  REQUIRE(r);
  CHECK((*r)["stopping"] == true);
  auto after = raw_body(client, "status");
  REQUIRE_FALSE(after);
  CHECK(after.status().code() == Code::kUnavailable);
  server.reset();
  CHECK_FALSE(std::filesystem::exists(dir.file("poold.sock")));
}

TEST_CASE("every typed operation sends its documented op and arguments") {
  TempDir dir;
  FakeHandler handler;
  auto server = start_server(options_for(dir), handler);
  Client client = connect_client(server->path());
  // The fake server echoes each request, which no typed reply decodes: what was sent is read
  // from the server's side.
  auto args_of = [&handler](const auto&) { return handler.last_request(); };
  CHECK(args_of(client.workers("p")) == R"(workers {"pool":"p"})");
  CHECK(args_of(client.stats()) == "stats {}");
  CHECK(args_of(client.cancel(4)) == R"(cancel {"id":4})");
  CHECK(args_of(client.strategy("p", "least-loaded")) ==
        R"(strategy {"pool":"p","strategy":"least-loaded"})");
  CHECK(args_of(client.resume("p")) == R"(resume {"pool":"p"})");
  CHECK(args_of(client.restart("p", true)) == R"(restart {"pool":"p","rolling":true})");
  CHECK(args_of(client.kill_worker("p", 123, 9)) ==
        R"(kill_worker {"pid":123,"pool":"p","signal":9})");
  ops::DlqListArgs list;
  list.filter.reason = "permanent";
  list.limit = 10;
  CHECK(args_of(client.dlq_list(list)) == R"(dlq_list {"limit":10,"reason":"permanent"})");
  ops::DlqSelector all;
  all.all = true;
  CHECK(args_of(client.dlq_replay(all)) == R"(dlq_replay {"all":true})");
  ops::DlqSelector older;
  older.older_than_ms = std::chrono::milliseconds(1000);
  CHECK(args_of(client.dlq_purge(older)) == R"(dlq_purge {"older_than_ms":1000})");
  CHECK(args_of(client.shutdown(std::chrono::milliseconds(2500))) ==
        R"(shutdown {"timeout_ms":2500})");
  auto loaded =
      raw_body(client, "dlq_import", {{"source", "spill.jsonl"}, {"first_line", 7}}, "{}\n");
  REQUIRE(loaded);
  CHECK((*loaded)["op"] == "dlq_import");
  CHECK((*loaded)["args"] == json{{"source", "spill.jsonl"}, {"first_line", 7}});
  CHECK((*loaded)["blob"] == "{}\n");  // the lines travel raw in the blob
  auto show = raw_call(client, "dlq_show", {{"id", 3}});
  REQUIRE(show);
  CHECK(show->body["args"]["id"] == 3);
  auto task = raw_call(client, "task", {{"id", 5}});
  REQUIRE(task);
  CHECK(task->body["args"]["id"] == 5);
}

TEST_CASE("the server thread is named sp-control and runs at the nice value asked for") {
  // A positive value: any user may lower a thread's priority (a negative one needs root).
  TempDir dir;
  FakeHandler handler;
  ControlServerOptions o = options_for(dir);
  o.thread_nice = 7;
  auto server = start_server(o, handler);
  // Once a request was answered, the thread is past its set-up.
  Client client = connect_client(server->path(), "poolctl");
  REQUIRE(raw_body(client, "status"));
  int found = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    std::getline(comm, name);
    if (name != "sp-control") continue;
    ++found;
    // /proc/<tid>/stat: the nice value is field 19, counted after the ")" that ends comm.
    std::ifstream stat(task.path() / "stat");
    std::string line;
    std::getline(stat, line);
    std::istringstream rest(line.substr(line.rfind(')') + 2));
    std::string field;
    for (int i = 3; i <= 19 && rest >> field; ++i) {
    }
    CHECK(field == "7");
  }
  CHECK(found == 1);
}
