// The headers of the data files trident reads — NumPy's .npy and
// Fashion-MNIST's IDX — checked without LibTorch, so that fuzz/ can fuzz
// them on their own. Every size is bounded and every product guarded
// against overflow before any data is touched.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "trident/base/error.h"

namespace trident::formats {

// A missing, unreadable or corrupt data file, or a dataset that does not fit
// the model. The message names the path or field and how to fix it.
using DataError = ComponentError<struct DataErrorTag, ErrorKind::kBadInput>;

// What a .npy file's header says, checked against the file's length.
struct NpyHeader {
  std::string descr;               // '<f4' (float32) or '<i8' (int64): the only two allowed
  std::vector<std::int64_t> shape;  // at least one axis; at most 2^40 elements
  std::size_t data_offset = 0;     // where the array's bytes begin
  std::size_t data_bytes = 0;      // elements x item size, which is the rest of the file
};

// Format versions 1-3, C order. Throws DataError naming `origin`.
NpyHeader parse_npy_header(const std::string& bytes, const std::string& origin);
// The same from the file's first bytes `head` (the header at least) and its
// length: a mapped file's header is checked without reading its data.
NpyHeader parse_npy_header(const std::string& head, std::uint64_t file_bytes, const std::string& origin);

// An IDX file (the bytes, decompressed): big-endian magic, one 32-bit size
// per dimension, then uint8 data. `dims` are the sizes expected after the
// first (e.g. {0, 28, 28} for images: the first is read from the file).
// Returns the dimensions; throws DataError naming `path` when the magic,
// a size or the data's length is not what it must be.
std::vector<std::int64_t> check_idx(const std::vector<std::uint8_t>& bytes, std::uint32_t magic,
                                    std::vector<std::int64_t> dims, const std::string& path);

}  // namespace trident::formats
