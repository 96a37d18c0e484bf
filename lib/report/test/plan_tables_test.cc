// The plan tables people read: the stage table's totals and recompute note,
// and two plans side by side (elastic re-planning).
#include "trident/report/plan_tables.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "trident/zoo/zoo.h"

namespace trident::report {
namespace {

planner::Planner planner(const graph::OpGraph& g, int devices, const std::string& partitioner) {
  auto c = cost::load_cluster("cpu-local");
  planner::PlanRequest r;
  r.model = g.name(), r.preset = "tiny", r.devices = devices, r.mini_batch = 32, r.partitioner = partitioner;
  return planner::Planner(g, c, cost::analytic_cost_model(c.device), r);
}

// A plan read back, unvalidated (as `trident report` reads a run's): the
// stage graph draws its edges with their tensors and bytes.
TEST(PlanTables, TheStageGraphDrawsTheEdgesOfAPlanReadBack) {
  const auto g = zoo::build_graph({"mmt", "tiny"});
  const auto plan = planner(g, 4, "graphpipe").plan();
  const auto read = plan::Plan::from_json(nlohmann::json::parse(plan.to_json().dump()), "mem");
  ASSERT_FALSE(read.edges.empty());
  const auto dot = to_dot(read);
  EXPECT_NE(dot.find("s" + std::to_string(plan.edges[0].from) + " -> s" + std::to_string(plan.edges[0].to)),
            std::string::npos) << dot;
  EXPECT_NE(dot.find(plan.edges[0].tensors[0].op + " ["), std::string::npos) << dot;
  EXPECT_NE(dot.find("per micro-batch"), std::string::npos) << dot;
}

TEST(PlanTables, TheStageTableGivesTotalsAndSaysWhatRecomputingStagesKeep) {
  const auto g = zoo::build_graph({"mmt", "tiny"});
  const auto p = planner(g, 4, "graphpipe");
  auto made = p.plan();
  EXPECT_NE(stage_table(p, made).find("samples/s"), std::string::npos);
  EXPECT_EQ(stage_table(p, made).find("recompute: the stage keeps only its inputs"), std::string::npos);
  made.stages[0].recompute = true;
  const auto table = stage_table(p, made);
  EXPECT_NE(table.find("recompute: the stage keeps only its inputs"), std::string::npos) << table;
}

// Elastic re-planning prints the checkpoint's plan beside the new one: each
// row holds one stage of each, with its devices and micro-batch.
TEST(Plan, SideBySideShowsBothPlansRowByRow) {
  const auto g = zoo::build_graph({"mmt", "tiny"});
  const auto before = planner(g, 4, "pipedream").plan();
  const auto after = planner(g, 2, "pipedream").plan();
  const auto text = side_by_side(before, "checkpoint", after, "now");
  std::vector<std::string> lines;
  for (std::istringstream in(text); lines.emplace_back(), std::getline(in, lines.back());) {
  }
  lines.pop_back();
  ASSERT_EQ(lines.size(), 3 + std::max(before.stages.size(), after.stages.size()));
  const auto bar = lines[0].find(" |");
  ASSERT_NE(bar, std::string::npos);
  EXPECT_EQ(lines[0].substr(bar + 3), "now");
  EXPECT_NE(lines[1].find(std::to_string(before.devices) + " devices"), std::string::npos) << text;
  EXPECT_NE(lines[1].find(std::to_string(after.devices) + " devices"), std::string::npos) << text;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i].find(" |"), bar) << "line " << i << " of\n" << text;  // the columns line up
    if (i < 3) continue;
    const auto left = lines[i].substr(0, bar), right = lines[i].substr(std::min(bar + 3, lines[i].size()));
    const std::size_t s = i - 3;
    if (s < before.stages.size()) {
      EXPECT_EQ(left.rfind(std::to_string(s) + " ", 0), 0u) << left;
      EXPECT_NE(left.find(before.stages[s].ops.front()), std::string::npos) << left;
    }
    if (s < after.stages.size()) {
      EXPECT_EQ(right.rfind(std::to_string(s) + " ", 0), 0u) << right;
      EXPECT_NE(right.find(std::to_string(after.stages[s].micro_batch)), std::string::npos) << right;
    } else {
      EXPECT_TRUE(right.empty()) << right;
    }
  }
}

}  // namespace
}  // namespace trident::report
