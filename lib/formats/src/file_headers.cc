#include "trident/formats/file_headers.h"

#include <regex>

namespace trident::formats {
namespace {

// The value of `key` in the header's Python dict literal, e.g. 'descr': '<f4'.
std::string header_value(const std::string& header, const std::string& key, const std::string& pattern,
                         const std::string& origin) {
  std::smatch m;
  if (!std::regex_search(header, m, std::regex("'" + key + "'\\s*:\\s*" + pattern))) {
    std::string shown = header.substr(0, header.find_last_not_of(" \n") + 1).substr(0, 200);
    for (auto& c : shown)
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
    throw DataError(origin + ": the .npy header has no readable '" + key + "' (header: " + shown + ")");
  }
  return m[1].str();
}

std::uint32_t be32(const std::vector<std::uint8_t>& b, std::size_t at) {
  return (std::uint32_t{b[at]} << 24) | (std::uint32_t{b[at + 1]} << 16) | (std::uint32_t{b[at + 2]} << 8) | b[at + 3];
}

constexpr const char* kPackageHint = " (install Debian package dataset-fashion-mnist: make deps)";

}  // namespace

NpyHeader parse_npy_header(const std::string& bytes, const std::string& origin) {
  return parse_npy_header(bytes, bytes.size(), origin);
}

NpyHeader parse_npy_header(const std::string& bytes, std::uint64_t file_bytes, const std::string& origin) {
  static const std::string kMagic = "\x93NUMPY";
  if (bytes.size() < 10 || bytes.compare(0, kMagic.size(), kMagic) != 0)
    throw DataError(origin + ": not a .npy file (numpy.save writes one)");
  const int major = static_cast<unsigned char>(bytes[6]);
  if (major < 1 || major > 3) throw DataError(origin + ": .npy format version " + std::to_string(major) + " is unknown");
  const std::size_t len_bytes = major == 1 ? 2 : 4, start = 8 + len_bytes;
  if (bytes.size() < start) throw DataError(origin + ": the .npy header is cut short");
  std::size_t header_len = 0;
  for (std::size_t i = 0; i < len_bytes; ++i)
    header_len |= static_cast<std::size_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
  if (bytes.size() - start < header_len) throw DataError(origin + ": the .npy header is cut short");
  const std::string header = bytes.substr(start, header_len);
  NpyHeader h;
  h.descr = header_value(header, "descr", "'([^']*)'", origin);
  if (header_value(header, "fortran_order", "(True|False)", origin) != "False")
    throw DataError(origin + ": the array is in Fortran order; save it with np.ascontiguousarray(x)");
  if (h.descr != "<f4" && h.descr != "<i8")
    throw DataError(origin + ": dtype '" + h.descr + "' is not supported; allowed: float32 ('<f4') for features, "
                    "int64 ('<i8') for ids and labels (e.g. x.astype(np.float32))");
  const auto dims = header_value(header, "shape", "\\(([0-9,\\s]*)\\)", origin);
  std::int64_t elements = 1;
  static const std::regex kDigits("[0-9]+");
  for (std::sregex_iterator it(dims.begin(), dims.end(), kDigits), end; it != end; ++it) {
    const auto d = it->str();
    if (d.size() > 12) throw DataError(origin + ": shape (" + dims + ") is too large");
    h.shape.push_back(std::stoll(d));
    if (h.shape.back() > 0 && elements > (std::int64_t{1} << 40) / h.shape.back())
      throw DataError(origin + ": shape (" + dims + ") is too large");
    elements *= h.shape.back();
  }
  if (h.shape.empty()) throw DataError(origin + ": a 0-d array holds no samples; the first axis must be the sample");
  const std::size_t item = h.descr == "<f4" ? 4 : 8;
  h.data_offset = start + header_len;
  if (file_bytes < h.data_offset) throw DataError(origin + ": the .npy header is cut short");
  h.data_bytes = file_bytes - h.data_offset;
  if (h.data_bytes != static_cast<std::size_t>(elements) * item)
    throw DataError(origin + ": the header's shape (" + dims + ") needs " + std::to_string(elements * item) +
                    " bytes of data but the file has " + std::to_string(h.data_bytes));
  return h;
}

std::vector<std::int64_t> check_idx(const std::vector<std::uint8_t>& bytes, std::uint32_t magic,
                                    std::vector<std::int64_t> dims, const std::string& path) {
  const std::size_t header = 4 + 4 * dims.size();
  if (bytes.size() < header || be32(bytes, 0) != magic) {
    throw DataError("fashion-mnist: " + path + " is not an IDX file of the expected kind (magic " +
                    std::to_string(magic) + ")" + kPackageHint);
  }
  std::int64_t expected = 1;
  for (std::size_t d = 0; d < dims.size(); ++d) {
    const std::int64_t n = be32(bytes, 4 + 4 * d);
    if (d > 0 && n != dims[d]) {
      throw DataError("fashion-mnist: " + path + " has dimension " + std::to_string(d) + " = " + std::to_string(n) +
                      ", expected " + std::to_string(dims[d]));
    }
    dims[d] = n;
    expected *= n;  // at most (2^32 - 1) x the fixed sizes after it: no overflow
  }
  if (static_cast<std::int64_t>(bytes.size() - header) != expected) {
    throw DataError("fashion-mnist: " + path + " is truncated: " + std::to_string(bytes.size() - header) +
                    " data bytes, expected " + std::to_string(expected) + kPackageHint);
  }
  return dims;
}

}  // namespace trident::formats
