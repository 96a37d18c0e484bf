// Optimizers against torch.optim, and the learning-rate schedule.
#include "trident/optim/optimizer.h"

#include <gtest/gtest.h>

namespace trident::runtime {
namespace {

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

}  // namespace
}  // namespace trident::runtime
