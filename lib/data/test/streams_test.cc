// Streamed sources and the Loader: image folders read through transforms,
// token files, mapped arrays; batches independent of workers and
// prefetching; bad samples named or replaced.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "trident/data/loader.h"
#include "trident/data/npy.h"
#include "trident/data/sampler.h"
#include "trident/data/streams.h"
#include "trident/images/decode.h"
#include "trident/zoo/zoo.h"

namespace trident::data {
namespace {
namespace fs = std::filesystem;

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("trident-data-streams-" + std::to_string(::getpid()) + "-" +
                                               ::testing::UnitTest::GetInstance()->current_test_info()->name());
  TempDir() { fs::remove_all(path), fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
  std::string write(const std::string& rel, const std::string& bytes) const {
    fs::create_directories((path / rel).parent_path());
    std::ofstream(path / rel, std::ios::binary) << bytes;
    return (path / rel).string();
  }
};

images::Image noise(int height, int width, std::uint32_t seed) {
  images::Image im;
  im.height = height, im.width = width, im.channels = 3;
  std::uint32_t x = seed * 2654435761u + 1;
  for (int i = 0; i < height * width * 3; ++i) im.pixels.push_back(static_cast<std::uint8_t>((x = x * 1664525u + 1013904223u) >> 24));
  return im;
}

// An image folder of `n` JPEGs and PNGs of various sizes in 3 classes.
std::string image_folder(const TempDir& d, int n) {
  for (int i = 0; i < n; ++i) {
    const auto im = noise(20 + (i * 7) % 30, 24 + (i * 11) % 40, static_cast<std::uint32_t>(i));
    const auto name = "train/class" + std::to_string(i % 3) + "/" + std::to_string(i);
    if (i % 4 == 0) d.write(name + ".png", images::encode_png(im));
    else d.write(name + ".jpg", images::encode_jpeg(im, 90));
  }
  return (d.path / "train").string();
}

ImageOptions augmenting(int size) {
  ImageOptions o;
  o.channels = 3, o.height = o.width = size, o.seed = 11;
  o.transforms = images::parse_transforms(default_transforms(3, size, size, true), "data.transforms");
  return o;
}

// Steps 0..steps-1, each asked as two ranges (micro-batches), as a stage asks.
std::vector<Batch> serve(Loader& loader, int steps, std::int64_t batch) {
  std::vector<Batch> out;
  for (int s = 0; s < steps; ++s)
    for (auto [b, e] : {std::pair<std::int64_t, std::int64_t>{0, batch / 2}, {batch / 2, batch}})
      out.push_back(loader.rows(s, b, e, {"image", "label"}));
  return out;
}

TEST(Loader, OneTwoAndFourWorkersGiveTheBatchesOfReadingInOrder) {
  TempDir d;
  auto source = open_images("images", image_folder(d, 30), augmenting(16), (d.path / "cache").string());
  ASSERT_EQ(source->size(), 30);
  EpochSampler sampler(source->size(), 8, 5);
  const auto ids = [&](std::int64_t s) { return sampler.batch_indices(s); };
  const auto epoch = [&](std::int64_t s) { return sampler.epoch_of(s); };
  // 6 steps: two epochs of 3, so the crops of epoch 1 differ from epoch 0's.
  std::vector<Batch> expected;
  for (int s = 0; s < 6; ++s)
    for (auto [b, e] : {std::pair<std::int64_t, std::int64_t>{0, 4}, {4, 8}})
      expected.push_back(source->read(sampler.batch_indices(s).slice(0, b, e), {"image", "label"}, sampler.epoch_of(s)));
  EXPECT_FALSE(torch::equal(expected[0].at("image"), source->read(sampler.batch_indices(0).slice(0, 0, 4), {"image"}, 1).at("image")));
  // Bitwise: no arithmetic differs — each sample is decoded and transformed by
  // the same code from the same bytes and key, whichever thread runs it.
  for (int workers : {0, 1, 2, 4}) {
    for (int prefetch : {1, 3}) {
      Loader loader(source, ids, epoch, {workers, prefetch, false});
      const auto got = serve(loader, 6, 8);
      for (std::size_t i = 0; i < got.size(); ++i) {
        EXPECT_TRUE(torch::equal(got[i].at("image"), expected[i].at("image"))) << workers << " workers, request " << i;
        EXPECT_TRUE(torch::equal(got[i].at("label"), expected[i].at("label"))) << workers << " workers, request " << i;
      }
      if (workers) EXPECT_GT(loader.samples_read(), 6 * 8 - 1);
    }
  }
}

TEST(Loader, ABadSampleStopsTheRunNamingItOrIsReplacedByTheNext) {
  TempDir d;
  const auto root = image_folder(d, 12);
  const auto index = formats::scan_image_folder(root);
  const auto victim = index.files[index.samples[5].file];
  fs::resize_file(victim, fs::file_size(victim) / 2);  // truncated after indexing
  auto source = image_source(index, augmenting(16));
  const auto all = torch::arange(12);
  try {
    Loader loader(source, [&](std::int64_t) { return all; }, [](std::int64_t) { return std::int64_t{0}; }, {2, 2, false});
    loader.rows(0, 0, 12, {"image", "label"});
    ADD_FAILURE() << "a truncated image was read";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("sample 5"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(victim), std::string::npos) << e.what();
  }
  Loader skipping(source, [&](std::int64_t) { return all; }, [](std::int64_t) { return std::int64_t{0}; }, {2, 2, true});
  const auto got = skipping.rows(0, 0, 12, {"image", "label"});
  const auto next = source->read(torch::tensor({std::int64_t{6}}), {"image", "label"}, 0);
  // Bitwise: the same decode of the same file and key, in another thread.
  EXPECT_TRUE(torch::equal(got.at("image")[5], next.at("image")[0]));
  EXPECT_EQ(got.at("label")[5].item<std::int64_t>(), next.at("label")[0].item<std::int64_t>());
  ASSERT_EQ(skipping.bad().size(), 1u);
  EXPECT_EQ(skipping.bad()[0].id, 5);
  EXPECT_EQ(skipping.bad()[0].replaced_by, 6);
  // A file that vanishes after indexing is named the same way.
  fs::remove(index.files[index.samples[2].file]);
  try {
    source->read(torch::tensor({std::int64_t{2}}), {"image"}, 0);
    ADD_FAILURE() << "a vanished image was read";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("sample 2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cannot be read"), std::string::npos) << e.what();
  }
}

TEST(ImageSource, EvaluationTransformsAreDeterministicAndLabelsComeFromTheIndex) {
  TempDir d;
  ImageOptions o;
  o.channels = 3, o.height = o.width = 16;
  o.transforms = images::parse_transforms(default_transforms(3, 16, 16, false), "data.eval_transforms");
  auto source = open_images("images", image_folder(d, 9), o, (d.path / "cache").string());
  const auto a = source->read(torch::arange(9), {}, 0), b = source->read(torch::arange(9), {}, 3);
  // Bitwise: one thread decodes the same bytes twice; only the (unused) epoch differs.
  EXPECT_TRUE(torch::equal(a.at("image"), b.at("image")));
  // Class by class: sample i of image_folder is in class i % 3, sorted by name within it.
  const auto labels = a.at("label");
  for (int i = 0; i < 9; ++i) EXPECT_EQ(labels[i].item<std::int64_t>(), i / 3);
  EXPECT_EQ(source->read(torch::arange(9), {"label"}, 0).count("image"), 0u);
  const auto g = zoo::build_graph({"mlp", "tiny"});  // 1 x 28 x 28 images
  EXPECT_THROW(source->check_fits(g), DataError);
}

// nanoGPT's bare uint16 ids and Megatron's .bin + .idx (int32): sample n
// is ids [nT, nT + T) and labels [nT + 1, nT + T + 1).
TEST(TokenSource, SamplesAreWindowsOfTheStream) {
  TempDir d;
  const auto g = zoo::build_graph({"gpt", "tiny"});  // 32 positions, 64 ids
  std::vector<std::uint16_t> ids(32 * 5 + 3);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::uint16_t>((i * 7) % 64);
  const auto bin = d.write("nano.bin", std::string(reinterpret_cast<const char*>(ids.data()), ids.size() * 2));
  const auto nano = open_token_file(g, bin);
  EXPECT_EQ(nano->size(), 5);  // (163 - 1) / 32
  const auto b = nano->read(torch::tensor({std::int64_t{0}, std::int64_t{3}}), {}, 0);
  EXPECT_EQ(b.at("ids")[1][0].item<std::int64_t>(), (3 * 32 * 7) % 64);
  EXPECT_EQ(b.at("label")[1][31].item<std::int64_t>(), ((3 * 32 + 32) * 7) % 64);
  EXPECT_NO_THROW(nano->check_fits(g));
  // Megatron: two documents of int32 ids, the same stream.
  std::vector<std::int32_t> wide(ids.begin(), ids.end());
  const auto mbin = d.write("m.bin", std::string(reinterpret_cast<const char*>(wide.data()), wide.size() * 4));
  std::string idx("MMIDIDX\0\0", 9);
  auto put = [&](auto v) { idx.append(reinterpret_cast<const char*>(&v), sizeof v); };
  put(std::uint64_t{1}), put(std::uint8_t{4}), put(std::uint64_t{2}), put(std::uint64_t{3});
  put(std::int32_t{100}), put(static_cast<std::int32_t>(wide.size() - 100));
  put(std::int64_t{0}), put(std::int64_t{400});
  put(std::int64_t{0}), put(std::int64_t{1}), put(std::int64_t{2});
  d.write("m.idx", idx);
  const auto mega = open_token_file(g, mbin);
  // Bitwise: integers copied, no arithmetic.
  EXPECT_TRUE(torch::equal(mega->read(torch::arange(5), {}, 0).at("label"), nano->read(torch::arange(5), {}, 0).at("label")));
  ids[77] = 64;  // one id past the vocabulary
  const auto bad = d.write("bad.bin", std::string(reinterpret_cast<const char*>(ids.data()), ids.size() * 2));
  try {
    open_token_file(g, bad);
    ADD_FAILURE() << "id 64 accepted";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("token id 64 at position 77"), std::string::npos) << e.what();
  }
}

