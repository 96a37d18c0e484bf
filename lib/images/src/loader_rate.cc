#include "trident/images/loader_rate.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "trident/base/cache_dir.h"
#include "trident/base/files.h"
#include "trident/images/transforms.h"

namespace trident::images {
namespace {

// A photo-like image: smooth colour fields with a texture, deterministic.
Image photo(int height, int width, int seed) {
  Image im;
  im.height = height, im.width = width, im.channels = 3;
  im.pixels.resize(static_cast<std::size_t>(height) * width * 3);
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      for (int c = 0; c < 3; ++c) {
        const double v = std::sin(0.02 * (c + 1 + seed) * y + 0.03 * x) + std::sin(0.3 * x) * std::sin(0.25 * y) * 0.3 +
                         std::cos(0.015 * (x + y) * (c + 2));
        im.pixels[(static_cast<std::size_t>(y) * width + x) * 3 + c] = static_cast<std::uint8_t>(128 + 50 * v);
      }
  return im;
}

}  // namespace

double measure_loader_rate(int images) {
  std::vector<std::string> files;
  for (int i = 0; i < 8; ++i) files.push_back(encode_jpeg(i % 2 ? photo(375, 500, i) : photo(500, 375, i), 90));
  const auto t = parse_transforms(
      nlohmann::json::parse(R"([{"random_resized_crop": 224}, "horizontal_flip", {"normalize": "imagenet"}])"), "calibrate");
  std::vector<float> out(3 * 224 * 224);
  auto run = [&](int n) {
    for (int i = 0; i < n; ++i) {
      const auto& f = files[static_cast<std::size_t>(i) % files.size()];
      apply(t, reinterpret_cast<const std::uint8_t*>(f.data()), f.size(), {0, 0, i}, 3, 224, 224, out.data(), "calibrate");
    }
  };
  run(16);  // warm-up
  const auto t0 = std::chrono::steady_clock::now();
  run(images);
  return images / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string loader_rate_path() {
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  return cache_dir() + "/loader-" + std::string(host[0] ? host : "localhost") + ".json";
}

void write_loader_rate(double images_per_s) {
  nlohmann::json j{{"images_per_s_per_thread", images_per_s},
                   {"measured", "500x375 JPEGs (quality 90) through random_resized_crop 224, horizontal_flip, normalize"}};
  write_file_atomic(loader_rate_path(), j.dump(1) + "\n");
}

std::optional<double> read_loader_rate() {
  std::ifstream in(loader_rate_path());
  if (!in) return std::nullopt;
  try {
    const auto j = nlohmann::json::parse(in);
    const auto v = j.at("images_per_s_per_thread").get<double>();
    if (v > 0 && std::isfinite(v)) return v;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

}  // namespace trident::images
