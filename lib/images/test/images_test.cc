// Decoding and transforms on images the test draws itself.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "trident/images/decode.h"
#include "trident/images/loader_rate.h"
#include "trident/images/transforms.h"

namespace trident::images {
namespace {

// A smooth colour pattern (JPEG keeps it close) of height x width.
Image pattern(int height, int width, int channels = 3) {
  Image im;
  im.height = height, im.width = width, im.channels = channels;
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      for (int c = 0; c < channels; ++c)
        im.pixels.push_back(static_cast<std::uint8_t>(60 + y * 100 / height + x * (c + 1) * 30 / width));
  return im;
}

const std::uint8_t* data(const std::string& s) { return reinterpret_cast<const std::uint8_t*>(s.data()); }

int max_difference(const Image& a, const Image& b) {
  EXPECT_EQ(a.height, b.height);
  EXPECT_EQ(a.width, b.width);
  int most = 0;
  for (std::size_t i = 0; i < a.pixels.size() && i < b.pixels.size(); ++i)
    most = std::max(most, std::abs(int(a.pixels[i]) - int(b.pixels[i])));
  return most;
}

TEST(Decode, PngIsExactAndJpegClose) {
  const auto im = pattern(37, 53);
  EXPECT_EQ(max_difference(decode(data(encode_png(im)), encode_png(im).size(), 3, "a.png"), im), 0);
  const auto jpeg = encode_jpeg(im, 100);
  const auto back = decode(data(jpeg), jpeg.size(), 3, "a.jpg");
  EXPECT_LE(max_difference(back, im), 6);
  const auto h = read_header(data(jpeg), jpeg.size(), "a.jpg");
  EXPECT_EQ(h.format, Format::kJpeg);
  EXPECT_EQ(h.height, 37);
  EXPECT_EQ(h.width, 53);
}

TEST(Decode, GreyAndColourConvertBothWays) {
  const auto grey = pattern(16, 24, 1);
  const auto png = encode_png(grey);
  const auto rgb = decode(data(png), png.size(), 3, "g.png");
  ASSERT_EQ(rgb.channels, 3);
  for (int c = 0; c < 3; ++c) EXPECT_EQ(rgb.at(5, 7, c), grey.at(5, 7, 0));
  const auto jpeg = encode_jpeg(pattern(16, 24, 3), 95);
  EXPECT_EQ(decode(data(jpeg), jpeg.size(), 1, "c.jpg").channels, 1);
}

TEST(Decode, AJpegRegionIsTheCropOfTheWholeImage) {
  const auto jpeg = encode_jpeg(pattern(120, 160), 95);
  const auto whole = decode(data(jpeg), jpeg.size(), 3, "a.jpg");
  const Region r{33, 41, 50, 70};
  const auto part = decode(data(jpeg), jpeg.size(), r, 3, 0, 0, "a.jpg");
  ASSERT_EQ(part.height, r.height);
  ASSERT_EQ(part.width, r.width);
  EXPECT_EQ(part.y0, r.top);
  EXPECT_EQ(part.x0, r.left);
  int most = 0;
  for (int y = 0; y < r.height; ++y)
    for (int x = 0; x < r.width; ++x)
      for (int c = 0; c < 3; ++c) most = std::max(most, std::abs(part.at(y, x, c) - whole.at(r.top + y, r.left + x, c)));
  EXPECT_LE(most, 2);  // chroma upsampling at the cut's edge may differ by a step
}

TEST(Decode, AJpegShrinksByTheIdctWhileTheRegionStaysLargeEnough) {
  const auto jpeg = encode_jpeg(pattern(400, 640), 90);
  const auto small = decode(data(jpeg), jpeg.size(), Region{0, 0, 400, 640}, 3, 100, 150, "a.jpg");
  EXPECT_GE(small.height, 100);
  EXPECT_GE(small.width, 150);
  EXPECT_LT(small.height, 200);  // 2/8 of the image: 100 x 160
  EXPECT_DOUBLE_EQ(small.sy, 4.0);
}

TEST(Decode, BrokenFilesAreDecodeErrorsNamingTheFile) {
  const auto jpeg = encode_jpeg(pattern(64, 64), 90);
  const auto png = encode_png(pattern(64, 64));
  for (const auto& [bytes, name] : std::vector<std::pair<std::string, std::string>>{
           {jpeg.substr(0, jpeg.size() / 2), "cut.jpg"},
           {png.substr(0, png.size() / 2), "cut.png"},
           {"this is a text file\n", "notes.jpg"},
           {"", "empty.png"}}) {
    try {
      decode(data(bytes), bytes.size(), 3, name);
      ADD_FAILURE() << name << " decoded";
    } catch (const DecodeError& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
      EXPECT_EQ(e.kind(), ErrorKind::kBadInput);
    }
  }
}

TEST(Decode, AHeaderPromisingTooManyPixelsIsRefusedBeforeDecoding) {
  std::string png("\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR", 16);
  for (std::uint32_t side : {20000u, 20000u})  // 400 million pixels
    for (int s = 24; s >= 0; s -= 8) png += static_cast<char>((side >> s) & 0xff);
  try {
    read_header(reinterpret_cast<const std::uint8_t*>(png.data()), png.size(), "bomb.png");
    ADD_FAILURE() << "a 20000x20000 header was taken";
  } catch (const DecodeError& e) {
    EXPECT_NE(std::string(e.what()).find("bomb.png: image size 20000x20000 is over 178956970 pixels"), std::string::npos)
        << e.what();
  }
}

TEST(Transforms, ReadsTheListsUsersWrite) {
  const auto t = parse_transforms(nlohmann::json::parse(R"([{"random_resized_crop": {"size": 224, "scale": [0.2, 1]}},
      "horizontal_flip", {"normalize": "imagenet"}])"), "data.transforms");
  EXPECT_EQ(t.geometry, Transforms::Geometry::kRandomResizedCrop);
  EXPECT_EQ(t.out_height, 224);
  EXPECT_DOUBLE_EQ(t.scale_lo, 0.2);
  EXPECT_DOUBLE_EQ(t.flip_p, 0.5);
  EXPECT_EQ(t.mean.size(), 3u);
  const auto e = parse_transforms(nlohmann::json::parse(R"([{"resize": 256}, {"center_crop": [224, 200]}])"), "k");
  EXPECT_EQ(e.geometry, Transforms::Geometry::kResizeCenterCrop);
  EXPECT_EQ(e.resize_short, 256);
  EXPECT_EQ(e.out_width, 200);
}

TEST(Transforms, EachBadEntryNamesItsKeyAndWhatIsAllowed) {
  const std::vector<std::pair<std::string, std::string>> cases{
      {R"(["rotate"])", "data.transforms[0] = rotate: unknown transform"},
      {R"([{"random_resized_crop": {"size": 0}}])", "data.transforms[0].random_resized_crop.size"},
      {R"([{"random_resized_crop": {"size": 8, "scale": [0.5, 2]}}])", ".scale"},
      {R"([{"horizontal_flip": {"p": 3}}])", "data.transforms[0].horizontal_flip.p"},
      {R"([{"normalize": {"mean": [0.5], "std": [0]}}])", ".std"},
      {R"([{"center_crop": 8}, {"resize": 9}])", "the order center_crop, resize"},
      {R"([{"resize": 9, "flip": 1}])", "data.transforms[0]"},
      {R"({"resize": 9})", "a list"}};
  for (const auto& [text, expected] : cases) {
    try {
      parse_transforms(nlohmann::json::parse(text), "data.transforms");
      ADD_FAILURE() << text << " was accepted";
    } catch (const TransformError& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << text << " -> " << e.what();
    }
  }
}

TEST(Transforms, RandomResizedCropStaysInsideWithTheAreaAsked) {
  auto t = parse_transforms(nlohmann::json::parse(R"([{"random_resized_crop": {"size": 32, "scale": [0.3, 0.6]}}])"), "k");
  for (int id = 0; id < 500; ++id) {
    KeyedRandom r({0, 0, static_cast<std::uint64_t>(id)});
    const auto c = random_resized_crop(300, 400, t, r);
    ASSERT_GE(c.top, 0);
    ASSERT_GE(c.left, 0);
    ASSERT_LE(c.top + c.height, 300);
    ASSERT_LE(c.left + c.width, 400);
    const double share = double(c.height) * c.width / (300.0 * 400.0);
    EXPECT_GT(share, 0.28);
    EXPECT_LT(share, 0.62);
  }
  // No try fits a ratio this far from the image's: torchvision's central crop.
  t.scale_lo = t.scale_hi = 1, t.ratio_lo = t.ratio_hi = 4;
  KeyedRandom r({0, 0, static_cast<std::uint64_t>(0)});
  const auto c = random_resized_crop(100, 100, t, r);
  EXPECT_EQ(c.width, 100);
  EXPECT_EQ(c.height, 25);
  EXPECT_EQ(c.top, 37);
}

TEST(Resize, IdentityConstantsAndBlocks) {
  const auto im = pattern(12, 10);
  const auto same = resize_box(im, 0, 0, 12, 10, 12, 10, false);
  for (int y = 0; y < 12; ++y)
    for (int x = 0; x < 10; ++x)
      for (int c = 0; c < 3; ++c) ASSERT_NEAR(same[(c * 12 + y) * 10 + x], im.at(y, x, c), 1e-3);
  const auto flipped = resize_box(im, 0, 0, 12, 10, 12, 10, true);
  EXPECT_NEAR(flipped[(0 * 12 + 3) * 10 + 0], im.at(3, 9, 0), 1e-3);
  // 2x2 blocks: halving with PIL's antialiased bilinear filter (support 2
  // pixels each side) weighs a block's pixels 0.75 each and the next block's
  // near pixel 0.25: (0.75 + 0.75) * a + 0.25 * b over 1.75, per axis. PIL
  // gives [[15 87] [23 95]] (it rounds to uint8 after each axis).
  Image blocks;
  blocks.height = 4, blocks.width = 4, blocks.channels = 1;
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 4; ++x) blocks.pixels.push_back(static_cast<std::uint8_t>(10 * (y / 2) + 100 * (x / 2)));
  const auto half = resize_box(blocks, 0, 0, 4, 4, 2, 2, false);
  auto axis = [](double a, double b) { return (1.5 * a + 0.25 * b) / 1.75; };
  auto at = [&](double row, double other_row, double col, double other_col) {
    return axis(axis(row + col, row + other_col), axis(other_row + col, other_row + other_col));
  };
  EXPECT_NEAR(half[0], at(0, 10, 0, 100), 1e-3);
  EXPECT_NEAR(half[1], at(0, 10, 100, 0), 1e-3);
  EXPECT_NEAR(half[2], at(10, 0, 0, 100), 1e-3);
  EXPECT_NEAR(half[3], at(10, 0, 100, 0), 1e-3);
  EXPECT_NEAR(half[0], 15, 1.0);  // PIL's
  EXPECT_NEAR(half[3], 95, 1.0);
}

TEST(Transforms, TheSameKeyGivesTheSameBytesAndTheEpochChangesThem) {
  const auto jpeg = encode_jpeg(pattern(96, 128), 90);
  const auto t = parse_transforms(
      nlohmann::json::parse(R"([{"random_resized_crop": 24}, "horizontal_flip", {"normalize": "imagenet"}])"), "k");
  auto run = [&](std::int64_t epoch) {
    std::vector<float> out(3 * 24 * 24);
    apply(t, data(jpeg), jpeg.size(), {5, epoch, 42}, 3, 24, 24, out.data(), "a.jpg");
    return out;
  };
  EXPECT_EQ(run(0), run(0));
  EXPECT_NE(run(0), run(1));
  // Evaluation's resize and centre crop land on the middle of the image.
  const auto e = parse_transforms(nlohmann::json::parse(R"([{"resize": 48}, {"center_crop": 48}])"), "k");
  std::vector<float> out(3 * 48 * 48);
  apply(e, data(jpeg), jpeg.size(), {0, 0, 0}, 3, 48, 48, out.data(), "a.jpg");
  const auto whole = decode(data(jpeg), jpeg.size(), 3, "a.jpg");
  // Row 24 of the output is row 48 of the image, column 24 is column 64.
  EXPECT_NEAR(out[(0 * 48 + 24) * 48 + 24] * 255, whole.at(48, 64, 0), 4.0);
  try {
    apply(e, data(jpeg), jpeg.size(), {0, 0, 0}, 3, 32, 32, out.data(), "a.jpg");
    ADD_FAILURE() << "a 48x48 output was accepted for a 32x32 model";
  } catch (const DecodeError& err) {
    EXPECT_NE(std::string(err.what()).find("model takes 32x32"), std::string::npos) << err.what();
  }
}

}  // namespace
}  // namespace trident::images

namespace trident::images {
namespace {

TEST(LoaderRate, MeasuredWrittenAndReadBack) {
  const auto dir = std::filesystem::temp_directory_path() / ("trident-loader-rate-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  ::setenv("TRIDENT_CACHE_DIR", dir.c_str(), 1);
  EXPECT_FALSE(read_loader_rate());
  const double rate = measure_loader_rate(10);
  EXPECT_GT(rate, 0);
  write_loader_rate(rate);
  ASSERT_TRUE(read_loader_rate());
  EXPECT_DOUBLE_EQ(*read_loader_rate(), rate);
  std::ofstream(loader_rate_path()) << "{\"images_per_s_per_thread\": -1}";
  EXPECT_FALSE(read_loader_rate());  // not a rate: as if never measured
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace trident::images
