// Optimizers against torch.optim, and the learning-rate schedule.
#include "trident/optim/optimizer.h"
#include "trident/optim/sparse_adagrad.h"

#include <gtest/gtest.h>

namespace trident::optim {
namespace {

TEST(Optimizer, SgdAdamAndAdamWMatchTorchOptimFor20Steps) {
  for (const std::string name : {"sgd", "adam", "adamw"}) {
    config::OptimizerConfig c;
    c.name = name;
    c.lr = name == "sgd" ? 0.1 : 0.01;
    c.weight_decay = name == "adamw" ? 0.1 : 0.01;  // large enough that coupled decay would differ
    torch::manual_seed(0);
    auto mine = torch::randn({5, 3});
    auto theirs = mine.clone().requires_grad_(true);
    auto opt = Optimizer::make(c);
    std::unique_ptr<torch::optim::Optimizer> ref;
    if (name == "sgd") {
      ref = std::make_unique<torch::optim::SGD>(std::vector<torch::Tensor>{theirs},
                                                torch::optim::SGDOptions(c.lr).momentum(c.momentum).weight_decay(c.weight_decay));
    } else if (name == "adamw") {
      ref = std::make_unique<torch::optim::AdamW>(std::vector<torch::Tensor>{theirs},
                                                  torch::optim::AdamWOptions(c.lr).weight_decay(c.weight_decay));
    } else {
      ref = std::make_unique<torch::optim::Adam>(std::vector<torch::Tensor>{theirs},
                                                 torch::optim::AdamOptions(c.lr).weight_decay(c.weight_decay));
    }
    for (int step = 0; step < 20; ++step) {
      auto grad = torch::randn({5, 3});
      opt->step("w", mine, grad, c.lr);
      theirs.mutable_grad() = grad.clone();
      ref->step();
    }
    EXPECT_TRUE(torch::allclose(mine, theirs.detach(), 1e-6, 1e-7)) << name;
  }
}

TEST(Optimizer, CosineScheduleWithWarmup) {
  config::OptimizerConfig c;
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

TEST(Optimizer, LinearAndStepSchedules) {
  config::OptimizerConfig c;
  c.lr = 1.0;
  c.warmup_steps = 2;
  c.min_lr = 0.1;
  c.schedule = "linear";  // from lr after the warm-up to min_lr at the last step
  EXPECT_DOUBLE_EQ(learning_rate(c, 1, 12), 1.0);
  EXPECT_DOUBLE_EQ(learning_rate(c, 2, 12), 1.0);
  EXPECT_NEAR(learning_rate(c, 7, 12), 0.5, 1e-12);
  EXPECT_NEAR(learning_rate(c, 11, 12), 0.1, 1e-12);
  c.schedule = "step";  // times gamma every step_size steps after the warm-up
  c.step_size = 3;
  c.gamma = 0.5;
  EXPECT_DOUBLE_EQ(learning_rate(c, 0, 12), 0.5);  // warm-up
  EXPECT_DOUBLE_EQ(learning_rate(c, 4, 12), 1.0);
  EXPECT_DOUBLE_EQ(learning_rate(c, 5, 12), 0.5);
  EXPECT_DOUBLE_EQ(learning_rate(c, 11, 12), 0.125);
}

}  // namespace
}  // namespace trident::optim

namespace trident::optim {
namespace {

// Note [Sparse Adagrad]: touched rows follow Adagrad, the others stay.
TEST(SparseAdagrad, UpdatesOnlyTheTouchedRowsAsAdagrad) {
  auto table = torch::arange(12, torch::kFloat32).reshape({4, 3});
  const auto before = table.clone();
  SparseAdagrad opt(table);
  const auto rows = torch::tensor({2, 0}, torch::kInt64);
  const auto g = torch::tensor({{1.0f, -2.0f, 0.5f}, {0.25f, 0.0f, 4.0f}});
  for (int t = 0; t < 2; ++t) opt.step(rows, g, 0.1);
  // Torch's Adagrad on the touched rows alone (lr 0.1, eps 1e-10, no decay).
  auto w = before.index_select(0, rows).clone().requires_grad_();
  torch::optim::Adagrad ref({w}, torch::optim::AdagradOptions(0.1).eps(1e-10));
  for (int t = 0; t < 2; ++t) {
    ref.zero_grad();
    w.mutable_grad() = g.clone();
    ref.step();
  }
  EXPECT_TRUE(torch::allclose(table.index_select(0, rows), w.detach(), 1e-6, 1e-7));
  EXPECT_TRUE(torch::equal(table[1], before[1]));  // Bitwise: untouched rows are not written
  EXPECT_TRUE(torch::equal(table[3], before[3]));  // Bitwise: as above
  EXPECT_TRUE(torch::allclose(opt.state()[2], 2 * g[0] * g[0]));
  EXPECT_THROW(opt.load_state(torch::zeros({3, 3})), std::invalid_argument);
}

}  // namespace
}  // namespace trident::optim
