#include "trident/runtime/trainer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <thread>

#include "trident/runtime/checkpoint.h"
#include "trident/runtime/sharded_checkpoint.h"
#include "trident/zoo/zoo.h"

namespace trident::runtime {
namespace {

std::string temp_dir(const std::string& tag) {
  auto d = std::filesystem::temp_directory_path() / ("trident_" + tag + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d.string();
}

TEST(Optimizer, SgdAndAdamMatchTorchOptim) {
  for (const std::string name : {"sgd", "adam"}) {
    OptimizerConfig c;
    c.name = name;
    c.lr = name == "sgd" ? 0.1 : 0.01;
    c.weight_decay = 0.01;
    torch::manual_seed(0);
    auto mine = torch::randn({5, 3});
    auto theirs = mine.clone().requires_grad_(true);
    auto opt = Optimizer::make(c);
    std::unique_ptr<torch::optim::Optimizer> ref;
    if (name == "sgd") {
      ref = std::make_unique<torch::optim::SGD>(std::vector<torch::Tensor>{theirs},
                                                torch::optim::SGDOptions(c.lr).momentum(c.momentum).weight_decay(c.weight_decay));
    } else {
      ref = std::make_unique<torch::optim::Adam>(std::vector<torch::Tensor>{theirs},
                                                 torch::optim::AdamOptions(c.lr).weight_decay(c.weight_decay));
    }
    for (int step = 0; step < 5; ++step) {
      auto grad = torch::randn({5, 3});
      opt->step("w", mine, grad, c.lr);
      theirs.mutable_grad() = grad.clone();
      ref->step();
    }
    EXPECT_TRUE(torch::allclose(mine, theirs.detach(), 1e-6, 1e-7)) << name;
  }
}

TEST(Optimizer, CosineScheduleWithWarmup) {
  OptimizerConfig c;
  c.lr = 1.0;
  c.schedule = "cosine";
  c.warmup_steps = 2;
  c.min_lr = 0.1;
  EXPECT_DOUBLE_EQ(learning_rate(c, 0, 12), 0.5);
  EXPECT_DOUBLE_EQ(learning_rate(c, 2, 12), 1.0);
  EXPECT_NEAR(learning_rate(c, 11, 12), 0.1, 1e-12);
  c.schedule = "constant";
  EXPECT_DOUBLE_EQ(learning_rate(c, 11, 12), 1.0);
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

TrainConfig small_config(const std::string& runs, const std::string& optimizer) {
  return parse_config("name: resume\nmodel: {name: mlp}\ndata: {name: synthetic, train_size: 512, test_size: 128}\n"
                      "train: {steps: 12, mini_batch: 32, seed: 5, threads: 1, log_every: 4}\n"
                      "optimizer: {name: " + optimizer + ", schedule: cosine}\ncheckpoint: {every: 5}\n"
                      "runs_dir: " + runs + "\n");
}

// An interrupted run resumed from its checkpoint ends with bitwise the same
// weights (and optimizer state) as an uninterrupted run.
TEST(Trainer, ResumeReachesBitwiseTheSameWeights) {
  for (const std::string opt : {"sgd", "adam"}) {
    const auto a = temp_dir("full_" + opt), b = temp_dir("stopped_" + opt);
    std::ostringstream log;
    Trainer full(small_config(a, opt), false, log);
    auto r = full.run();
    EXPECT_EQ(r.steps, 12);

    {
      Trainer stopped(small_config(b, opt), false, log);
      stopped.run(7);  // "crashes" after step 7; the last checkpoint is at step 5
    }
    Trainer resumed(small_config(b, opt), true, log);
    EXPECT_EQ(resumed.steps_done(), 5);
    resumed.run();
    const auto& pa = full.params();
    const auto& pb = resumed.params();
    ASSERT_EQ(pa.size(), pb.size());
    for (std::size_t i = 0; i < pa.size(); ++i)
      EXPECT_TRUE(torch::equal(pa[i].second, pb[i].second)) << opt << " " << pa[i].first;
    std::filesystem::remove_all(a);
    std::filesystem::remove_all(b);
  }
}

TEST(Trainer, LossFallsAndMetricsAreWritten) {
  const auto runs = temp_dir("learn");
  auto c = parse_config("name: learn\nmodel: {name: candle_uno}\ndata: {train_size: 2048, test_size: 512}\n"
                        "train: {epochs: 10, mini_batch: 64, threads: 1, log_every: 8}\n"
                        "optimizer: {name: adam, lr: 0.003}\nruns_dir: " + runs + "\n");
  std::ostringstream log;
  Trainer t(c, false, log);
  auto before = t.evaluate(t.data().test);
  EXPECT_NEAR(before.loss, std::log(8.0), 0.1);  // an untrained model is near uniform over 8 classes
  auto r = t.run();
  ASSERT_TRUE(r.test_accuracy.has_value());
  EXPECT_LT(*r.test_loss, before.loss * 0.8) << log.str();
  EXPECT_GT(*r.test_accuracy, before.accuracy + 0.2) << log.str();
  std::ifstream metrics(runs + "/learn/metrics.jsonl");
  std::string line;
  int train_lines = 0, eval_lines = 0;
  while (std::getline(metrics, line)) {
    auto j = nlohmann::json::parse(line);
    if (j.contains("loss")) {
      ++train_lines;
      for (const char* k : {"step", "epoch", "accuracy", "samples_per_s", "wall_s", "lr"}) EXPECT_TRUE(j.contains(k)) << k;
    }
    if (j.contains("test_accuracy")) ++eval_lines;
  }
  EXPECT_EQ(train_lines, 40);  // 320 steps, a line every 8
  EXPECT_EQ(eval_lines, 10);   // once per epoch
  EXPECT_TRUE(std::filesystem::exists(runs + "/learn/checkpoints/step-320/manifest.json"));
  EXPECT_TRUE(std::filesystem::exists(runs + "/learn/config.yaml"));
  std::filesystem::remove_all(runs);
}

TEST(Trainer, ResumeWithoutCheckpointIsAClearError) {
  const auto runs = temp_dir("nockpt");
  std::ostringstream log;
  try {
    Trainer t(small_config(runs, "sgd"), true, log);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("no such run directory"), std::string::npos) << e.what();
  }
  std::filesystem::create_directories(runs + "/resume");  // a run directory without a checkpoint
  try {
    Trainer t(small_config(runs, "sgd"), true, log);
    FAIL();
  } catch (const TrainingError& e) {
    EXPECT_NE(std::string(e.what()).find("no checkpoint in"), std::string::npos) << e.what();
    // Note [Errors]: construction names the rank and the phase, as the loop does.
    EXPECT_EQ(e.context().rank, 0);
    EXPECT_EQ(e.context().action, "resume");
  }
  std::filesystem::remove_all(runs);
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

// Ranks as threads over one HashStore; fn(rank, group) on each. Returns
// each rank's error message ("" when it succeeded).
std::vector<std::string> on_ranks(int n, const std::function<void(int, comm::Group)>& fn) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        fn(r, comm::Group::over_store(store, r, n, std::chrono::milliseconds(30000)));
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  return errors;
}

TrainConfig chain_config(const std::string& runs, const std::string& name, int devices, const std::string& partitioner) {
  return parse_config("name: " + name + "\nmodel: {name: candle_uno}\n"
                      "data: {name: synthetic, train_size: 256, test_size: 40}\n"
                      "train: {steps: 12, mini_batch: 16, seed: 3, threads: 1, log_every: 4, eval: false}\n"
                      "optimizer: {name: adam, lr: 0.01}\ncheckpoint: {every: 3}\n"
                      "parallel: {devices: " + std::to_string(devices) + ", partitioner: " + partitioner +
                      ", micro_batch: 4" + (partitioner == "dp" ? "" : ", max_replicas: 1") + "}\nruns_dir: " + runs +
                      "\n");
}

// Trains one segment of a run on `devices` threads: to `stop_after`, or to the end.
void train_segment(const TrainConfig& c, bool resume, std::optional<std::int64_t> stop_after) {
  const auto errors = on_ranks(static_cast<int>(c.parallel.devices), [&](int, comm::Group group) {
    std::ostringstream log;
    Trainer t(c, resume, log, group);
    t.run(stop_after);
  });
  for (std::size_t r = 0; r < errors.size(); ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// docs/design.md, contract 6: a checkpoint resumes under any plan. Three steps each
// under a graphpipe pipeline on 4 ranks, data parallel on 2, one process,
// and pipedream on 3 end with the weights of one uninterrupted process.
TEST(Resharding, GraphpipeToDataParallelToOneProcessToPipedream) {
  const auto runs = temp_dir("reshard");
  train_segment(chain_config(runs, "whole", 1, "dp"), false, std::nullopt);
  const auto gp = chain_config(runs, "chain", 4, "graphpipe");
  {
    // The graphpipe plan really is a pipeline of several stages.
    const auto p = plan_for(gp, zoo::build_graph(gp.model)).plan;
    ASSERT_GT(p.stages.size(), 2u);
  }
  train_segment(gp, false, 3);
  train_segment(chain_config(runs, "chain", 2, "dp"), true, 6);
  train_segment(chain_config(runs, "chain", 1, "dp"), true, 9);
  train_segment(chain_config(runs, "chain", 3, "pipedream"), true, std::nullopt);
  const auto whole = CheckpointReader::latest(runs + "/whole"), chain = CheckpointReader::latest(runs + "/chain");
  EXPECT_EQ(chain.step(), 12);
  ASSERT_EQ(whole.keys("param/"), chain.keys("param/"));
  ASSERT_FALSE(whole.keys("param/").empty());
  for (const auto& key : whole.keys("param/")) {
    const auto a = whole.read(key), b = chain.read(key);
    EXPECT_TRUE(torch::allclose(a, b, 1e-5, 1e-5)) << key << " differs by " << (a - b).abs().max().item<double>();
  }
  for (const auto& key : whole.keys("optim/")) EXPECT_TRUE(chain.has(key)) << key;
  std::filesystem::remove_all(runs);
}

// docs/design.md, contract 8: rank 0 makes the plan; a rank started with another
// config stops every rank at start, naming itself and the first difference.
TEST(Plan, RanksWithDifferentConfigsFailAtStartNamingTheDifference) {
  const auto runs = temp_dir("disagree");
  const auto errors = on_ranks(2, [&](int r, comm::Group group) {
    auto c = chain_config(runs, "disagree", 2, "pipedream");
    if (r == 1) c.optimizer.lr = 0.5;
    std::ostringstream log;
    Trainer t(c, false, log, group);
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(errors[r].find("rank 1 was started with another config than rank 0"), std::string::npos) << errors[r];
    EXPECT_NE(errors[r].find("lr: 0.5"), std::string::npos) << errors[r];
  }
  std::filesystem::remove_all(runs);
}

// Note [Pipelined evaluation]: forward through a 4-rank pipeline (and
// through one process) gives what a plain forward of the whole graph gives
// over every test row (the weights start equal by name).
TEST(Evaluation, PipelinedEqualsOneProcess) {
  const auto runs = temp_dir("eval");
  std::ostringstream log;
  Trainer one(chain_config(runs, "one", 1, "dp"), false, log);
  const auto g = zoo::build_graph({"candle_uno", "tiny"});
  nn::GraphModule whole(g, 3);  // train.seed of chain_config
  Evaluation expected;
  {
    torch::NoGradGuard no_grad;
    auto sg = graph::whole_graph(g);
    const auto logits = g.op(g.loss()).inputs[0].producer;
    sg.outputs.push_back(logits);
    const auto& test = one.data().test;
    const auto out = nn::GraphExecutor(whole, sg).forward({}, test.fields);
    expected.loss = out.at(g.loss()).item<double>() / static_cast<double>(test.size());
    expected.accuracy = out.at(logits).argmax(1).eq(test.fields.at("label")).sum().item<double>() /
                        static_cast<double>(test.size());
  }
  const auto single = one.evaluate(one.data().test);
  EXPECT_NEAR(single.loss, expected.loss, 1e-6);
  EXPECT_DOUBLE_EQ(single.accuracy, expected.accuracy);
  std::vector<Evaluation> got(4);
  const auto errors = on_ranks(4, [&](int r, comm::Group group) {
    std::ostringstream quiet;
    Trainer t(chain_config(runs, "four", 4, "graphpipe"), false, quiet, group);
    got[r] = t.evaluate(t.data().test);  // 40 rows: two chunks of 16 and one of 8
  });
  for (int r = 0; r < 4; ++r) ASSERT_EQ(errors[r], "") << "rank " << r;
  for (int r = 0; r < 4; ++r) {
    EXPECT_NEAR(got[r].loss, expected.loss, 1e-6) << "rank " << r;
    EXPECT_DOUBLE_EQ(got[r].accuracy, expected.accuracy) << "rank " << r;
  }
  std::filesystem::remove_all(runs);
}

}  // namespace
}  // namespace trident::runtime
