// An image file of a folder or shard (data: {name: images | tar}): decoded
// by libjpeg-turbo or libpng through trident's wrapper, then through the
// training transforms (random crop, scaled and cropped decoding, resize,
// flip) to a 3 x 16 x 16 input, as the loader reads a sample.
#include <vector>

#include "fuzz.h"
#include "trident/images/transforms.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const auto train = trident::images::parse_transforms(
      nlohmann::json::parse(R"([{"random_resized_crop": 16}, "horizontal_flip", {"normalize": "imagenet"}])"), "fuzz");
  static const auto eval =
      trident::images::parse_transforms(nlohmann::json::parse(R"([{"resize": 18}, {"center_crop": 16}])"), "fuzz");
  std::vector<float> out(3 * 16 * 16);
  for (const auto* t : {&train, &eval})
    trident::fuzz::expect_clear_error(
        [&] { trident::images::apply(*t, data, size, {1, 2, 3}, 3, 16, 16, out.data(), "x.jpg"); });
  return 0;
}
