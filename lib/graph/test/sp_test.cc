#include "trident/graph/sp.h"

#include <gtest/gtest.h>

namespace trident::graph {
namespace {

TensorSpec vec(std::int64_t n) { return {{n}, DType::kFloat32}; }

// Builds graphs from edge lists: op i has inputs `preds[i]`; op 0.. are
// "relu"-like vectors of size 4 (shapes are irrelevant to SP structure).
OpGraph make(const std::vector<std::vector<OpId>>& preds) {
  OpGraph g("toy");
  for (std::size_t i = 0; i < preds.size(); ++i) {
    Op op{"op" + std::to_string(i), preds[i].empty() ? "input" : "add", {}, {}, vec(4)};
    for (OpId p : preds[i]) op.inputs.push_back({p, vec(4)});
    g.add(op);
  }
  return g;
}

TEST(SpDecompose, ChainIsOneSeriesOfLeaves) {
  auto d = sp_decompose(make({{}, {0}, {1}, {2}}));
  EXPECT_EQ(to_string(d.root), "S(0,1,2,3)");
  EXPECT_TRUE(d.is_series_parallel());
}

TEST(SpDecompose, DiamondIsSeriesAroundParallel) {
  // 0 -> {1, 2} -> 3
  auto d = sp_decompose(make({{}, {0}, {0}, {1, 2}}));
  EXPECT_EQ(to_string(d.root), "S(0,P(1,2),3)");
  EXPECT_TRUE(d.is_series_parallel());
}

TEST(SpDecompose, NestedBranchesAndSeparateInputs) {
  // Two inputs (0, 1); branch A: 0 -> 2 -> {3, 4} -> 5; branch B: 1 -> 6;
  // both join at 7 -> 8.
  auto d = sp_decompose(make({{}, {}, {0}, {2}, {2}, {3, 4}, {1}, {5, 6}, {7}}));
  EXPECT_EQ(to_string(d.root), "S(P(S(0,2,P(3,4),5),S(1,6)),7,8)");
  EXPECT_TRUE(d.is_series_parallel());
  EXPECT_EQ(d.root.ops().size(), 9u);
}

TEST(SpDecompose, SkipConnectionStaysInSeries) {
  // Residual block: 0 -> 1 -> 2(add of 0 and 1) -> 3
  auto d = sp_decompose(make({{}, {0}, {0, 1}, {2}}));
  EXPECT_EQ(to_string(d.root), "S(0,1,2,3)");
  EXPECT_TRUE(d.is_series_parallel());
}

TEST(SpDecompose, NonSpGraphIsSpizedWithTheFewestAddedEdges) {
  // The "N": 0 -> 2, 0 -> 3, 1 -> 3, then {2, 3} -> 4.
  auto d = sp_decompose(make({{}, {}, {0}, {0, 1}, {2, 3}}));
  EXPECT_FALSE(d.is_series_parallel());
  // Cutting after {0, 1} needs one edge (1 -> 2); every op is still present.
  EXPECT_EQ(d.added_edges, (std::vector<std::pair<OpId, OpId>>{{1, 2}}));
  EXPECT_EQ(to_string(d.root), "S(P(0,1),P(2,3),4)");
}

TEST(SpDecompose, LinearizeFollowsTopologicalOrder) {
  auto g = make({{}, {0}, {0}, {1, 2}});
  auto d = linearize(g);
  EXPECT_EQ(to_string(d.root), "S(0,1,2,3)");
  EXPECT_EQ(d.added_edges, (std::vector<std::pair<OpId, OpId>>{{1, 2}}));
}

}  // namespace
}  // namespace trident::graph
