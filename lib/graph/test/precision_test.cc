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

// What the interpreter computes each op's output in, hence what crosses a
// stage boundary: a product's output and what follows it in bf16, a norm's
// in fp32, a join of the two in fp32, indices and inputs as declared.
TEST(PrecisionPolicy, ComputedDtypesFollowTheClasses) {
  OpGraph g("t");
  auto input = [&](const std::string& name, DType dtype) {
    Op op;
    op.name = name, op.kind = "input", op.output = {{4}, dtype};
    op.attrs["field"] = name;
    return g.add(op);
  };
  auto add = [&](const std::string& name, const std::string& kind, std::vector<OpId> in, DType dtype = DType::kFloat32) {
    Op op;
    op.name = name, op.kind = kind, op.output = {{4}, dtype};
    for (auto p : in) op.inputs.push_back({p, g.op(p).output});
    return g.add(op);
  };
  const auto x = input("x", DType::kFloat32), label = input("label", DType::kInt64);
  const auto fc = add("fc", "linear", {x}), act = add("act", "relu", {fc}), norm = add("norm", "layer_norm", {act});
  const auto join = add("join", "add", {act, norm}), same = add("same", "add", {act, act});
  add("loss", "cross_entropy", {join, label});
  const auto bf16 = computed_dtypes(g, Precision::kBf16);
  EXPECT_EQ(bf16[x], DType::kFloat32);
  EXPECT_EQ(bf16[label], DType::kInt64);
  EXPECT_EQ(bf16[fc], DType::kBFloat16);
  EXPECT_EQ(bf16[act], DType::kBFloat16);
  EXPECT_EQ(bf16[norm], DType::kFloat32);
  EXPECT_EQ(bf16[join], DType::kFloat32);
  EXPECT_EQ(bf16[same], DType::kBFloat16);
  for (auto d : computed_dtypes(g, Precision::kFp32)) EXPECT_NE(d, DType::kBFloat16);
}

}  // namespace
}  // namespace trident::graph
