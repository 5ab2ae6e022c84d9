// The control protocol's operations (docs/protocol.md, "Operations"), one definition each:
// a struct naming the operation, the rights it needs, the poold thread that runs it
// (`Lane`), and its typed arguments, reply and (for the operations that send event frames)
// events. The definitions live by family in <sandpool/ops/*.hpp>; `AllOps` below lists them,
// and everything else is generated from that list: the table the server checks names and
// rights against (kOps), poold's dispatch (every operation must have a handler, or poold
// does not compile) and the Client's typed call<Op>(). The JSON mapping of the types is the
// control library's own (control/include/sandpool/control/op_json.hpp), shared by the server and
// the Client, so the two cannot drift. This header has no JSON type.
//
// Adding an operation (docs/architecture.md, "How to add an operation"): its struct and
// types in the family's header and a line in AllOps; their mapping in op_json*.cpp; its
// handler, `Service::serve(...)` in poold; a poolctl command; a row in docs/protocol.md's
// table (a test compares the two).
#pragma once

#include <array>
#include <string_view>
#include <type_traits>

#include <sandpool/control/ops/admin.hpp>
#include <sandpool/control/ops/dead_letters.hpp>
#include <sandpool/control/ops/op_info.hpp>
#include <sandpool/control/ops/pool_controls.hpp>
#include <sandpool/control/ops/reads.hpp>
#include <sandpool/control/ops/schedules.hpp>
#include <sandpool/control/ops/tasks.hpp>

namespace sandpool::ops {

template <class... Ops>
struct OpList {
  static constexpr std::size_t size = sizeof...(Ops);
};

// Every operation the protocol has; the server answers any other name `unknown_op`.
using AllOps =
    OpList<ServerStatus, Version, Workers, Stats, Events, Task, TaskList, Wait, Submit, SubmitBatch,
           Cancel, Scale, Strategy, Drain, Resume, Restart, KillWorker, DlqList, DlqShow, DlqReplay,
           DlqPurge, DlqImport, Reload, Shutdown, ScheduleList, ScheduleShow, SchedulePause,
           ScheduleResume, ScheduleRunNow, ScheduleAdd, ScheduleRemove>;

// Whether Op sends event frames before its final reply, and their type (NoEvent if none).
template <class Op, class = void>
struct EventOf {
  using type = NoEvent;
};
template <class Op>
struct EventOf<Op, std::void_t<typename Op::Event>> {
  using type = typename Op::Event;
};

template <class Op>
constexpr bool is_stream() {
  if constexpr (requires { Op::kStream; }) {
    return Op::kStream;
  } else {
    return false;
  }
}

template <class Op>
constexpr OpInfo info_of() {
  return OpInfo{Op::kName, Op::kRights, Op::kLane, is_stream<Op>()};
}

template <class... Ops>
constexpr std::array<OpInfo, sizeof...(Ops)> table_of(OpList<Ops...>) {
  return {info_of<Ops>()...};
}

// The table of AllOps, in its order.
inline constexpr auto kOps = table_of(AllOps{});

// The row of `name`, or nullptr when the protocol has no such operation.
constexpr const OpInfo* find_op(std::string_view name) {
  for (const OpInfo& op : kOps) {
    if (op.name == name) return &op;
  }
  return nullptr;
}

// Calls f.template operator()<Op>() for every operation of AllOps, in order.
template <class F, class... Ops>
constexpr void for_each_op(OpList<Ops...>, F&& f) {
  (f.template operator()<Ops>(), ...);
}

}  // namespace sandpool::ops
