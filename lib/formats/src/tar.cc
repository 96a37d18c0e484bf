#include "trident/formats/tar.h"

#include <cstring>

namespace trident::formats {
namespace {

struct Header {
  std::string name;  // ustar prefix/name joined
  char type = 0;     // '0' or '\0' a file, 'L' a long name, 'x'/'g' pax, ...
  std::uint64_t size = 0;
  bool end = false;  // an all-zero block: the archive's end
};

std::string field(const char* block, std::size_t at, std::size_t len) {
  const char* p = block + at;
  return std::string(p, strnlen(p, len));
}

// A numeric field: octal digits, spaces and NULs around them; or GNU's
// base-256 form (the top bit of the first byte set) for sizes past 8 GiB.
std::uint64_t number(const char* block, std::size_t at, std::size_t len, const char* what, std::uint64_t offset,
                     const std::string& origin) {
  const auto* p = reinterpret_cast<const unsigned char*>(block + at);
  std::uint64_t v = 0;
  if (p[0] & 0x80) {
    for (std::size_t i = 1; i < len; ++i) {
      if (v >> 56) throw DataError(origin + ": the " + std::string(what) + " of the header at byte " +
                                   std::to_string(offset) + " is too large");
      v = (v << 8) | p[i];
    }
    return v;
  }
  std::size_t i = 0;
  while (i < len && p[i] == ' ') ++i;
  bool digits = false;
  for (; i < len && p[i] >= '0' && p[i] <= '7'; ++i) {
    if (v >> 60) throw DataError(origin + ": the " + std::string(what) + " of the header at byte " +
                                 std::to_string(offset) + " is too large");
    v = v * 8 + (p[i] - '0');
    digits = true;
  }
  for (; i < len; ++i)
    if (p[i] != ' ' && p[i] != '\0') digits = false;
  if (!digits)
    throw DataError(origin + ": the header at byte " + std::to_string(offset) + " has no octal " + what +
                    " (not a tar archive, or a corrupt one)");
  return v;
}

Header parse_header(const char* block, std::uint64_t offset, const std::string& origin) {
  Header h;
  bool zero = true;
  for (int i = 0; i < 512 && zero; ++i) zero = block[i] == 0;
  if (zero) {
    h.end = true;
    return h;
  }
  // The checksum: the header's bytes summed with its own field as spaces.
  std::uint64_t sum = 0;
  for (int i = 0; i < 512; ++i) sum += (i >= 148 && i < 156) ? ' ' : static_cast<unsigned char>(block[i]);
  if (number(block, 148, 8, "checksum", offset, origin) != sum)
    throw DataError(origin + ": the header at byte " + std::to_string(offset) +
                    " fails its checksum (not a tar archive, or a corrupt one)");
  h.name = field(block, 0, 100);
  if (std::memcmp(block + 257, "ustar", 5) == 0) {
    const auto prefix = field(block, 345, 155);
    if (!prefix.empty()) h.name = prefix + "/" + h.name;
  }
  h.type = block[156];
  h.size = number(block, 124, 12, "size", offset, origin);
  return h;
}

// The `path` record of a pax extended header ("LEN path=VALUE\n" records).
std::string pax_path(const std::string& records, std::uint64_t offset, const std::string& origin) {
  std::size_t at = 0;
  while (at < records.size() && records[at] != '\0') {
    std::size_t len = 0, i = at;
    while (i < records.size() && records[i] >= '0' && records[i] <= '9' && len < (1u << 20))
      len = len * 10 + (records[i++] - '0');
    if (i >= records.size() || records[i] != ' ' || len <= i - at || at + len > records.size())
      throw DataError(origin + ": the pax header at byte " + std::to_string(offset) + " has a malformed record");
    const auto record = records.substr(i + 1, at + len - i - 1);  // "key=value\n"
    if (record.rfind("path=", 0) == 0) return record.substr(5, record.size() - 6);
    at += len;
  }
  return "";
}

}  // namespace

std::vector<TarMember> index_tar(const ReadAt& read, std::uint64_t size, const std::string& origin) {
  if (size == 0) throw DataError(origin + ": the archive is empty (0 bytes)");
  std::vector<TarMember> members;
  std::string next_name;  // from a preceding 'L' or 'x' header
  std::uint64_t at = 0;
  while (at + 512 <= size) {
    const std::string block = read(at, 512);
    const auto h = parse_header(block.data(), at, origin);
    if (h.end) return members;
    const std::uint64_t data = at + 512;
    if (h.size > size - data)
      throw DataError(origin + ": the member '" + h.name + "' at byte " + std::to_string(at) + " claims " +
                      std::to_string(h.size) + " bytes, past the archive's end at " + std::to_string(size) +
                      ": the archive is truncated");
    if (h.type == 'L' || h.type == 'x') {
      if (h.size > (1u << 20))
        throw DataError(origin + ": the extended header at byte " + std::to_string(at) + " is " +
                        std::to_string(h.size) + " bytes; at most 1 MiB is read");
      const std::string text = read(data, h.size);
      if (h.type == 'L') {
        next_name = text.substr(0, text.find('\0'));
      } else if (auto path = pax_path(text, at, origin); !path.empty()) {
        next_name = path;
      }
    } else if (h.type == '0' || h.type == '\0' || h.type == '7') {
      members.push_back({next_name.empty() ? h.name : next_name, data, h.size});
      next_name.clear();
    } else if (h.type != 'g') {
      next_name.clear();  // a directory, link or device: no sample's part
    }
    at = data + (h.size + 511) / 512 * 512;
  }
  if (at < size)
    throw DataError(origin + ": the archive ends inside a header at byte " + std::to_string(at) + " of " +
                    std::to_string(size) + " (it is truncated)");
  return members;  // no end-of-archive blocks: accepted, as GNU tar does (with a warning)
}

std::vector<TarMember> index_tar_bytes(const std::string& bytes, const std::string& origin) {
  return index_tar([&](std::uint64_t at, std::uint64_t len) { return bytes.substr(at, len); }, bytes.size(), origin);
}

}  // namespace trident::formats