std::string npy(const std::string& descr, const std::string& shape, const std::string& data) {
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + shape + "), }";
  header.resize(63, ' ');
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size()), out += '\0';
  return out + header + data;
}

TEST(MapNpy, MappedArraysEqualArraysReadWhole) {
  TempDir d;
  std::vector<float> x(6 * 4);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) / 3;
  const std::vector<std::int64_t> y{0, 2, 1, 2, 0, 1};
  for (const char* split : {"train", "test"}) {
    d.write(std::string(split) + "/x.npy", npy("<f4", "6, 4", std::string(reinterpret_cast<const char*>(x.data()), x.size() * 4)));
    d.write(std::string(split) + "/label.npy", npy("<i8", "6,", std::string(reinterpret_cast<const char*>(y.data()), y.size() * 8)));
  }
  const auto dir = [&](const char* s) { return (d.path / s).string(); };
  const auto mapped = map_npy(dir("train"), dir("test"), {"x", "label"});
  const auto whole = load_npy(dir("train"), dir("test"), {"x", "label"});
  const auto ids = torch::tensor({std::int64_t{4}, std::int64_t{1}});
  // Bitwise: a copy of the same bytes, mapped or read.
  EXPECT_TRUE(torch::equal(mapped.train.batch(ids).at("x"), whole.train.batch(ids).at("x")));
  EXPECT_TRUE(torch::equal(mapped.test.batch(ids).at("label"), whole.test.batch(ids).at("label")));
  EXPECT_EQ(mapped.train.num_classes, 3);
  d.write("train/x.npy", npy("<f4", "6, 4", "short"));
  EXPECT_THROW(map_npy(dir("train"), dir("test"), {"x", "label"}), DataError);
}

}  // namespace
}  // namespace trident::data
