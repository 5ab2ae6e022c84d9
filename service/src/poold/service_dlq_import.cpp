// Service: dlq_import (job thread): the letters of a spill file (JSON lines in the blob)
// committed to the store in one transaction; letters it already holds, and letters whose task
// the journal holds, are skipped (docs/dead-letters.md, "Importing a spill file").
#include <spdlog/spdlog.h>

#include <sandpool/store/dead_letter_file.hpp>

#include <sandpool/service/service.hpp>

namespace sandpool::poold {

void Service::serve(const Request& req, const ops::DlqImportArgs& a,
                    const OpResponder<ops::DlqImport>& res) {
  auto letters = dead_letter_file::parse(req.blob, a.source, a.first_line);
  if (!letters) return (void)res.error(Status::invalid(letters.status().message()));
  auto done = store_->import_letters(*letters);
  if (!done) return (void)res.error(done.status());
  // A letter whose task the journal holds (open, or ended) is counted as present: the task is
  // in the journal already, and a second copy would run it twice.
  log_->info(
      "dead letters imported source={} lines_from={} imported={} already_present={} "
      "task_journaled={}",
      a.source, a.first_line, done->imported, done->already_present, done->journaled);
  res.ok({done->imported, done->already_present + done->journaled});
}

}  // namespace sandpool::poold
