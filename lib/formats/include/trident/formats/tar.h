// Tar archives read in place: the offset index of their members, for
// WebDataset's shards (Note [Tar shards] in formats/sample_index.h). Only
// the 512-byte headers are parsed here; a member's bytes are read later at
// its offset, so a shard is never loaded whole.
//
// The formats written by GNU tar, Python's tarfile and WebDataset's writer:
// ustar (name + prefix), GNU long names (type 'L') and POSIX pax headers
// (type 'x', its `path` record); global pax headers (type 'g') are skipped.
// Directories, links and other non-file members are skipped; a member whose
// header is corrupt (checksum, octal fields, a size past the end) is a
// DataError naming the archive and the byte offset.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "trident/formats/file_headers.h"

namespace trident::formats {

struct TarMember {
  std::string name;           // the path inside the archive
  std::uint64_t offset = 0;   // of its first data byte
  std::uint64_t size = 0;
};

// Reads the headers of an archive of `size` bytes, whose bytes `read(offset,
// length)` returns (a file read at an offset, or a buffer), skipping the
// members' data. `origin` names the archive in errors.
using ReadAt = std::function<std::string(std::uint64_t offset, std::uint64_t length)>;
std::vector<TarMember> index_tar(const ReadAt& read, std::uint64_t size, const std::string& origin);

// The same over bytes in memory (tests and the fuzz target).
std::vector<TarMember> index_tar_bytes(const std::string& bytes, const std::string& origin);

}  // namespace trident::formats
