// Service: the dispatch of control requests. handle() (the control server's thread) runs
// each operation on the thread its Lane names (<sandpool/control/control_ops.hpp>); run() finds its
// handler, generated for every operation of ops::AllOps: the arguments decoded by the one
// mapping (op_json.hpp), a malformed one refused `bad_request` naming the field before the
// handler runs.
// Also the operations answered on the server's thread: events and shutdown; and reload.
#include <string_view>
#include <utility>

#include <sandpool/service/service.hpp>

namespace sandpool::poold {

template <class Op>
void Service::run_typed(Service& s, const Request& req, const Responder& res) {
  typename Op::Args args;
  if (Status st = ops::decode(req.args, &args); !st) return (void)res.error(st);
  s.serve(req, args, OpResponder<Op>(res));
}

void Service::handle(Request req, Responder res) {
  // The server only passes on operations of the table (ControlServer::known_op).
  const ops::OpInfo* op = ops::find_op(req.op);
  if (op == nullptr) {
    return (void)res.error(Status::error(Code::kInternal, "unhandled op " + req.op));
  }
  switch (op->lane) {
    case ops::Lane::kServer:
      // What answers at once without waiting on anything: `status` reads the figures the
      // pools publish, so a monitor is answered during a batch (and may overtake requests
      // its connection sent before it).
      return run(req, res);
    case ops::Lane::kReads:
      // Snapshots, which may overtake admin requests sent before them, on a thread of their
      // own: a read-only client's flood never delays an admin's submits, and a batch,
      // replay or reload never delays a read.
      return reads_.post([this, req = std::move(req), res] { run(req, res); });
    case ops::Lane::kJobs:
      // Slow ones (the store, a reload's rolling restart).
      return jobs_.post([this, req = std::move(req), res] { run(req, res); });
    case ops::Lane::kRequests:
      // Submits and batches of thousands of tasks included, one at a time in arrival order:
      // a connection's requests take effect in the order it sent them.
      return requests_.post([this, req = std::move(req), res] { run(req, res); });
  }
}

const std::map<std::string_view, Service::Handler>& Service::handlers() {
  static const std::map<std::string_view, Handler> kHandlers = [] {
    std::map<std::string_view, Handler> m;
    ops::for_each_op(ops::AllOps{}, [&m]<class Op>() { m.emplace(Op::kName, &run_typed<Op>); });
    return m;
  }();
  return kHandlers;
}

void Service::run(const Request& req, const Responder& res) {
  const auto it = handlers().find(req.op);
  if (it == handlers().end()) {
    return (void)res.error(Status::error(Code::kInternal, "unhandled op " + req.op));
  }
  it->second(*this, req, res);
}

void Service::serve(const Request&, const ops::EventsArgs& a, const OpResponder<ops::Events>& res) {
  // The hub sends the event frames, then the final reply ({}, ops::EmptyReply) once the
  // stream ends.
  hub_->subscribe(a.pool, a.follow, res.responder());
}

void Service::serve(const Request&, const ops::NoArgs&, const OpResponder<ops::Reload>& res) {
  const Result<ops::ReloadReply> r = reload();  // on the job thread (Lane::kJobs)
  if (!r) return (void)res.error(r.status());
  res.ok(*r);
}

void Service::serve(const Request&, const ops::ShutdownArgs& a,
                    const OpResponder<ops::Shutdown>& res) {
  res.ok(ops::ShutdownReply{true});
  if (on_shutdown_) on_shutdown_(a.timeout);
}

}  // namespace sandpool::poold
