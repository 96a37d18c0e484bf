#include "trident/data/npy.h"

#include <cstring>

#include "mapped_file.h"
#include "trident/base/files.h"
#include "trident/data/streams.h"

namespace trident::data {

torch::Tensor parse_npy(const std::string& bytes, const std::string& origin) {
  const auto header = formats::parse_npy_header(bytes, origin);
  const auto type = header.descr == "<f4" ? torch::kFloat32 : torch::kInt64;
  auto t = torch::empty(header.shape, type);
  if (header.data_bytes) std::memcpy(t.data_ptr(), bytes.data() + header.data_offset, header.data_bytes);
  return t;
}

torch::Tensor read_npy(const std::string& path) {
  return parse_npy(read_text_file<DataError>(path, "data file (numpy.save writes one)"), path);
}

namespace {

// FILE.npy mapped: a tensor over the mapping, which lives as long as it does.
torch::Tensor map_npy_file(const std::string& path) {
  auto map = std::make_shared<MappedFile>(path);
  const std::string head(reinterpret_cast<const char*>(map->data()), std::min<std::uint64_t>(map->size(), 1 << 16));
  const auto header = formats::parse_npy_header(head, map->size(), path);
  const auto type = header.descr == "<f4" ? torch::kFloat32 : torch::kInt64;
  auto* data = const_cast<std::uint8_t*>(map->data()) + header.data_offset;  // read only: never written
  return torch::from_blob(data, header.shape, [map](void*) {}, torch::TensorOptions().dtype(type));
}

// Both splits from `read` (whole or mapped), every field of a split as
// long as the others, labels giving the classes.
template <class Read>
Splits load_npy_with(const std::string& train_dir, const std::string& test_dir, const std::set<std::string>& fields,
                     Read read) {
  Splits s;
  auto load = [&](Dataset& d, const std::string& dir) {
    d.name = "npy";
    for (const auto& f : fields) d.fields[f] = read(dir + "/" + f + ".npy");
    const auto& first = *d.fields.begin();
    for (const auto& [name, t] : d.fields)
      if (t.size(0) != first.second.size(0))
        throw DataError(dir + ": " + name + ".npy has " + std::to_string(t.size(0)) + " samples but " + first.first +
                        ".npy has " + std::to_string(first.second.size(0)) + "; every field needs one row per sample");
  };
  load(s.train, train_dir);
  load(s.test, test_dir);
  // Class ids (cross_entropy) or float targets (mse): the graph's label input
  // checks which, and the ids' range (Dataset::check_fits).
  const auto& label = s.train.fields.at("label");
  if (label.scalar_type() == torch::kInt64)
    s.train.num_classes = s.test.num_classes = label.numel() ? label.max().item<std::int64_t>() + 1 : 0;
  return s;
}

}  // namespace

Splits map_npy(const std::string& train_dir, const std::string& test_dir, const std::set<std::string>& fields) {
  return load_npy_with(train_dir, test_dir, fields, map_npy_file);
}

Splits load_npy(const std::string& train_dir, const std::string& test_dir, const std::set<std::string>& fields) {
  return load_npy_with(train_dir, test_dir, fields, read_npy);
}

}  // namespace trident::data
