#include <gtest/gtest.h>

#include "trident/plan/planner.h"
#include "trident/zoo/zoo.h"

namespace trident::plan {
namespace {

Plan make(const std::string& model, const std::string& preset, const std::string& cluster, int devices, int mini,
          const std::string& partitioner, std::optional<int> micro = std::nullopt) {
  static std::map<std::string, graph::OpGraph> graphs;
  auto& g = graphs[model + preset];
  if (g.size() == 0) g = zoo::build_graph({model, preset});
  auto c = cost::load_cluster(cluster);
  PlanRequest r;
  r.model = model, r.preset = preset, r.devices = devices, r.mini_batch = mini, r.partitioner = partitioner;
  r.micro_batch = micro;
  return Planner(g, c, cost::analytic_cost_model(c.device), r).plan();
}

TEST(Planner, GraphPipePlanCoversTheModelWithConcurrentBranches) {
  auto g = zoo::build_graph({"mmt", "paper"});
  auto p = make("mmt", "paper", "summit-v100", 8, 64, "graphpipe");
  EXPECT_NO_THROW(validate_plan(p, g));
  EXPECT_GT(p.stages.size(), 1u);
  EXPECT_LT(p.predicted.depth, static_cast<int>(p.stages.size()));  // some stages run side by side
  int used = 0;
  for (const auto& s : p.stages) used += static_cast<int>(s.devices.size());
  EXPECT_LE(used, 8);
  EXPECT_GT(p.predicted.samples_per_s, 0);
}

}  // namespace
}  // namespace trident::plan
