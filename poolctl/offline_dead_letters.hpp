// `dlq --state-dir DIR`: the dead-letter store read, purged and imported into directly,
// without the service. Takes the same JSON arguments as the protocol's dlq_* operations and
// answers with the same reply shapes, so the commands print both alike (docs/poolctl.md).
//
// Owns an open DeadLetterStore (no retention bounds: opening it never deletes anything).
// Not thread-safe; one per command.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <sandpool/client.hpp>
#include <sandpool/status.hpp>

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
  // Fails with kNotFound when DIR holds no dead_letters.db (it is never created here).
  static Result<std::unique_ptr<OfflineDeadLetters>> open(const std::string& state_dir);
  ~OfflineDeadLetters();

  Result<nlohmann::json> list(const nlohmann::json& filter);  // dlq_list's filter and reply
  Result<Letter> show(std::uint64_t id);
  Result<nlohmann::json> purge(const nlohmann::json& selector);  // {"purged": n}
  // {"imported": n, "already_present": m}: all in one transaction, or nothing.
  Result<nlohmann::json> import_letters(const std::vector<DeadLetter>& letters);

 private:
  explicit OfflineDeadLetters(std::unique_ptr<DeadLetterStore> store);
  std::unique_ptr<DeadLetterStore> store_;
};

}  // namespace poolctl
}  // namespace sandpool
