// Uneven replica shares (see Note [Replica shares] in plan/plan.h)
// train to the weights of one process: data parallelism over 2 ranks at
// 3:1 and 3 ranks at 2:1:1 under each sync method, and a pipeline whose
// replicated stages split 3:1 and 1:3, so that every edge is cut into
// pieces of unequal rows. Each rank must also have run exactly its share.
#include "pipeline_harness.h"

namespace trident::executor {
namespace {

using namespace test;  // NOLINT: the harness

// Every rank of stage `s` read row ranges of exactly its share's length.
void expect_rows(const Result& res, const plan::Plan& p) {
  for (const auto& st : p.stages)
    for (std::size_t j = 0; j < st.devices.size(); ++j) {
      const int r = st.devices[j];
      if (res.rows[r].empty()) continue;  // a stage that reads no dataset field
      for (const auto& [b, e] : res.rows[r])
        EXPECT_EQ(e - b, st.shares.at(j)) << "rank " << r << " rows [" << b << ", " << e << ")";
    }
}

plan::Plan dp_plan(const graph::OpGraph& g, int micro, const std::vector<int>& shares, const std::string& method) {
  const int n = static_cast<int>(shares.size());
  auto p = hand_plan(g, request("dp", "1f1b", n, 2 * micro, micro, 0), {[](const std::string&) { return true; }}, {n});
  p.stages[0].shares = shares;
  for (const auto& op : g.ops())
    for (const auto& param : op.params)
      p.grad_sync[param.name] = method == "sfb" && !cost::sfb_shape(op, param) ? "allreduce" : method;
  plan::validate_plan(p, g);
  return p;
}

TEST(Shares, DataParallelWithUnequalSharesEqualsOneProcess) {
  const auto g = zoo::build_graph({"mlp", "tiny"});
  for (const auto& method : {"allreduce", "ps", "sfb"})
    for (const auto& [micro, shares] : {std::pair{16, std::vector<int>{12, 4}}, {12, std::vector<int>{6, 3, 3}}}) {
      SCOPED_TRACE(std::string(method) + " on " + std::to_string(shares.size()) + " ranks");
      const auto p = dp_plan(g, micro, shares, method);
      const auto res = train(g, p, 3);
      expect_equal(res, p);
      expect_rows(res, p);
    }
}

// Inception in two stages of 2 replicas each: the first runs 6:2 of every
// micro-batch of 8, the second 2:6, so rows 2..6 of each micro-batch cross
// between replicas of unequal shares.
TEST(Shares, PipelineWithUnequalReplicaSharesEqualsOneProcess) {
  const auto g = zoo::build_graph({"inception", "tiny"});
  auto p = hand_plan(g, request("graphpipe", "1f1b", 4, 16, 8, 0),
                     {[](const std::string& n) { return n == "image" || starts(n, "stem") || n == "pool1" || starts(n, "block1"); },
                      [](const std::string&) { return true; }},
                     {2, 2});
  p.stages[0].shares = {6, 2};
  p.stages[1].shares = {2, 6};
  plan::validate_plan(p, g);
  const auto res = train(g, p, 3);
  expect_equal(res, p);
  expect_rows(res, p);
}

// See Note [Slowed processes]: the variable names ranks and factors; a bad
// value is bad input naming the variable.
TEST(Shares, SlowdownNamesRanksAndFactors) {
  ::setenv("TRIDENT_SLOWDOWN", "1:2,3:1.5", 1);
  EXPECT_EQ(executor::slowdown_for_rank(0), 1.0);
  EXPECT_EQ(executor::slowdown_for_rank(1), 2.0);
  EXPECT_EQ(executor::slowdown_for_rank(3), 1.5);
  for (const char* bad : {"1", "x:2", "1:0.5", "1:fast"}) {
    ::setenv("TRIDENT_SLOWDOWN", bad, 1);
    try {
      executor::slowdown_for_rank(1);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const executor::PipelineError& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kBadInput);
      EXPECT_NE(std::string(e.what()).find("TRIDENT_SLOWDOWN = '" + std::string(bad) + "'"), std::string::npos) << e.what();
    }
  }
  ::unsetenv("TRIDENT_SLOWDOWN");
  EXPECT_EQ(executor::slowdown_for_rank(1), 1.0);
}

}  // namespace
}  // namespace trident::executor
