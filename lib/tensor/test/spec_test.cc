// A batch matches its per-sample spec only with the batch axis, the shape and the dtype all right.
#include "trident/tensor/spec.h"

#include <gtest/gtest.h>

namespace trident::tensor {
namespace {

TEST(TensorSpec, ABatchMatchesItsPerSampleSpecOnly) {
  const graph::TensorSpec image{{1, 28, 28}, graph::DType::kFloat32};
  EXPECT_TRUE(matches(torch::zeros({6, 1, 28, 28}), image));
  EXPECT_FALSE(matches(torch::zeros({1, 28, 28}), image));                        // no batch axis
  EXPECT_FALSE(matches(torch::zeros({6, 1, 28, 27}), image));                     // another shape
  EXPECT_FALSE(matches(torch::zeros({6, 1, 28, 28}, torch::kFloat64), image));   // another dtype
  EXPECT_FALSE(matches(torch::Tensor(), image));
  EXPECT_EQ(describe(torch::zeros({6, 1, 28, 28})), "[6,1,28,28] Float");
  EXPECT_EQ(describe(torch::Tensor()), "no tensor");
  EXPECT_EQ(to_torch(graph::DType::kInt64), torch::kInt64);
  EXPECT_EQ(to_torch(graph::DType::kBFloat16), torch::kBFloat16);
}

}  // namespace
}  // namespace trident::tensor
