// DeadLetterStore: the letters that do not go to the database (refused for good, unwritten
// at close, enqueued after close) go whole to a spill file in the state dir
// (dead_letter_file.hpp), and every letter's receipt reaches its on_written.
#include <spdlog/spdlog.h>

#include <sandpool/store/dead_letter_file.hpp>
#include <sandpool/store/dead_letters.hpp>

#include "retry/dead_letter_store_impl.hpp"

namespace sandpool {
namespace {

constexpr std::size_t kRecentSpillFiles = 16;
constexpr std::size_t kLostTasksLogged = 100;

// "images/42 images/43 ..." for the log, the first kLostTasksLogged of them.
template <typename Letters>
std::string task_list(const Letters& letters) {
  std::string out;
  std::size_t n = 0;
  for (const auto& p : letters) {
    if (n++ == kLostTasksLogged) {
      out += " ...";
      break;
    }
    if (!out.empty()) out += ' ';
    out += p.letter.pool + "/" + std::to_string(p.letter.task.id);
  }
  return out;
}

}  // namespace

Result<std::string> DeadLetterStoreImpl::spill(const std::vector<PendingLetter>& letters,
                                               const std::string& why) {
  std::vector<const DeadLetter*> view;
  view.reserve(letters.size());
  for (const PendingLetter& p : letters) view.push_back(&p.letter);
  auto file = dead_letter_file::write_spill(opts_.state_dir, view, now_ms());
  if (!file) return file.status();
  {
    MutexLock lk(mu_);
    stats_.spilled += letters.size();
    ++stats_.spill_files;
    stats_.recent_spill_files.push_back(*file);
    if (stats_.recent_spill_files.size() > kRecentSpillFiles) {
      stats_.recent_spill_files.erase(stats_.recent_spill_files.begin());
    }
  }
  log_->warn(
      "dead-letter store {}: {} letters written to spill file {} ({}); load it with `poolctl "
      "dlq import` spill_file={} letters={} tasks=\"{}\"",
      path_, letters.size(), *file, why, *file, letters.size(), task_list(letters));
  return file;
}

std::vector<DeadLetterStoreImpl::Delivery> DeadLetterStoreImpl::spill_or_lose(
    std::vector<PendingLetter> letters, const std::string& why) {
  auto file = spill(letters, why);
  std::string lost;
  if (!file) {
    lost = why + ", and writing the spill file in " + opts_.state_dir +
           " failed: " + file.status().to_string();
    {
      MutexLock lk(mu_);
      stats_.lost += letters.size();
    }
    log_->critical("dead-letter store {}: {} DEAD LETTERS LOST: {} letters={} tasks=\"{}\"", path_,
                   letters.size(), lost, letters.size(), task_list(letters));
  }
  std::vector<Delivery> out;
  out.reserve(letters.size());
  for (PendingLetter& p : letters) {
    out.push_back({std::move(p.on_written), {0, file ? *file : std::string(), lost}});
  }
  return out;
}

void DeadLetterStoreImpl::deliver(std::vector<Delivery>& deliveries) {
  for (Delivery& d : deliveries) {
    if (!d.on_written) continue;
    try {
      d.on_written(d.receipt);
    } catch (const std::exception& e) {
      log_->error("dead-letter store {}: an on_written callback threw: {}", path_, e.what());
    }
  }
}

}  // namespace sandpool
