// IDX reader: big-endian header (magic, dimension sizes), then uint8 data.
#include <zlib.h>

#include <array>
#include <memory>

#include "trident/data/dataset.h"

namespace trident::data {
namespace {

constexpr const char* kPackageHint = " (install Debian package dataset-fashion-mnist: make deps)";

std::vector<std::uint8_t> read_gz(const std::string& path) {
  std::unique_ptr<gzFile_s, int (*)(gzFile)> f(gzopen(path.c_str(), "rb"), gzclose);
  if (!f) throw DataError("fashion-mnist: cannot open " + path + kPackageHint);
  std::vector<std::uint8_t> out;
  std::array<std::uint8_t, 1 << 16> buf;
  for (;;) {
    const int n = gzread(f.get(), buf.data(), buf.size());
    if (n < 0) throw DataError("fashion-mnist: " + path + " is corrupt (gzip read failed)" + kPackageHint);
    if (n == 0) break;
    out.insert(out.end(), buf.begin(), buf.begin() + n);
  }
  return out;
}

// Returns the data bytes after checking the magic number and sizes.
torch::Tensor read_idx(const std::string& path, std::uint32_t magic, std::vector<std::int64_t> dims) {
  auto bytes = read_gz(path);
  dims = formats::check_idx(bytes, magic, std::move(dims), path);
  const auto header = 4 + 4 * dims.size();
  return torch::from_blob(bytes.data() + header, dims, torch::kUInt8).clone();
}

Dataset read_split(const std::string& dir, const std::string& prefix, std::int64_t limit,
                   const std::set<std::string>& fields) {
  auto wanted = [&](const char* f) { return fields.empty() || fields.count(f) > 0; };
  auto keep = [&](torch::Tensor t) { return limit > 0 && limit < t.size(0) ? t.slice(0, 0, limit).clone() : t; };
  Dataset d;
  d.name = "fashion-mnist";
  d.num_classes = 10;
  torch::Tensor images;
  if (wanted("image")) images = keep(read_idx(dir + "/" + prefix + "-images-idx3-ubyte.gz", 2051, {0, 28, 28}));
  torch::Tensor labels = keep(read_idx(dir + "/" + prefix + "-labels-idx1-ubyte.gz", 2049, {0}));
  if (images.defined()) {
    if (images.size(0) != labels.size(0)) {
      throw DataError("fashion-mnist: " + dir + "/" + prefix + " has " + std::to_string(images.size(0)) +
                      " images but " + std::to_string(labels.size(0)) + " labels");
    }
    // Mean and std of the Fashion-MNIST training images; normalised in
    // place, so loading peaks at one float copy.
    constexpr double kMean = 0.2860, kStd = 0.3530;
    auto x = images.to(torch::kFloat32);
    images = torch::Tensor();
    x.div_(255.0).sub_(kMean).div_(kStd);
    d.fields["image"] = x.unsqueeze(1);
  }
  if (wanted("label")) d.fields["label"] = labels.to(torch::kInt64);
  return d;
}

}  // namespace

Splits load_fashion_mnist(const std::string& dir, std::int64_t limit) {
  return load_fashion_mnist(dir, limit, limit, {});
}

Splits load_fashion_mnist(const std::string& dir, std::int64_t train_limit, std::int64_t test_limit,
                          const std::set<std::string>& fields) {
  return {read_split(dir, "train", train_limit, fields), read_split(dir, "t10k", test_limit, fields)};
}

}  // namespace trident::data
