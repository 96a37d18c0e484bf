#include "trident/data/npy.h"

#include <cstring>
#include <regex>

#include "trident/base/files.h"

namespace trident::data {
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

}  // namespace

torch::Tensor parse_npy(const std::string& bytes, const std::string& origin) {
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
  if (bytes.size() < start + header_len) throw DataError(origin + ": the .npy header is cut short");
  const std::string header = bytes.substr(start, header_len);
  const auto descr = header_value(header, "descr", "'([^']*)'", origin);
  if (header_value(header, "fortran_order", "(True|False)", origin) != "False")
    throw DataError(origin + ": the array is in Fortran order; save it with np.ascontiguousarray(x)");
  torch::ScalarType type;
  if (descr == "<f4") {
    type = torch::kFloat32;
  } else if (descr == "<i8") {
    type = torch::kInt64;
  } else {
    throw DataError(origin + ": dtype '" + descr + "' is not supported; allowed: float32 ('<f4') for features, "
                    "int64 ('<i8') for ids and labels (e.g. x.astype(np.float32))");
  }
  std::vector<std::int64_t> shape;
  const auto dims = header_value(header, "shape", "\\(([0-9,\\s]*)\\)", origin);
  std::int64_t elements = 1;
  static const std::regex kDigits("[0-9]+");
  for (std::sregex_iterator it(dims.begin(), dims.end(), kDigits), end; it != end; ++it) {
    const auto d = it->str();
    if (d.size() > 12) throw DataError(origin + ": shape (" + dims + ") is too large");
    shape.push_back(std::stoll(d));
    if (shape.back() > 0 && elements > (std::int64_t{1} << 40) / shape.back())
      throw DataError(origin + ": shape (" + dims + ") is too large");
    elements *= shape.back();
  }
  if (shape.empty()) throw DataError(origin + ": a 0-d array holds no samples; the first axis must be the sample");
  const std::size_t item = torch::elementSize(type), data = bytes.size() - start - header_len;
  if (data != static_cast<std::size_t>(elements) * item)
    throw DataError(origin + ": the header's shape (" + dims + ") needs " + std::to_string(elements * item) +
                    " bytes of data but the file has " + std::to_string(data));
  auto t = torch::empty(shape, type);
  if (data) std::memcpy(t.data_ptr(), bytes.data() + start + header_len, data);
  return t;
}

torch::Tensor read_npy(const std::string& path) {
  return parse_npy(read_text_file<DataError>(path, "data file (numpy.save writes one)"), path);
}

Splits load_npy(const std::string& train_dir, const std::string& test_dir, const std::set<std::string>& fields) {
  Splits s;
  auto load = [&](Dataset& d, const std::string& dir) {
    d.name = "npy";
    for (const auto& f : fields) d.fields[f] = read_npy(dir + "/" + f + ".npy");
    const auto& first = *d.fields.begin();
    for (const auto& [name, t] : d.fields)
      if (t.size(0) != first.second.size(0))
        throw DataError(dir + ": " + name + ".npy has " + std::to_string(t.size(0)) + " samples but " + first.first +
                        ".npy has " + std::to_string(first.second.size(0)) + "; every field needs one row per sample");
  };
  load(s.train, train_dir);
  load(s.test, test_dir);
  // Class ids (cross_entropy) or float targets (mse): the graph's label input
  // checks which (Dataset::check_fits).
  const auto& label = s.train.fields.at("label");
  if (label.scalar_type() == torch::kInt64) {
    if (label.numel() && label.min().item<std::int64_t>() < 0)
      throw DataError(train_dir + "/label.npy holds a negative class id");
    s.train.num_classes = s.test.num_classes = label.numel() ? label.max().item<std::int64_t>() + 1 : 0;
  }
  return s;
}

}  // namespace trident::data
