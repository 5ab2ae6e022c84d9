// cereal archives over memory: one that appends to a std::string, one that counts the bytes it
// would append, and one that reads from a buffer it never reads past. Shared by the worker
// channel's messages (ipc/src/wire_archive.hpp) and the task journal's round log
// (store/src/retry/journal_records.cpp).
//
// cereal's own binary archive trusts its input: it would resize a string to whatever length
// the bytes claim. The input archive here is bounded (it knows how many bytes remain and
// throws rather than read past them), and byte strings are read through load_bytes(), which
// checks a declared length against remaining() before allocating. Encoding is fixed-width
// little-endian (both ends run on the same machine) with u64 lengths.
#pragma once

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

#include <cereal/cereal.hpp>

namespace sandpool::ipc::wire {

// A malformed encoding; what() says what was wrong, field() which member it was in.
class DecodeError : public std::runtime_error {
 public:
  DecodeError(const char* field, const std::string& what)
      : std::runtime_error(what), field_(field) {}
  const char* field() const { return field_; }

 private:
  const char* field_;
};

// The archives are rebound to new buffers rather than constructed per message: cereal's
// archive bases carry hash tables for shared pointers, polymorphism and versioning (unused
// here) whose construction and destruction cost more than encoding a small message (2-4x
// measured). Rebinding is safe because this codec never puts anything in those tables.

// Appends to a std::string owned by the caller (who reserves once, see SizeArchive).
class StringOutputArchive
    : public cereal::OutputArchive<StringOutputArchive, cereal::AllowEmptyClassElision> {
 public:
  StringOutputArchive() : OutputArchive(this) {}
  void rebind(std::string* out) { out_ = out; }
  void saveBinary(const void* data, std::size_t size) {
    out_->append(static_cast<const char*>(data), size);
  }

 private:
  std::string* out_ = nullptr;
};

// Counts the bytes StringOutputArchive would write, so the output is allocated once.
class SizeArchive : public cereal::OutputArchive<SizeArchive, cereal::AllowEmptyClassElision> {
 public:
  SizeArchive() : OutputArchive(this) {}
  void reset() { size_ = 0; }
  void saveBinary(const void*, std::size_t size) { size_ += size; }
  std::size_t size() const { return size_; }

 private:
  std::size_t size_ = 0;
};

// Reads from a string_view it does not own; never reads past its end.
class BoundedInputArchive
    : public cereal::InputArchive<BoundedInputArchive, cereal::AllowEmptyClassElision> {
 public:
  BoundedInputArchive() : InputArchive(this) {}
  void rebind(std::string_view in) {
    in_ = in;
    field_ = "header";
  }

  // Returns the next n bytes and consumes them; throws DecodeError when fewer remain.
  std::string_view take(std::size_t n) {
    if (n > in_.size()) [[unlikely]] {
      throw_short(n);
    }
    std::string_view r(in_.data(), n);
    in_.remove_prefix(n);
    return r;
  }
  void loadBinary(void* data, std::size_t size) { std::memcpy(data, take(size).data(), size); }
  std::size_t remaining() const { return in_.size(); }

  // The member being read, for error messages (a static string).
  const char* field() const { return field_; }
  void set_field(const char* name) { field_ = name; }

 private:
  [[noreturn, gnu::cold, gnu::noinline]] void throw_short(std::size_t n) const {
    throw DecodeError(
        field_, "needs " + std::to_string(n) + " bytes, " + std::to_string(in_.size()) + " left");
  }
  std::string_view in_;
  const char* field_ = "header";
};

template <class T>
inline constexpr bool kIsOutput =
    std::is_same_v<T, StringOutputArchive> || std::is_same_v<T, SizeArchive>;

template <class Ar, class T>
std::enable_if_t<kIsOutput<Ar> && std::is_arithmetic_v<T>> CEREAL_SAVE_FUNCTION_NAME(Ar& ar,
                                                                                     const T& t) {
  ar.saveBinary(&t, sizeof t);
}

template <class T>
std::enable_if_t<std::is_arithmetic_v<T>> CEREAL_LOAD_FUNCTION_NAME(BoundedInputArchive& ar, T& t) {
  ar.loadBinary(&t, sizeof t);
}

inline void save_bytes(StringOutputArchive& ar, std::string_view s) {
  ar(static_cast<std::uint64_t>(s.size()));
  ar.saveBinary(s.data(), s.size());
}
inline void save_bytes(SizeArchive& ar, std::string_view s) {
  ar.saveBinary(nullptr, sizeof(std::uint64_t) + s.size());
}

// The length is checked against what is present before anything is allocated, so a
// claimed length of 2^63 costs nothing but the exception.
inline void load_bytes(BoundedInputArchive& ar, std::string* s) {
  std::uint64_t len = 0;
  ar(len);
  if (len > ar.remaining()) [[unlikely]] {
    throw DecodeError(ar.field(), "length " + std::to_string(len) + " exceeds the " +
                                      std::to_string(ar.remaining()) + " bytes left");
  }
  std::string_view bytes = ar.take(len);
  s->assign(bytes.data(), bytes.size());
}

}  // namespace sandpool::ipc::wire
