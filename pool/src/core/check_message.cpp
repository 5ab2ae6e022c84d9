#include "core/check_message.hpp"

#include <string>

#include <sandpool/base/log_text.hpp>

#include "supervision/output_limiter.hpp"

namespace sandpool::core {

Status check_message(std::uint16_t kind, std::string_view frame, const MessageLimits& limits,
                     WorkerMessage* out) {
  switch (static_cast<ipc::MsgKind>(kind)) {
    case ipc::MsgKind::kResult: {
      // The last message's alternative is reused when it was a result (the usual case): the
      // decode sets every member.
      auto* r = std::get_if<ipc::ResultMsg>(out);
      auto& m = r != nullptr ? *r : out->emplace<ipc::ResultMsg>();
      SP_RETURN_IF_ERROR(ipc::decode(frame, &m));
      if (m.data.size() > limits.max_result) {
        m.status = ipc::TaskStatus::kResultTooLarge;
        m.data.clear();
      }
      if (m.error.size() > limits.max_task_error) m.error = supervision::capped_log_line(m.error);
      return Status::ok();
    }
    case ipc::MsgKind::kProgress: {
      auto& m = out->emplace<ipc::ProgressMsg>();
      SP_RETURN_IF_ERROR(ipc::decode(frame, &m));
      if (m.data.size() > limits.max_progress_data) m.data.resize(limits.max_progress_data);
      return Status::ok();
    }
    case ipc::MsgKind::kLog:
      return ipc::decode(frame, &out->emplace<ipc::LogMsg>());
    case ipc::MsgKind::kReady: {
      auto& m = out->emplace<ipc::ReadyMsg>();
      SP_RETURN_IF_ERROR(ipc::decode(frame, &m));
      m.isolation = log_text(m.isolation, limits.max_isolation);
      return Status::ok();
    }
    default:
      return Status::protocol("unknown message kind " + std::to_string(kind));
  }
}

}  // namespace sandpool::core
