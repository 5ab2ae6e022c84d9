// Service: the dispatch of control requests. handle() (the control server's thread) runs
// each operation on the thread its Lane names (<sandpool/control_ops.hpp>); run() finds its
// handler. A typed handler gets its arguments decoded by the one mapping (op_json.hpp): a
// malformed argument is refused `bad_request` naming the field before the handler runs.
// Also the operations answered on the server's thread: events and shutdown; and reload.
#include <string_view>
#include <utility>

#include "poold/service.hpp"

namespace sandpool::poold {
namespace {

// A handler taking the request as it came (operations not yet given types of their own).
template <auto Method>
void untyped(Service& s, const Request& req, const Responder& res) {
  (s.*Method)(req, res);
}

// A handler taking Op's arguments, decoded, and answering Op's reply.
template <class Op, auto Method>
void typed(Service& s, const Request& req, const Responder& res) {
  typename Op::Args args;
  if (Status st = ops::decode(req.args, &args); !st) return (void)res.error(st);
  (s.*Method)(req, args, OpResponder<Op>(res));
}

}  // namespace

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
  static const std::map<std::string_view, Handler> kHandlers = {
      {ops::ServerStatus::kName, &typed<ops::ServerStatus, &Service::op_status>},
      {ops::Workers::kName, &typed<ops::Workers, &Service::op_workers>},
      {ops::Stats::kName, &typed<ops::Stats, &Service::op_stats>},
      {ops::Events::kName, &typed<ops::Events, &Service::op_events>},
      {ops::Task::kName, &typed<ops::Task, &Service::op_task>},
      {ops::Wait::kName, &typed<ops::Wait, &Service::op_wait>},
      {"submit", &untyped<&Service::op_submit>},
      {"submit_batch", &untyped<&Service::op_submit_batch>},
      {ops::Cancel::kName, &typed<ops::Cancel, &Service::op_cancel>},
      {ops::Scale::kName, &typed<ops::Scale, &Service::op_scale>},
      {ops::Strategy::kName, &typed<ops::Strategy, &Service::op_strategy>},
      {ops::Drain::kName, &typed<ops::Drain, &Service::op_drain>},
      {ops::Resume::kName, &typed<ops::Resume, &Service::op_resume>},
      {ops::Restart::kName, &typed<ops::Restart, &Service::op_restart>},
      {ops::KillWorker::kName, &typed<ops::KillWorker, &Service::op_kill_worker>},
      {ops::DlqList::kName, &typed<ops::DlqList, &Service::op_dlq_list>},
      {ops::DlqShow::kName, &typed<ops::DlqShow, &Service::op_dlq_show>},
      {ops::DlqReplay::kName, &typed<ops::DlqReplay, &Service::op_dlq_replay>},
      {ops::DlqPurge::kName, &typed<ops::DlqPurge, &Service::op_dlq_purge>},
      {ops::DlqImport::kName, &typed<ops::DlqImport, &Service::op_dlq_import>},
      {ops::Reload::kName, &typed<ops::Reload, &Service::op_reload>},
      {ops::Shutdown::kName, &typed<ops::Shutdown, &Service::op_shutdown>},
  };
  return kHandlers;
}

Status Service::check_handlers() {
  for (const ops::OpInfo& op : ops::kOps) {
    if (handlers().count(op.name) == 0) {
      return Status::error(Code::kInternal, "no handler for operation " + std::string(op.name));
    }
  }
  for (const auto& [name, handler] : handlers()) {
    if (ops::find_op(name) == nullptr) {
      return Status::error(Code::kInternal,
                           "a handler for " + std::string(name) + ", which is no operation");
    }
  }
  return Status::ok();
}

void Service::run(const Request& req, const Responder& res) {
  const auto it = handlers().find(req.op);
  if (it == handlers().end()) {
    return (void)res.error(Status::error(Code::kInternal, "unhandled op " + req.op));
  }
  it->second(*this, req, res);
}

void Service::op_events(const Request&, const ops::EventsArgs& a,
                        const OpResponder<ops::Events>& res) {
  // The hub sends the event frames, then the final reply ({}, ops::EmptyReply) once the
  // stream ends.
  hub_->subscribe(a.pool, a.follow, res.responder());
}

void Service::op_reload(const Request&, const ops::NoArgs&, const OpResponder<ops::Reload>& res) {
  const Result<ops::ReloadReply> r = reload();  // on the job thread (Lane::kJobs)
  if (!r) return (void)res.error(r.status());
  res.ok(*r);
}

void Service::op_shutdown(const Request&, const ops::ShutdownArgs& a,
                          const OpResponder<ops::Shutdown>& res) {
  res.ok(ops::ShutdownReply{true});
  if (on_shutdown_) on_shutdown_(a.timeout);
}

}  // namespace sandpool::poold
