// Checkpoints: one-file checkpoints, sharded checkpoints with their manifest, and the manifest's checks.
#include "trident/checkpoint/checkpoint.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "trident/checkpoint/checkpoint_diff.h"
#include "trident/checkpoint/sharded_checkpoint.h"

namespace trident::checkpoint {
namespace {

// An empty scratch directory of this process.
std::string temp_dir(const std::string& tag) {
  const auto d = std::filesystem::temp_directory_path() / ("trident_ck_" + tag + "_" + std::to_string(::getpid()));
  return std::filesystem::remove_all(d), std::filesystem::create_directories(d), d.string();
}

TEST(Checkpoint, RoundTripsByNameAndLeavesNoTempFile) {
  const auto dir = temp_dir("ckpt");
  Checkpoint ck;
  ck.step = 42;
  ck.meta["note"] = "x";
  ck.params["a.weight"] = torch::randn({3, 2});
  ck.params["b.bias"] = torch::randn({4});
  ck.optimizer["a.weight"]["momentum_buffer"] = torch::randn({3, 2});
  save_checkpoint(dir + "/c.pt", ck);
  auto back = load_checkpoint(dir + "/c.pt");
  EXPECT_EQ(back.step, 42);
  EXPECT_EQ(back.meta["note"], "x");
  // Bitwise: a round trip through a file: bytes, no arithmetic.
  EXPECT_TRUE(torch::equal(back.params.at("a.weight"), ck.params.at("a.weight")));
  EXPECT_TRUE(torch::equal(back.params.at("b.bias"), ck.params.at("b.bias")));
  EXPECT_TRUE(torch::equal(back.optimizer.at("a.weight").at("momentum_buffer"),
                           ck.optimizer.at("a.weight").at("momentum_buffer")));
  int files = 0;
  for (auto it = std::filesystem::directory_iterator(dir); it != std::filesystem::directory_iterator(); ++it) ++files;
  EXPECT_EQ(files, 1);
  EXPECT_THROW(load_checkpoint(dir + "/missing.pt"), CheckpointError);
  std::filesystem::remove_all(dir);
}

TEST(ShardedCheckpoint, ShardsAManifestAndTheNewestKept) {
  const auto run = temp_dir("shards");
  auto a = torch::randn({3, 4}), b = torch::arange(5, torch::kInt64), c = torch::randn({2});
  for (std::int64_t step : {10, 20, 30}) {
    const auto partial = partial_checkpoint_dir(run, step);
    std::filesystem::create_directories(partial);
    auto tensors = write_shard(partial, "rank-0.bin", {{"param/a", a * step}, {"optim/a/step", b}});
    tensors.update(write_shard(partial, "rank-1.bin", {{"param/c", c}}));
    publish_checkpoint(run, step, {{"tensors", tensors}, {"wall_s", 1.5}}, 2);
  }
  // keep = 2: step 10 is gone; a partial directory is no checkpoint.
  EXPECT_FALSE(std::filesystem::exists(checkpoint_dir(run, 10)));
  std::filesystem::create_directories(partial_checkpoint_dir(run, 40));
  auto ck = CheckpointReader::latest(run);
  EXPECT_EQ(ck.step(), 30);
  // Bitwise: what was written, read back (a * 30 is the same elementwise product on both sides).
  EXPECT_TRUE(torch::equal(ck.read("param/a"), a * 30));
  EXPECT_TRUE(torch::equal(ck.read("optim/a/step"), b));
  EXPECT_TRUE(torch::equal(ck.read("param/c"), c));
  EXPECT_EQ(ck.keys("param/"), (std::vector<std::string>{"param/a", "param/c"}));
  EXPECT_DOUBLE_EQ(ck.manifest().value("wall_s", 0.0), 1.5);
  EXPECT_THROW(ck.read("param/missing"), CheckpointError);
  // A flipped byte in a shard is caught by its CRC, naming the tensor.
  {
    std::fstream f(checkpoint_dir(run, 30) + "/rank-1.bin", std::ios::in | std::ios::out | std::ios::binary);
    char byte = 0;
    f.seekg(3);
    f.get(byte);
    f.seekp(3);
    f.put(static_cast<char>(byte ^ 0x10));
  }
  try {
    CheckpointReader::latest(run).read("param/c");
    FAIL();
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("'param/c'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("CRC-32"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(run);
}

// `trident diff`: keys on one side, a shape that differs, values beyond the
// tolerances, and the largest difference with its key; the prefix chooses
// weights alone or the optimizer state too.
TEST(CheckpointDiff, NamesWhatDiffersAndByHowMuch) {
  const auto run = temp_dir("diff");
  auto publish = [&](const std::string& name, const NamedTensors& tensors) {
    const auto dir = run + "/" + name;
    std::filesystem::create_directories(partial_checkpoint_dir(dir, 1));
    publish_checkpoint(dir, 1, {{"tensors", write_shard(partial_checkpoint_dir(dir, 1), "rank-0.bin", tensors)}}, 1);
    return CheckpointReader::latest(dir);
  };
  const auto w = torch::arange(6, torch::kFloat32).reshape({2, 3});
  const auto a = publish("a", {{"param/w", w}, {"param/b", torch::zeros({3})}, {"optim/w/step", torch::ones({1})}});
  const auto same = publish("same", {{"param/w", w.clone()}, {"param/b", torch::zeros({3})}, {"optim/w/step", torch::ones({1})}});
  const auto b = publish("b", {{"param/w", w + 0.5}, {"param/b", torch::zeros({4})}, {"param/extra", torch::zeros({1})},
                               {"optim/w/step", torch::full({1}, 2.0)}});
  EXPECT_TRUE(diff_checkpoints(a, same, "", 1e-5, 1e-6).equal());
  const auto d = diff_checkpoints(a, b, "param/", 1e-5, 1e-6);
  EXPECT_FALSE(d.equal());
  EXPECT_EQ(d.only_b, (std::vector<std::string>{"param/extra"}));
  EXPECT_TRUE(d.only_a.empty());
  EXPECT_EQ(d.shape_differs, (std::vector<std::string>{"param/b"}));
  EXPECT_EQ(d.value_differs, (std::vector<std::string>{"param/w"}));
  EXPECT_EQ(d.compared, 2u);
  EXPECT_DOUBLE_EQ(d.max_abs, 0.5);
  EXPECT_EQ(d.max_abs_key, "param/w");
  EXPECT_TRUE(diff_checkpoints(a, b, "param/", 0, 0.6).value_differs.empty());  // within atol
  EXPECT_EQ(diff_checkpoints(a, b, "optim/", 1e-5, 1e-6).value_differs, (std::vector<std::string>{"optim/w/step"}));
  std::filesystem::remove_all(run);
}

// A manifest is checked whole when a checkpoint is opened (manifest.h): a
// corrupt entry is named before any tensor is allocated or read.
TEST(Manifest, EveryEntryIsCheckedWhenRead) {
  const auto dir = (std::filesystem::temp_directory_path() / ("trident-manifest-" + std::to_string(getpid()))).string();
  std::filesystem::create_directories(dir);
  // Every dtype a shard can hold: the entries write_shard makes are accepted,
  // so kCheckpointDtypes' sizes agree with torch's.
  NamedTensors all;
  for (auto type : {torch::kFloat32, torch::kFloat64, torch::kFloat16, torch::kBFloat16, torch::kInt64, torch::kInt32})
    all.emplace_back(std::string("param/") + c10::toString(type), torch::ones({2, 3}, type));
  nlohmann::json good{{"format", kCheckpointFormat}, {"step", 7}, {"tensors", write_shard(dir, "rank-0.bin", all)}};
  const auto m = parse_manifest(good, "m.json");
  EXPECT_EQ(m.step, 7);
  ASSERT_EQ(m.tensors.size(), all.size());
  EXPECT_EQ(m.tensors.at("param/Double").bytes, 48);
  EXPECT_EQ(m.tensors.at("param/Double").shape, (std::vector<std::int64_t>{2, 3}));
  std::filesystem::remove_all(dir);
  // corrupt(FIELD, VALUE) names the field and the tensor.
  auto corrupt = [&](const std::string& field, const nlohmann::json& value, const std::string& said) {
    auto bad = good;
    bad["tensors"]["param/Float"][field] = value;
    try {
      parse_manifest(bad, "m.json");
      ADD_FAILURE() << field << " = " << value.dump() << " was accepted";
    } catch (const CheckpointError& e) {
      EXPECT_NE(std::string(e.what()).find("tensor 'param/Float': '"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(said), std::string::npos) << e.what();
    }
  };
  corrupt("shape", {2, -3}, "negative dimension");
  corrupt("shape", {1 << 30, 1 << 30, 4}, "more than 2^40 elements");
  corrupt("shape", {3, 3}, "do not fit its shape");
  corrupt("bytes", 25, "do not fit its shape");
  corrupt("file", "../rank-0.bin", "must name a shard beside the manifest");
  corrupt("crc32", 1.5, "is not what it must be");
  corrupt("crc32", -1, "is not what it must be");
  corrupt("offset", 1e+123, "is not what it must be");
  corrupt("dtype", "int8", "'int8' is unknown");
  auto rejected = [&](nlohmann::json bad, const std::string& said) {
    try {
      parse_manifest(bad, "m.json");
      ADD_FAILURE() << bad.dump() << " was accepted";
    } catch (const CheckpointError& e) {
      EXPECT_NE(std::string(e.what()).find(said), std::string::npos) << e.what();
    }
  };
  auto no_tensors = good;
  no_tensors["tensors"] = nlohmann::json::array();
  rejected(no_tensors, "'tensors' is missing or not an object");
  auto old = good;
  old["format"] = "trident-checkpoint/1";
  rejected(old, "expected trident-checkpoint/2");
  rejected(nlohmann::json::array(), "is not a JSON object");
}

}  // namespace
}  // namespace trident::checkpoint
