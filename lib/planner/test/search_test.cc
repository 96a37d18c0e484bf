// The search's mixed-size plans against the schedule they run.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "test_graphs.h"
#include "trident/planner/planner.h"

namespace trident::planner {
namespace {

// See Note [Per-stage micro-batch sizes]: the search prices a stage at
// ceil(H / u) of its own micro-batches in flight, H its longest path to a
// sink in units of the smallest micro-batch (its own u included). The
// graph-1F1B schedule that the assembled plan runs keeps exactly that many
// (over the plan's real stage edges; the search's SP-ized ones can only add
// to H), for the mixed-size plans the DP picks on random graphs.
TEST(Planner, MixedSizePlansKeepTheInFlightCountsTheSearchPriced) {
  std::mt19937 rng(77);
  int checked = 0;
  for (int trial = 0; trial < 120; ++trial) {
    auto g = trial % 2 ? testing::random_model(rng, 10) : testing::random_sp_model(rng, 10);
    const int devices = 3 + static_cast<int>(rng() % 4), micro = 2 << (rng() % 3);
    auto c = cost::load_cluster("summit-v100");
    PlanRequest r;
    r.devices = devices, r.mini_batch = 64, r.partitioner = "graphpipe";
    r.device_memory_bytes = static_cast<double>(g.param_bytes()) * 4 * (0.3 + 0.2 * (rng() % 6)) + (1 << 20);
    Planner p(g, c, cost::analytic_cost_model(c.device), r);
    auto found = p.search(graph::sp_decompose(g, true), micro);
    if (!found) continue;
    plan::Plan plan;
    try {
      plan = p.assemble(found->stages, micro, "graphpipe");
    } catch (const plan::PlanError&) {
      continue;  // a stage the schedule holds more of than fits: assembly's check, not this one
    }
    if (plan.one_micro_batch_size()) continue;
    int smallest = plan.mini_batch;
    for (const auto& st : plan.stages) smallest = std::min(smallest, st.micro_batch);
    const int n = static_cast<int>(plan.stages.size()), m = plan.mini_batch / smallest;
    std::vector<int> height(n, 0);  // stages are in topological order
    for (int s = n - 1; s >= 0; --s) {
      const int own = plan.stages[s].micro_batch / smallest;
      height[s] = own;
      for (const auto& e : plan.edges)
        if (e.from == s) height[s] = std::max(height[s], height[e.to] + own);
    }
    for (const auto& st : plan.stages) {
      const int u = st.micro_batch / smallest;
      EXPECT_EQ(st.in_flight, std::min((height[st.id] + u - 1) / u, m / u))
          << "trial " << trial << " stage " << st.id << ": " << plan.to_json().dump();
    }
    ++checked;
  }
  EXPECT_GT(checked, 10);
}

}  // namespace
}  // namespace trident::planner
