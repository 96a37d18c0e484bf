#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "trident/data/dataset.h"
#include "trident/data/sampler.h"
#include "trident/zoo/zoo.h"

namespace trident::data {
namespace {

TEST(FashionMnist, ReadsBothSplitsWithLabelsInRange) {
  auto s = load_fashion_mnist(kFashionMnistDir);
  EXPECT_EQ(s.train.size(), 60000);
  EXPECT_EQ(s.test.size(), 10000);
  EXPECT_EQ(s.train.fields.at("image").sizes(), (std::vector<int64_t>{60000, 1, 28, 28}));
  EXPECT_EQ(s.train.fields.at("label").min().item<int64_t>(), 0);
  EXPECT_EQ(s.train.fields.at("label").max().item<int64_t>(), 9);
  // Normalised with the training set's own statistics.
  EXPECT_NEAR(s.train.fields.at("image").mean().item<double>(), 0.0, 0.01);
  EXPECT_NO_THROW(s.train.check_fits(zoo::build_graph({"inception", "tiny"})));
}

TEST(FashionMnist, MissingOrCorruptFileNamesThePathAndThePackage) {
  auto dir = std::filesystem::temp_directory_path() / ("trident_fm_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  try {
    load_fashion_mnist(dir.string());
    FAIL();
  } catch (const DataError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(dir.string() + "/train-images-idx3-ubyte.gz"), std::string::npos) << msg;
    EXPECT_NE(msg.find("dataset-fashion-mnist"), std::string::npos) << msg;
  }
  std::ofstream(dir / "train-images-idx3-ubyte.gz") << "this is not an idx file";
  try {
    load_fashion_mnist(dir.string());
    FAIL();
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("not an IDX file"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

TEST(Synthetic, DeterministicFitsTheGraphAndUsesEveryClass) {
  for (const char* name : {"mmt", "dlrm", "candle_uno"}) {
    auto g = zoo::build_graph({name, "tiny"});
    auto a = make_synthetic(g, 512, 128, 7), b = make_synthetic(g, 512, 128, 7), c = make_synthetic(g, 512, 128, 8);
    EXPECT_NO_THROW(a.train.check_fits(g)) << name;
    EXPECT_EQ(a.test.size(), 128);
    for (const auto& [field, t] : a.train.fields) EXPECT_TRUE(torch::equal(t, b.train.fields.at(field))) << field;
    EXPECT_FALSE(torch::equal(a.train.fields.at("label"), c.train.fields.at("label")));
    auto counts = torch::bincount(a.train.fields.at("label"), {}, a.train.num_classes);
    EXPECT_GT(counts.min().item<int64_t>(), 0) << name << ": a class never occurs";
  }
}

TEST(Dataset, MismatchedModelIsNamed) {
  auto s = make_synthetic(zoo::build_graph({"dlrm", "tiny"}), 16, 4, 0);
  try {
    s.train.check_fits(zoo::build_graph({"mmt", "tiny"}));
    FAIL();
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("'modality0'"), std::string::npos) << e.what();
  }
}

TEST(Sampler, EpochsArePermutationsAndRepeatable) {
  EpochSampler a(10, 3, 5), b(10, 3, 5);
  EXPECT_EQ(a.steps_per_epoch(), 3);  // the partial batch of 1 is dropped
  std::set<int64_t> seen;
  for (int step = 0; step < 3; ++step) {
    auto idx = a.batch_indices(step);
    EXPECT_EQ(idx.numel(), 3);
    for (int64_t i = 0; i < 3; ++i) seen.insert(idx[i].item<int64_t>());
  }
  EXPECT_EQ(seen.size(), 9u);
  EXPECT_TRUE(torch::equal(a.batch_indices(4), b.batch_indices(4)));  // any step, any order of asking
  EXPECT_FALSE(torch::equal(a.batch_indices(0), a.batch_indices(3)));  // a new epoch reshuffles
  EXPECT_THROW(EpochSampler(4, 5, 0), DataError);
}

TEST(Sampler, ShardRangesCoverRowsContiguously) {
  std::int64_t next = 0;
  for (int part = 0; part < 3; ++part) {
    auto [b, e] = shard_range(10, part, 3);
    EXPECT_EQ(b, next);
    EXPECT_GE(e - b, 3);
    next = e;
  }
  EXPECT_EQ(next, 10);
  EXPECT_THROW(shard_range(10, 3, 3), DataError);
}

}  // namespace
}  // namespace trident::data
