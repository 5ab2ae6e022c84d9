// The field wrappers through which every worker-channel message member is (de)serialized,
// over the bounded archives of <sandpool/ipc/byte_archive.hpp>. The input comes from
// worker-writable memory: strings, byte blobs and lists are read only through wrappers that
// check a declared length against remaining() before allocating.
#pragma once

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <cereal/cereal.hpp>

#include <sandpool/ipc/byte_archive.hpp>
#include <sandpool/ipc/messages.hpp>

namespace sandpool::ipc::wire {

// One named message member. T is an arithmetic type, std::string (text or bytes: a u64
// length, then the bytes) or std::vector<std::string> (a u64 count, then the strings).
template <class T>
struct Field {
  const char* name;
  T* value;
};
template <class T>
Field<T> field(const char* name, T& value) {
  return {name, &value};
}

// An enum or small integer member stored as one byte and checked against its last valid
// value on load.
template <class T>
struct RangedByte {
  const char* name;
  T* value;
  std::uint8_t max;
};
template <class T>
RangedByte<T> ranged_byte(const char* name, T& value, std::uint8_t max) {
  return {name, &value, max};
}

template <class Ar, class T>
std::enable_if_t<kIsOutput<Ar>> CEREAL_SAVE_FUNCTION_NAME(Ar& ar, const Field<T>& f) {
  if constexpr (std::is_arithmetic_v<T>) {
    ar(*f.value);
  } else if constexpr (std::is_same_v<T, std::string> ||
                       std::is_same_v<T, const std::string_view>) {
    save_bytes(ar, *f.value);  // a string_view encodes exactly like the string it views
  } else {
    static_assert(std::is_same_v<T, std::vector<std::string>>);
    ar(static_cast<std::uint64_t>(f.value->size()));
    for (const std::string& s : *f.value) save_bytes(ar, s);
  }
}

template <class T>
void CEREAL_LOAD_FUNCTION_NAME(BoundedInputArchive& ar, Field<T>& f) {
  ar.set_field(f.name);
  if constexpr (std::is_arithmetic_v<T>) {
    ar(*f.value);
  } else if constexpr (std::is_same_v<T, std::string>) {
    load_bytes(ar, f.value);
  } else {
    static_assert(std::is_same_v<T, std::vector<std::string>>);
    std::uint64_t count = 0;
    ar(count);
    // Every item carries at least its 8-byte length, which bounds count by the input too.
    if (count > kMaxListItems || count > ar.remaining() / sizeof(std::uint64_t)) {
      throw DecodeError(f.name, std::to_string(count) + " items exceeds the limit of " +
                                    std::to_string(kMaxListItems) + " or the bytes left");
    }
    f.value->clear();
    f.value->reserve(count);
    for (std::uint64_t i = 0; i < count; ++i) load_bytes(ar, &f.value->emplace_back());
  }
}

template <class Ar, class T>
std::enable_if_t<kIsOutput<Ar>> CEREAL_SAVE_FUNCTION_NAME(Ar& ar, const RangedByte<T>& f) {
  ar(static_cast<std::uint8_t>(*f.value));
}

template <class T>
void CEREAL_LOAD_FUNCTION_NAME(BoundedInputArchive& ar, RangedByte<T>& f) {
  ar.set_field(f.name);
  std::uint8_t v = 0;
  ar(v);
  if (v > f.max) {
    throw DecodeError(f.name, "value " + std::to_string(v) + " is out of range (max " +
                                  std::to_string(f.max) + ")");
  }
  *f.value = static_cast<T>(v);
}

}  // namespace sandpool::ipc::wire

CEREAL_REGISTER_ARCHIVE(sandpool::ipc::wire::StringOutputArchive)
CEREAL_REGISTER_ARCHIVE(sandpool::ipc::wire::SizeArchive)
CEREAL_REGISTER_ARCHIVE(sandpool::ipc::wire::BoundedInputArchive)
