// Typed, position-aware reading of YAML mappings for the config parser. Private to
// config/src/config. Nothing here throws: problems are collected in ConfigErrors with the key
// path and the 1-based line and column of the offending node.
#pragma once

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>
#include <sandpool/base/status.hpp>

namespace sandpool::config {

// Every problem found in one file. Not thread-safe; one per parse.
class ConfigErrors {
 public:
  explicit ConfigErrors(std::string source) : source_(std::move(source)) {}
  // Records `path: message` at `mark` (0-based as yaml-cpp gives it).
  void add(const YAML::Mark& mark, std::string_view path, std::string_view message);
  // `SOURCE:LINE:COLUMN: path: message`, the form add() records (for warnings).
  std::string format(const YAML::Mark& mark, std::string_view path, std::string_view message) const;
  std::size_t count() const { return entries_.size(); }
  // Ok when nothing was recorded; else kInvalidArgument listing the problems in file order,
  // one per line, as SOURCE:LINE:COLUMN: PATH: MESSAGE (at most kMaxReported of them).
  Status status() const;

  static constexpr std::size_t kMaxReported = 20;

 private:
  struct Entry {
    int line;
    int column;
    std::string text;
  };
  std::string source_;
  std::vector<Entry> entries_;
};

// What a node is, for "got ...": the quoted scalar, "a mapping", "a list" or "nothing".
std::string describe(const YAML::Node& node);

// Reads the keys of one mapping at `path` ("pools[1].limits"). A key that is absent leaves
// its field untouched (the default); a present key is parsed and checked, and each reader
// returns true iff the key was present and valid. A null or absent mapping reads as empty;
// anything else that is not a mapping is one error. finish() reports the keys nobody read.
// Holds references to `errors`; lives for one parse.
class MapReader {
 public:
  using Millis = std::chrono::milliseconds;

  MapReader(ConfigErrors& errors, const YAML::Node& node, std::string path);

  bool string(std::string_view key, std::string* out);  // a non-empty scalar
  bool string_list(std::string_view key, std::vector<std::string>* out);
  bool boolean(std::string_view key, bool* out);
  bool count(std::string_view key, std::uint64_t* out, std::uint64_t min, std::uint64_t max);
  bool count(std::string_view key, std::uint32_t* out, std::uint32_t min = 0);
  bool real(std::string_view key, double* out, double min);
  bool size(std::string_view key, std::uint64_t* out, std::uint64_t min = 0);
  bool duration(std::string_view key, Millis* out, Millis min = Millis(0));
  // One of `names`; stores the matching value.
  template <class T>
  bool choice(std::string_view key, T* out,
              std::initializer_list<std::pair<std::string_view, T>> names);

  // The nested mapping under `key` (an empty one when absent or null).
  MapReader section(std::string_view key);
  // The value node of `key`, marked as read; nullptr when absent. Valid while this lives.
  const YAML::Node* value(std::string_view key);
  bool has(std::string_view key) const;

  // An error about `key`: at its value when present, else at this mapping.
  void fail(std::string_view key, std::string_view message);
  std::string path_of(std::string_view key) const;
  const YAML::Node& node() const { return node_; }
  ConfigErrors& errors() { return errors_; }
  // Reports every key that no reader asked for, once.
  void finish();

 private:
  struct Entry {
    std::string key;
    YAML::Node key_node;
    YAML::Node value;
    bool used = false;
  };
  Entry* find(std::string_view key);
  static YAML::Mark mark_of(const Entry& e);
  // The present scalar text of `key`, or nullptr (absent, or an error naming `expected`).
  const std::string* scalar(std::string_view key, std::string_view expected);
  void expected(Entry& e, std::string_view what);

  ConfigErrors& errors_;
  YAML::Node node_;
  std::string path_;
  std::vector<Entry> entries_;      // in file order; not resized after construction
  std::vector<std::string> asked_;  // every key a reader asked for: the schema, for errors
  bool finished_ = false;
};

template <class T>
bool MapReader::choice(std::string_view key, T* out,
                       std::initializer_list<std::pair<std::string_view, T>> names) {
  std::string one_of;
  for (const auto& [name, v] : names) one_of += (one_of.empty() ? "" : ", ") + std::string(name);
  const std::string* text = scalar(key, "one of " + one_of);
  if (text == nullptr) return false;
  for (const auto& [name, v] : names) {
    if (*text == name) {
      *out = v;
      return true;
    }
  }
  expected(*find(key), "one of " + one_of);
  return false;
}

}  // namespace sandpool::config
