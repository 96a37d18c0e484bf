#include "trident/runtime/trainer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "trident/runtime/checkpoint.h"

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
  EXPECT_THROW(load_checkpoint(dir + "/missing.pt"), std::runtime_error);
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
    auto pa = full.module().named_parameters(), pb = resumed.module().named_parameters();
    for (const auto& p : pa) EXPECT_TRUE(torch::equal(p.value(), *pb.find(p.key()))) << opt << " " << p.key();
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
  EXPECT_TRUE(std::filesystem::exists(runs + "/learn/checkpoint.pt"));
  EXPECT_TRUE(std::filesystem::exists(runs + "/learn/config.yaml"));
  std::filesystem::remove_all(runs);
}

TEST(Trainer, ResumeWithoutCheckpointIsAClearError) {
  const auto runs = temp_dir("nockpt");
  std::ostringstream log;
  try {
    Trainer t(small_config(runs, "sgd"), true, log);
    FAIL();
  } catch (const TrainingError& e) {
    EXPECT_NE(std::string(e.what()).find("checkpoint.pt does not exist"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(runs);
}

}  // namespace
}  // namespace trident::runtime
