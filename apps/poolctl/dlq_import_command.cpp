// dlq import FILE: a spill file's letters into the store, through the service (dlq_import
// requests) or, with --state-dir, directly. Every line is checked before anything is
// imported; after a full import the file is renamed FILE.imported (docs/poolctl.md).
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>

#include <sandpool/store/dead_letter_file.hpp>

#include "commands.hpp"
#include "offline_dead_letters.hpp"
#include "op_call.hpp"
#include "output.hpp"

namespace sandpool::poolctl {
namespace {

using nlohmann::json;

// Lines per dlq_import request: at most this many bytes of whole lines, well inside the
// protocol's max_frame (16 MiB + 64 KiB).
constexpr std::size_t kChunkBytes = 8 << 20;
constexpr std::size_t kMaxLineBytes = 16 << 20;

struct Chunk {
  std::string_view lines;
  std::uint64_t first_line = 1;
};

// Splits the text into runs of whole lines of at most kChunkBytes (one longer line is a run
// of its own); kTooLarge names a line over kMaxLineBytes.
Result<std::vector<Chunk>> chunks_of(std::string_view text, const std::string& file) {
  std::vector<Chunk> out;
  std::uint64_t line = 1;
  std::size_t start = 0, pos = 0;
  std::uint64_t start_line = 1;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    end = end == std::string_view::npos ? text.size() : end + 1;
    if (end - pos > kMaxLineBytes) {
      return Status::too_large(file + " line " + std::to_string(line) + " is " +
                               std::to_string(end - pos) +
                               " bytes, more than one request carries: import the file offline "
                               "(dlq --state-dir DIR import)");
    }
    if (end - start > kChunkBytes && pos > start) {
      out.push_back({text.substr(start, pos - start), start_line});
      start = pos;
      start_line = line;
    }
    pos = end;
    ++line;
  }
  if (pos > start) out.push_back({text.substr(start, pos - start), start_line});
  return out;
}

// Adds one reply's counts to the total.
void add_counts(json& total, const json& reply) {
  for (const char* k : {"imported", "already_present"}) {
    total[k] = total[k].get<std::uint64_t>() + reply.value(k, std::uint64_t{0});
  }
}

Status import_through_service(const Cli& cli, std::string_view text, const std::string& file,
                              json& total, int* exit_code) {
  auto chunks = chunks_of(text, file);
  if (!chunks) return chunks.status();
  auto client = connect(cli);
  if (!client) {
    *exit_code = kExitUnreachable;
    return Status::ok();
  }
  for (const Chunk& c : *chunks) {
    auto r =
        json_call_with_blob<ops::DlqImport>(*client, {file, c.first_line}, std::string(c.lines));
    if (!r) {
      return r.status().with_context(std::to_string(total["imported"].get<std::uint64_t>()) +
                                     " letters imported before lines from " +
                                     std::to_string(c.first_line) +
                                     " failed (importing again skips them)");
    }
    add_counts(total, *r);
  }
  return Status::ok();
}

}  // namespace

int run_dlq_import(const Cli& cli, const std::string& file, const std::string& state_dir) {
  auto text = dead_letter_file::read_file(file);
  if (!text) return fail("dlq import", text.status());
  auto letters = dead_letter_file::parse(*text, file);  // every line, before anything moves
  if (!letters) return fail("dlq import", letters.status());
  json total{{"imported", 0}, {"already_present", 0}};
  if (!state_dir.empty()) {
    auto store = OfflineDeadLetters::open(state_dir, OfflineDeadLetters::Journal::kConsult);
    if (!store) return fail("dlq --state-dir", store.status());
    auto r = (*store)->import_letters(*letters);
    if (!r) return fail("dlq import", r.status());
    add_counts(total, *r);
  } else {
    int exit_code = kExitOk;
    Status s = import_through_service(cli, *text, file, total, &exit_code);
    if (exit_code != kExitOk) return exit_code;
    if (!s) return fail("dlq import", s);
  }
  // Done: rename the file so that it is not imported again by mistake (importing it again
  // would skip every letter anyway).
  const std::string suffix = ".imported";
  std::string now = file;
  if (file.size() < suffix.size() ||
      file.compare(file.size() - suffix.size(), suffix.size(), suffix) != 0) {
    if (std::rename(file.c_str(), (file + suffix).c_str()) == 0) {
      now = file + suffix;
    } else {
      std::cerr << "poolctl: dlq import: cannot rename " << file << " to " << file << suffix << ": "
                << std::strerror(errno) << "\n";
    }
  }
  total["file"] = now;
  if (cli.json) {
    print_json(std::cout, total);
  } else {
    std::cout << total["imported"].get<std::uint64_t>() << " dead letters imported, "
              << total["already_present"].get<std::uint64_t>() << " already present";
    if (now != file) std::cout << "; " << file << " renamed to " << now;
    std::cout << "\n";
  }
  return kExitOk;
}

}  // namespace sandpool::poolctl
