// Service: dlq_import (job thread): the letters of a spill file (JSON lines in the blob)
// committed to the store in one transaction; letters it already holds are skipped
// (docs/dead-letters.md, "Importing a spill file").
#include <spdlog/spdlog.h>

#include <sandpool/dead_letter_file.hpp>

#include "poold/service.hpp"

namespace sandpool::poold {

void Service::op_dlq_import(const Request& req, const Responder& res) {
  const nlohmann::json& a = req.args;
  std::string source = "request";
  if (auto it = a.find("source"); it != a.end()) {
    if (!it->is_string()) return (void)res.error(Status::invalid("source: a file name"));
    source = it->get<std::string>();
  }
  std::uint64_t first_line = 1;
  if (auto it = a.find("first_line"); it != a.end()) {
    if (!it->is_number_unsigned() || it->get<std::uint64_t>() == 0) {
      return (void)res.error(Status::invalid("first_line: a line number from 1"));
    }
    first_line = it->get<std::uint64_t>();
  }
  auto letters = dead_letter_file::parse(req.blob, source, first_line);
  if (!letters) return (void)res.error(Status::invalid(letters.status().message()));
  auto done = store_->import_letters(*letters);
  if (!done) return (void)res.error(done.status());
  log_->info("dead letters imported source={} lines_from={} imported={} already_present={}", source,
             first_line, done->imported, done->already_present);
  res.ok({{"imported", done->imported}, {"already_present", done->already_present}});
}

}  // namespace sandpool::poold
