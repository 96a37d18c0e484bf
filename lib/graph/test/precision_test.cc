// See Note [Precision policy]: the table, by op kind and by ATen call.
#include "trident/graph/precision.h"

#include <gtest/gtest.h>

namespace trident::graph {
namespace {

TEST(PrecisionPolicy, ProductsLowNormsSoftmaxLossesAndReductionsFp32RestFollow) {
  for (const char* k : {"linear", "conv2d", "conv1d", "matmul", "self_attention", "multihead_attention"})
    EXPECT_EQ(op_precision(k), OpPrecision::kLow) << k;
  for (const char* k : {"layer_norm", "batch_norm", "softmax", "cross_entropy", "mse", "mean", "sum", "mean_seq",
                        "global_avg_pool", "avg_pool2d", "adaptive_avg_pool2d"})
    EXPECT_EQ(op_precision(k), OpPrecision::kFp32) << k;
  for (const char* k : {"relu", "gelu", "add", "concat", "reshape", "max_pool2d", "embedding", "dropout", "aten"})
    EXPECT_EQ(op_precision(k), OpPrecision::kFollow) << k;
  // What captured programs call: aten::convolution too, which 1.13's autocast leaves in fp32.
  for (const char* k : {"aten::convolution", "aten::_convolution", "aten::linear", "aten::addmm", "aten::bmm"})
    EXPECT_EQ(aten_call_precision(k), OpPrecision::kLow) << k;
  for (const char* k : {"aten::native_layer_norm", "aten::_softmax", "aten::batch_norm", "aten::mean"})
    EXPECT_EQ(aten_call_precision(k), OpPrecision::kFp32) << k;
  for (const char* k : {"aten::relu", "aten::add", "aten::cat", "aten::max_pool2d"})
    EXPECT_EQ(aten_call_precision(k), OpPrecision::kFollow) << k;
  EXPECT_EQ(precision_from_string("bf16"), Precision::kBf16);
  EXPECT_EQ(precision_from_string("fp16"), std::nullopt);
  EXPECT_EQ(to_string(Precision::kBf16), "bf16");
}

}  // namespace
}  // namespace trident::graph
