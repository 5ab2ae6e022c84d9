// `dlq --state-dir DIR`: the dead-letter store read, purged and imported into directly,
// without the service. Takes the same JSON arguments as the protocol's dlq_* operations and
// answers with the same reply shapes, so the commands print both alike (docs/poolctl.md).
//
// Owns an open DeadLetterStore (no retention bounds: opening it never deletes anything).
// Not thread-safe; one per command.
//
// An import consults the task journal kept in the same file (docs/journal.md): a letter whose
// task the journal still holds open (poold stopped before that letter was written, so the task
// runs again at the next start) is skipped and counted already_present, as poold's own
// `dlq import` does. Without that, the task would both run again and sit in the store.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <sandpool/base/status.hpp>
#include <sandpool/control/client.hpp>

namespace sandpool {
class DeadLetterStore;
struct DeadLetter;

namespace poolctl {

// One letter as `dlq show` prints it: the reply's JSON and the payload bytes.
struct Letter {
  nlohmann::json letter;
  std::string payload;
};

class OfflineDeadLetters {
 public:
  // Whether open() loads the task journal too: only imports need it (a large journal takes
  // a while to read, and nothing else offline looks at it).
  enum class Journal : bool { kIgnore, kConsult };

  // Fails with kNotFound when DIR holds no dead_letters.db (it is never created here).
  static Result<std::unique_ptr<OfflineDeadLetters>> open(const std::string& state_dir,
                                                          Journal journal = Journal::kIgnore);
  ~OfflineDeadLetters();

  Result<nlohmann::json> list(const nlohmann::json& filter);  // dlq_list's filter and reply
  Result<Letter> show(std::uint64_t id);
  Result<nlohmann::json> purge(const nlohmann::json& selector);  // {"purged": n}
  // {"imported": n, "already_present": m}: all in one transaction, or nothing. Letters whose
  // task the journal holds (opened with Journal::kConsult) count as already present.
  Result<nlohmann::json> import_letters(const std::vector<DeadLetter>& letters);

 private:
  explicit OfflineDeadLetters(std::unique_ptr<DeadLetterStore> store);
  std::unique_ptr<DeadLetterStore> store_;
};

}  // namespace poolctl
}  // namespace sandpool
