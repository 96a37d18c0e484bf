#include "trident/nn/op_profile.h"

#include <ATen/record_function.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

namespace trident::nn {
namespace {

torch::Tensor square(int n) { return torch::rand({n, n}); }

TEST(OpProfile, CountsEveryCallOfAnOp) {
  const auto a = square(64), b = square(64);
  OpProfile profile;
  for (int i = 0; i < 7; ++i) torch::mm(a, b);
  profile.stop();
  const auto totals = profile.totals();
  ASSERT_TRUE(totals.count("aten::mm"));
  EXPECT_EQ(totals.at("aten::mm").calls, 7);
  EXPECT_GT(totals.at("aten::mm").self_s, 0);
  double sum = 0;
  for (const auto& [name, t] : totals) sum += t.self_s;
  EXPECT_LE(sum, profile.wall_s());
}

// An enclosing scope's self time leaves out the ops it called (see Note [Op self time]).
TEST(OpProfile, SelfTimeLeavesOutTheOpsCalled) {
  const auto a = square(256), b = square(256);
  OpProfile profile;
  {
    RECORD_USER_SCOPE("outer");
    for (int i = 0; i < 20; ++i) torch::mm(a, b);
  }
  profile.stop();
  const auto totals = profile.totals();
  ASSERT_TRUE(totals.count("outer"));
  EXPECT_EQ(totals.at("outer").calls, 1);
  EXPECT_LT(totals.at("outer").self_s, 0.1 * totals.at("aten::mm").self_s);
}

TEST(OpProfile, CountsAutogradNodes) {
  auto w = square(16).requires_grad_();
  OpProfile profile;
  torch::mm(w, w).sum().backward();
  profile.stop();
  const auto totals = profile.totals();
  EXPECT_TRUE(totals.count("MmBackward0"));
}

TEST(OpProfile, StopsCountingWhenStopped) {
  const auto a = square(8);
  OpProfile profile;
  torch::mm(a, a);
  profile.stop();
  const double wall = profile.wall_s();
  torch::mm(a, a);
  EXPECT_EQ(profile.totals().at("aten::mm").calls, 1);
  EXPECT_EQ(profile.wall_s(), wall);
}

TEST(OpProfile, OneAtATime) {
  OpProfile first;
  EXPECT_THROW(OpProfile second, std::logic_error);
  first.stop();
  OpProfile third;  // the first stopped: a new one may count
  torch::mm(square(4), square(4));
  EXPECT_EQ(third.totals().at("aten::mm").calls, 1);
}

}  // namespace
}  // namespace trident::nn
