// OpResponder: the Responder of one typed operation (<sandpool/control/control_ops.hpp>): its final
// reply is the operation's Reply type and its event frames its Event type, encoded by the one
// mapping (op_json.hpp), and its errors are Statuses, sent under their wire code (wire_errors.hpp).
// Thread-safe and copyable like the Responder it wraps.
#pragma once

#include <string>
#include <utility>

#include <sandpool/control/control.hpp>

#include <sandpool/control/op_json.hpp>

namespace sandpool {

template <class Op>
class OpResponder {
 public:
  explicit OpResponder(Responder res) : res_(std::move(res)) {}
  bool ok(const typename Op::Reply& reply, std::string blob = {}) const {
    return res_.ok(ops::encode(reply), std::move(blob));
  }
  // An event frame before the final reply (operations with an Event type only).
  bool event(const typename ops::EventOf<Op>::type& event, std::string blob = {}) const {
    return res_.event(ops::encode(event), std::move(blob));
  }
  bool error(const Status& status) const { return res_.error(status); }
  const Responder& responder() const { return res_; }

 private:
  Responder res_;
};

}  // namespace sandpool
