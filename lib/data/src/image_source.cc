// Image folders and tar shards as Sources (see data/streams.h).
#include <cmath>

#include "mapped_file.h"
#include "trident/data/streams.h"

namespace trident::data {
namespace {

class ImageSource final : public Source {
 public:
  ImageSource(formats::SampleIndex index, ImageOptions options)
      : Source(index.kind), index_(std::move(index)), o_(std::move(options)),
        identity_(formats::index_identity(index_)) {}

  std::int64_t size() const override { return static_cast<std::int64_t>(index_.samples.size()); }
  std::int64_t num_classes() const override { return index_.num_classes(); }
  std::map<std::string, graph::TensorSpec> specs() const override {
    return {{o_.field, {{o_.channels, o_.height, o_.width}, graph::DType::kFloat32}},
            {"label", {{}, graph::DType::kInt64}}};
  }
  std::uint64_t identity() const override { return identity_; }

  void read_sample(std::int64_t id, std::int64_t epoch, std::map<std::string, torch::Tensor>& rows) const override {
    const auto& s = index_.samples.at(static_cast<std::size_t>(id));
    if (auto it = rows.find("label"); it != rows.end()) *it->second.data_ptr<std::int64_t>() = s.label;
    auto it = rows.find(o_.field);
    if (it == rows.end()) return;
    const auto& file = index_.files[s.file];
    const auto origin = "sample " + std::to_string(id) + " (" + file +
                        (index_.kind == "tar" ? " at byte " + std::to_string(s.offset) : std::string()) + ")";
    try {
      const auto bytes = read_range(file, s.offset, s.size);
      images::apply(o_.transforms, reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size(),
                    {o_.seed, epoch, id}, o_.channels, o_.height, o_.width, it->second.data_ptr<float>(), origin);
    } catch (const images::DecodeError& e) {
      throw DataError(e.what());
    } catch (const DataError& e) {
      throw DataError(origin + ": " + e.what());
    }
  }

 private:
  formats::SampleIndex index_;
  ImageOptions o_;
  std::uint64_t identity_;
};

}  // namespace

ImageOptions image_input(const graph::OpGraph& graph) {
  ImageOptions o;
  int found = 0;
  for (const auto& op : graph.ops()) {
    if (!op.is_input() || op.attrs.value("field", op.name) == "label") continue;
    const auto& s = op.output.shape;
    if (op.output.dtype == graph::DType::kFloat32 && s.size() == 3 && (s[0] == 1 || s[0] == 3)) {
      o.field = op.attrs.value("field", op.name);
      o.channels = static_cast<int>(s[0]), o.height = static_cast<int>(s[1]), o.width = static_cast<int>(s[2]);
    }
    ++found;
  }
  if (found != 1 || o.height == 0)
    throw DataError("data.name = images: model '" + graph.name() + "' needs one input, a float32 image [1 or 3, H, W]");
  return o;
}

nlohmann::json default_transforms(int channels, int height, int width, bool training) {
  const nlohmann::json normalize =
      channels == 3 ? nlohmann::json("imagenet") : nlohmann::json{{"mean", {0.5}}, {"std", {0.5}}};
  const nlohmann::json size = height == width ? nlohmann::json(height) : nlohmann::json{height, width};
  if (training)
    return nlohmann::json::array({{{"random_resized_crop", size}}, "horizontal_flip", {{"normalize", normalize}}});
  const int resize = static_cast<int>(std::lround(std::max(height, width) / 0.875));
  return nlohmann::json::array({{{"resize", resize}}, {{"center_crop", size}}, {{"normalize", normalize}}});
}

std::shared_ptr<const Source> image_source(formats::SampleIndex index, ImageOptions options) {
  return std::make_shared<ImageSource>(std::move(index), std::move(options));
}

std::shared_ptr<const Source> open_images(const std::string& kind, const std::string& path, ImageOptions options,
                                          const std::string& cache_dir) {
  return image_source(formats::load_index(kind, path, cache_dir), std::move(options));
}

}  // namespace trident::data
