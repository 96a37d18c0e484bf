#include "trident/nn/small_matmul.h"

#include <gtest/gtest.h>

namespace trident::nn {
namespace {

struct Case {
  std::vector<std::int64_t> a, b;
};

class SmallMatmul : public ::testing::TestWithParam<Case> {};

// Values and both gradients equal torch::matmul's, for inputs that are views
// (transposed, as attention passes k) as well as contiguous ones.
TEST_P(SmallMatmul, EqualsTorch) {
  torch::manual_seed(3);
  const auto& c = GetParam();
  auto a = torch::randn(c.a, torch::requires_grad());
  auto b_stored = torch::randn(c.b, torch::requires_grad());
  auto b = b_stored.transpose(-2, -1);  // [..., k, n] as a strided view
  ASSERT_TRUE(uses_small_path(a, b));
  auto mine = batched_matmul(a, b);
  auto ref = torch::matmul(a, b);
  ASSERT_EQ(mine.sizes(), ref.sizes());
  EXPECT_TRUE(torch::allclose(mine, ref, 1e-5, 1e-5));
  auto weights = torch::randn(ref.sizes());
  auto got = torch::autograd::grad({(mine * weights).sum()}, {a, b_stored});
  auto want = torch::autograd::grad({(ref * weights).sum()}, {a, b_stored});
  EXPECT_TRUE(torch::allclose(got[0], want[0], 1e-5, 1e-5));
  EXPECT_TRUE(torch::allclose(got[1], want[1], 1e-5, 1e-5));
}

INSTANTIATE_TEST_SUITE_P(Shapes, SmallMatmul,
                         ::testing::Values(Case{{6, 4, 8, 8}, {6, 4, 8, 8}},     // attention, width 8
                                           Case{{5, 16, 8}, {5, 32, 8}},         // width 32
                                           Case{{3, 2, 7, 9}, {3, 2, 11, 9}},    // odd sizes
                                           Case{{2, 12, 16}, {2, 16, 16}},      // m·k·n 3072
                                           Case{{4, 4, 28, 16}, {4, 4, 28, 16}}));  // the tiny transformer

TEST(SmallMatmul, LeavesOtherProductsToTorch) {
  EXPECT_FALSE(uses_small_path(torch::randn({4, 3, 3}), torch::randn({4, 3, 3})));      // under 400
  EXPECT_FALSE(uses_small_path(torch::randn({2, 64, 64}), torch::randn({2, 64, 64})));  // over the limit
  EXPECT_FALSE(uses_small_path(torch::randn({8, 8}), torch::randn({8, 8})));            // not batched
  EXPECT_FALSE(uses_small_path(torch::randn({2, 8, 8}), torch::randn({1, 8, 8})));      // broadcast
  EXPECT_FALSE(uses_small_path(torch::randn({2, 8, 8}, torch::kFloat64), torch::randn({2, 8, 8}, torch::kFloat64)));
  auto a = torch::randn({2, 8, 8}), b = torch::randn({1, 8, 8});
  // Bitwise: a broadcast product leaves the small path, so both sides are the same torch::matmul call.
  EXPECT_TRUE(torch::equal(batched_matmul(a, b), torch::matmul(a, b)));
}

}  // namespace
}  // namespace trident::nn
