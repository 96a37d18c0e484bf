#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <fstream>

#include "trident/data/dataset.h"
#include "trident/data/npy.h"
#include "trident/data/sampler.h"
#include "trident/data/tokens.h"
#include "trident/gnn/graph_data.h"
#include "trident/zoo/zoo.h"

namespace trident::data {
namespace {

// A .npy file as numpy.save writes it (format 1.0): magic, header length,
// a dict literal padded with spaces to 64 bytes, then the data.
std::string npy(const std::string& descr, const std::string& shape, const std::string& data, bool fortran = false) {
  std::string header = "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
                       ", 'shape': (" + shape + "), }";
  if (header.size() < 63) header.resize(63, ' ');
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  return out + header + data;
}

template <class T>
std::string bytes_of(std::vector<T> v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

TEST(Npy, ReadsFloat32AndInt64InCOrder) {
  auto f = parse_npy(npy("<f4", "2, 3", bytes_of<float>({0, 1, 2, 3, 4, 5})), "x.npy");
  EXPECT_EQ(f.sizes(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(f.scalar_type(), torch::kFloat32);
  EXPECT_FLOAT_EQ(f[1][2].item<float>(), 5);
  auto i = parse_npy(npy("<i8", "2,", bytes_of<int64_t>({3, -1})), "l.npy");
  EXPECT_EQ(i.sizes(), (std::vector<int64_t>{2}));
  EXPECT_EQ(i[1].item<int64_t>(), -1);
}

TEST(Npy, BadFilesNameTheFileAndTheProblem) {
  auto expect = [](const std::string& bytes, const std::string& needle) {
    try {
      parse_npy(bytes, "f.npy");
      FAIL() << "expected DataError: " << needle;
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find("f.npy"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect("PK\x03\x04 not numpy", "not a .npy file");
  expect(npy("<f8", "1,", bytes_of<double>({1})), "dtype '<f8' is not supported");
  expect(npy("<f4", "2, 2", bytes_of<float>({1, 2, 3, 4}), true), "Fortran order");
  expect(npy("<f4", "2, 3", bytes_of<float>({1, 2})), "needs 24 bytes of data but the file has 8");
  expect(npy("<f4", "", ""), "0-d array");
  expect(npy("<f4", "99999999999999, 99999999", ""), "too large");
  expect(npy("<f4", "2,", bytes_of<float>({1, 2})).substr(0, 20), "cut short");
}

// Mutated files never crash the reader: each one parses or is a DataError.
TEST(Npy, MutatedFilesParseOrAreRefused) {
  const auto good = npy("<f4", "4, 2", bytes_of<float>({1, 2, 3, 4, 5, 6, 7, 8}));
  std::mt19937 rng(11);
  int refused = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    auto bytes = good;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const auto at = rng() % bytes.size();
      switch (rng() % 3) {
        case 0: bytes[at] = static_cast<char>(rng()); break;
        case 1: bytes.erase(at, 1 + rng() % 8); break;
        default: bytes.insert(at, 1, static_cast<char>("0123456789,() '<>fi"[rng() % 19])); break;
      }
      if (bytes.empty()) bytes = "x";
    }
    try {
      auto t = parse_npy(bytes, "m.npy");
      EXPECT_EQ(static_cast<std::size_t>(t.numel()) * t.element_size() + 10 <= bytes.size(), true);
    } catch (const DataError&) {
      ++refused;
    }
  }
  EXPECT_GT(refused, 100);
}

// See tokens.h: row n of [N, T+1] ids is sample n, its first T ids the
// model's input and its last T the labels; anything else is named.
TEST(Tokens, ARowIsTheIdsAndTheNextTokens) {
  const auto g = zoo::build_graph({"gpt", "tiny"});  // 32 positions, 64 ids
  EXPECT_EQ(token_field(g), "ids");
  const auto dir = std::filesystem::temp_directory_path() / ("trident_tokens_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& bytes) {
    std::ofstream(dir / name, std::ios::binary) << bytes;
    return (dir / name).string();
  };
  std::vector<std::int64_t> ids(3 * 33);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int64_t>(i % 64);
  const auto good = write("good.npy", npy("<i8", "3, 33", bytes_of(ids)));
  const auto s = load_tokens(g, good, good, {"ids", "label"});
  EXPECT_EQ(s.train.size(), 3);
  EXPECT_EQ(s.train.fields.at("ids").sizes(), (std::vector<std::int64_t>{3, 32}));
  EXPECT_EQ(s.train.fields.at("ids")[1][0].item<std::int64_t>(), 33);
  EXPECT_EQ(s.train.fields.at("label")[1][0].item<std::int64_t>(), 34);  // the next token
  EXPECT_EQ(s.train.fields.at("label")[2][31].item<std::int64_t>(), (3 * 33 - 1) % 64);
  EXPECT_NO_THROW(s.train.check_fits(g));
  EXPECT_EQ(load_tokens(g, good, good, {"label"}).train.fields.count("ids"), 0u);  // a stage loads what it reads
  auto refused = [&](const std::string& file, const std::string& needle) {
    try {
      load_tokens(g, file, good, {"ids", "label"});
      ADD_FAILURE() << file << " was taken";
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  refused(write("short.npy", npy("<i8", "3, 32", bytes_of(std::vector<std::int64_t>(96, 1)))),
          "reads int64 token ids [N, 33] (its 32 positions and the next token)");
  refused(write("float.npy", npy("<f4", "3, 33", bytes_of(std::vector<float>(99, 1)))), "holds Float [3, 33]");
  ids[40] = 64;
  refused(write("range.npy", npy("<i8", "3, 33", bytes_of(ids))), "holds token id 64; model 'gpt' takes ids from 0 to 63");
  try {
    token_field(zoo::build_graph({"mlp", "tiny"}));
    FAIL();
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("has no loss per position"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

TEST(FashionMnist, ReadsBothSplitsWithLabelsInRange) {
  auto s = load_fashion_mnist(formats::kFashionMnistDir);
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
    // Bitwise: generated twice from one seed in this process; the same kernels draw and label both.
    for (const auto& [field, t] : a.train.fields) EXPECT_TRUE(torch::equal(t, b.train.fields.at(field))) << field;
    EXPECT_FALSE(torch::equal(a.train.fields.at("label"), c.train.fields.at("label")));
    auto counts = torch::bincount(a.train.fields.at("label"), {}, a.train.num_classes);
    EXPECT_GT(counts.min().item<int64_t>(), 0) << name << ": a class never occurs";
  }
}

// A language model's vocabulary: the teacher is rank 64, not two 50,257 x
// 50,257 tables (20 GB, which got a 2-process gpt2-124m run killed).
TEST(Synthetic, TokensOfALargeVocabularyFromALowRankTeacher) {
  auto g = zoo::build_graph({"gpt", "gpt2-124m"});
  auto a = make_synthetic(g, 3, 1, 7), b = make_synthetic(g, 3, 1, 7);
  EXPECT_NO_THROW(a.train.check_fits(g));
  const auto& label = a.train.fields.at("label");
  EXPECT_EQ(label.sizes(), (std::vector<std::int64_t>{3, 1024}));
  EXPECT_GE(label.min().item<std::int64_t>(), 0);
  EXPECT_LT(label.max().item<std::int64_t>(), 50257);
  EXPECT_GT(std::get<0>(at::_unique(label)).numel(), 100) << "the labels should spread over the vocabulary";
  // Bitwise: generated twice from one seed in this process; the same kernels draw and label both.
  EXPECT_TRUE(torch::equal(label, b.train.fields.at("label")));
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
  // Bitwise: integer indices drawn from (seed, epoch); no floating point.
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

// A graph is one sample: its fields follow the graph, the train split's
// mask is the training mask and the test split's the mask data.eval names.
TEST(GraphDataset, OneSampleWithTheMasksAsked) {
  const std::string source = "csbm:nodes=90,classes=3,features=5,train_per_class=4,val=20,test=30";
  const auto g = gnn::load_graph(source);
  for (const std::string eval : {"test", "val"}) {
    const auto s = load_graph_dataset(source, eval);
    EXPECT_EQ(s.train.size(), 1);
    EXPECT_EQ(s.train.num_classes, 3);
    EXPECT_EQ(s.train.fields.at("features").sizes(), (std::vector<std::int64_t>{1, 90, 5}));
    EXPECT_EQ(s.train.fields.at("features")[0][7][2].item<float>(), g.x[7 * 5 + 2]);
    EXPECT_EQ(s.train.fields.at("label")[0][11].item<std::int64_t>(), g.labels[11]);
    EXPECT_EQ(s.train.fields.at("mask").sum().item<double>(), 12);
    EXPECT_EQ(s.test.fields.at("mask").sum().item<double>(), eval == "val" ? 20 : 30);
    for (std::int64_t i = 0; i < 90; ++i)
      EXPECT_EQ(s.test.fields.at("mask")[0][i].item<float>(), (eval == "val" ? g.val : g.test)[i]) << i;
  }
  const auto only = load_graph_dataset(source, "test", {"label", "mask"});
  EXPECT_EQ(only.train.fields.count("features"), 0u);
  const auto graph = zoo::build_graph({"gcn2", "tiny", "", "", source});
  EXPECT_NO_THROW(load_graph_dataset(source, "test").train.check_fits(graph));
  EXPECT_THROW(load_graph_dataset(source, "train"), DataError);
}

}  // namespace
}  // namespace trident::data
