#include "trident/measure/profiler.h"

#include <gtest/gtest.h>

namespace trident::measure {
namespace {

TEST(Profiler, MeasuresEveryOpAndFeedsTheProfiledCostModel) {
  const zoo::ModelSpec spec{"mlp", "tiny"};
  auto p = profile_model(spec, {{1, 16}, 2, 1});
  const auto g = zoo::build_graph(spec);
  for (const auto& op : g.ops()) {
    if (op.is_input()) continue;
    ASSERT_TRUE(p.ops.count(op.name)) << op.name;
    EXPECT_EQ(p.ops.at(op.name).forward_s.size(), 2u);
    EXPECT_GT(p.ops.at(op.name).forward_s[0], 0) << op.name;
  }
  // A Linear layer does more work on 16 rows than on 1.
  EXPECT_GT(p.ops.at("fc0").forward_s[1] + p.ops.at("fc0").backward_s[1], p.ops.at("fc0").forward_s[0]);
  // Its backward's weight part (a split backward's W) is measured, within its backward;
  // an op without parameters has none.
  ASSERT_EQ(p.ops.at("fc0").weight_s.size(), 2u);
  for (int i : {0, 1}) {
    EXPECT_GT(p.ops.at("fc0").weight_s[i], 0);
    EXPECT_LE(p.ops.at("fc0").weight_s[i], p.ops.at("fc0").backward_s[i]);
  }
  EXPECT_TRUE(p.ops.at("fc0_relu").weight_s.empty());
  auto back = cost::Profile::from_json(p.to_json(), "mem");
  auto model = cost::profiled_cost_model(back, g, "mem");
  EXPECT_GT(model.forward_s(g.op(g.id_of("fc0")), 8), 0);
  EXPECT_THROW(profile_model(spec, {{4, 2}, 1, 1}), InputError);
  EXPECT_THROW(profile_model(spec, {{1}, 0, 1}), InputError);
}

// Every measurement keeps the median of its repeats: an outlier on a noisy
// machine moves it by one rank, not by its size.
TEST(Profiler, TheMedianIsTheMiddleAndTheUpperMiddleOfAnEvenCount) {
  EXPECT_EQ(median({}), 0);
  EXPECT_EQ(median({3}), 3);
  EXPECT_EQ(median({5, 1, 100}), 5);
  EXPECT_EQ(median({4, 1, 3, 2}), 3);
}

}  // namespace
}  // namespace trident::measure
