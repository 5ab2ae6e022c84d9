// read_dynamic_needs: the plugin's ELF dynamic section, read defensively (origin_libraries.hpp).
#include "origin_libraries.hpp"

#include <elf.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include <sandpool/base/posix_call.hpp>

namespace sandpool::worker {
namespace {

// Caps on what is read from a file the plugin's author wrote.
constexpr std::size_t kMaxProgramHeaders = 512;
constexpr std::uint64_t kMaxDynamicBytes = 1 << 20;
constexpr std::uint64_t kMaxStringTable = 4 << 20;

using Ehdr = ElfW(Ehdr);
using Phdr = ElfW(Phdr);
using Dyn = ElfW(Dyn);

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
constexpr unsigned char kNativeData = ELFDATA2LSB;
#else
constexpr unsigned char kNativeData = ELFDATA2MSB;
#endif
constexpr unsigned char kNativeClass = sizeof(void*) == 8 ? ELFCLASS64 : ELFCLASS32;

// Reads exactly `len` bytes at `off` into `out`; false when the file is shorter or `off` +
// `len` is past `size`.
Result<bool> read_at(int fd, std::uint64_t size, std::uint64_t off, std::uint64_t len, void* out) {
  if (off > size || len > size - off) return false;
  auto* p = static_cast<char*>(out);
  while (len > 0) {
    auto n = posix_call("pread(plugin)", [&] {
      return ::pread(fd, p, static_cast<std::size_t>(len), static_cast<off_t>(off));
    });
    if (!n) return Status::error(Code::kPlugin, n.status().message());
    if (*n == 0) return false;
    p += *n;
    off += static_cast<std::uint64_t>(*n);
    len -= static_cast<std::uint64_t>(*n);
  }
  return true;
}

// The file offset of virtual address `addr`, through the PT_LOAD segment that maps it.
bool file_offset(const std::vector<Phdr>& phdrs, std::uint64_t addr, std::uint64_t* off) {
  for (const Phdr& ph : phdrs) {
    if (ph.p_type != PT_LOAD) continue;
    if (addr >= ph.p_vaddr && addr - ph.p_vaddr < ph.p_filesz) {
      *off = ph.p_offset + (addr - ph.p_vaddr);
      return true;
    }
  }
  return false;
}

// The NUL-terminated string at `off` of the string table, or false past its end.
bool string_at(const std::string& table, std::uint64_t off, std::string* out) {
  if (off >= table.size()) return false;
  const std::size_t end = table.find('\0', static_cast<std::size_t>(off));
  if (end == std::string::npos) return false;
  out->assign(table, static_cast<std::size_t>(off), end - static_cast<std::size_t>(off));
  return true;
}

std::vector<std::string> split_path(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t colon = text.find(':', start);
    out.push_back(text.substr(start, colon == std::string::npos ? colon : colon - start));
    if (colon == std::string::npos) return out;
    start = colon + 1;
  }
}

}  // namespace

bool strip_origin(const std::string& entry, std::string* rest) {
  for (const char* token : {"$ORIGIN", "${ORIGIN}"}) {
    const std::size_t n = std::strlen(token);
    if (entry.compare(0, n, token) == 0 && (entry.size() == n || entry[n] == '/')) {
      *rest = entry.substr(n);
      return true;
    }
  }
  return false;
}

Result<DynamicNeeds> read_dynamic_needs(int fd) {
  DynamicNeeds needs;
  struct stat st {};
  auto stated = posix_call("fstat(plugin)", [&] { return ::fstat(fd, &st); });
  if (!stated) return Status::error(Code::kPlugin, stated.status().message());
  const auto size = static_cast<std::uint64_t>(st.st_size);

  Ehdr eh{};
  Result<bool> got = read_at(fd, size, 0, sizeof eh, &eh);
  if (!got) return got.status();
  if (!*got || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != kNativeClass || eh.e_ident[EI_DATA] != kNativeData ||
      eh.e_phentsize != sizeof(Phdr) || eh.e_phnum > kMaxProgramHeaders) {
    return needs;
  }
  std::vector<Phdr> phdrs(eh.e_phnum);
  got = read_at(fd, size, eh.e_phoff, phdrs.size() * sizeof(Phdr), phdrs.data());
  if (!got) return got.status();
  if (!*got) return needs;

  const Phdr* dynamic = nullptr;
  for (const Phdr& ph : phdrs) dynamic = ph.p_type == PT_DYNAMIC ? &ph : dynamic;
  if (dynamic == nullptr || dynamic->p_filesz > kMaxDynamicBytes) return needs;
  std::vector<Dyn> dyn(dynamic->p_filesz / sizeof(Dyn));
  got = read_at(fd, size, dynamic->p_offset, dyn.size() * sizeof(Dyn), dyn.data());
  if (!got) return got.status();
  if (!*got) return needs;

  std::uint64_t strtab = 0, strsz = 0;
  std::vector<std::uint64_t> needed;
  std::uint64_t runpath = 0, rpath = 0;
  bool has_runpath = false, has_rpath = false;
  for (const Dyn& d : dyn) {
    if (d.d_tag == DT_NULL) break;
    const auto v = static_cast<std::uint64_t>(d.d_un.d_val);
    switch (d.d_tag) {
      case DT_STRTAB:
        strtab = v;
        break;
      case DT_STRSZ:
        strsz = v;
        break;
      case DT_NEEDED:
        needed.push_back(v);
        break;
      case DT_RUNPATH:
        runpath = v;
        has_runpath = true;
        break;
      case DT_RPATH:
        rpath = v;
        has_rpath = true;
        break;
      default:
        break;
    }
  }
  std::uint64_t table_off = 0;
  if (strsz == 0 || strsz > kMaxStringTable || !file_offset(phdrs, strtab, &table_off)) {
    return needs;
  }
  std::string table(static_cast<std::size_t>(strsz), '\0');
  got = read_at(fd, size, table_off, strsz, table.data());
  if (!got) return got.status();
  if (!*got) return needs;

  for (std::uint64_t off : needed) {
    std::string name;
    if (string_at(table, off, &name)) needs.needed.push_back(std::move(name));
  }
  // glibc ignores DT_RPATH when DT_RUNPATH is present.
  std::string path;
  if ((has_runpath && string_at(table, runpath, &path)) ||
      (!has_runpath && has_rpath && string_at(table, rpath, &path))) {
    needs.search_path = split_path(path);
  }
  return needs;
}

}  // namespace sandpool::worker
