// The planner and plans: a plan's JSON read back predicts as it did; a
// hand-written plan is predicted; the sync methods a plan may ask for.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "../../plan/test/hand_plans.h"
#include "test_graphs.h"
#include "trident/planner/planner.h"

namespace trident::planner {
namespace {

using testing::model;
using testing::planner;
using plan::testing::HandPlan;

TEST(Plan, JsonRoundTripAndResimulationAgree) {
  const auto& g = model("mmt", "tiny");
  auto p = planner(g, "cpu-local", 4, 32, "graphpipe");
  auto plan = p.plan();
  auto back = plan::Plan::from_json(nlohmann::json::parse(plan.to_json().dump()), "mem");
  plan::validate_plan(back, g);
  p.predict(back);
  EXPECT_NEAR(back.predicted.iteration_s, plan.predicted.iteration_s, 1e-12);
  EXPECT_EQ(back.stages.size(), plan.stages.size());
  EXPECT_EQ(back.edges.size(), plan.edges.size());
  // A plan read back, unvalidated (as `trident report` reads a run's), keeps
  // its edges: the stage graph draws them with their tensors and bytes.
  const auto read = plan::Plan::from_json(nlohmann::json::parse(plan.to_json().dump()), "mem");
  ASSERT_EQ(read.edges.size(), plan.edges.size());
  ASSERT_FALSE(read.edges.empty());
  EXPECT_EQ(read.edges[0].tensors.size(), plan.edges[0].tensors.size());
}

TEST_F(HandPlan, FanOutAndFanInPlanIsValid) {
  auto p = make({branch(0, true, true), branch(1, true, true), head()}, {{0}, {1, 2}, {3}});
  ASSERT_NO_THROW(plan::validate_plan(p, g));
  ASSERT_EQ(p.edges.size(), 2u);
  EXPECT_EQ(p.edges[0].to, 2);
  auto pl = planner(g, "cpu-local", 4, 8, "graphpipe");
  pl.predict(p);
  EXPECT_EQ(p.predicted.depth, 2);
  EXPECT_EQ(p.stages[0].in_flight, 2);
}


}  // namespace
}  // namespace trident::planner

namespace trident::planner {
namespace {

TEST(Plan, SfbNeedsBackwardsInTheOrderOfForwards) {
  const auto& g = model("mlp", "tiny");
  auto p = planner(g, "cpu-local", 2, 8, "dp").plan();
  ASSERT_EQ(p.stages.size(), 1u);
  ASSERT_EQ(p.stages[0].devices.size(), 2u);
  std::string linear_weight;
  for (const auto& op : g.ops())
    if (op.kind == "linear") linear_weight = op.params.at(0).name;
  for (auto& [name, method] : p.grad_sync) method = "allreduce";
  p.grad_sync[linear_weight] = "sfb";
  p.stages[0].actions = "F0 F1 B0 B1";
  EXPECT_NO_THROW(plan::check_sfb_order(p, g));
  p.stages[0].actions = "F0 F1 B1 B0";
  try {
    plan::check_sfb_order(p, g);
    FAIL() << "no error";
  } catch (const plan::PlanError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kBadInput);
    EXPECT_NE(std::string(e.what()).find("stage 0: sfb gradient sync needs the backwards in the order of the forwards"),
              std::string::npos)
        << e.what();
  }
  // A split backward (Note [Split backward]) runs autograd twice: refused for SFB.
  p.stages[0].actions = "F0 F1 B0 B1 W0 W1";
  try {
    plan::check_sfb_order(p, g);
    FAIL() << "no error";
  } catch (const plan::PlanError& e) {
    EXPECT_NE(std::string(e.what()).find("stage 0: sfb gradient sync does not take a split backward"), std::string::npos)
        << e.what();
  }
  // The same orders are fine with all-reduce.
  p.grad_sync[linear_weight] = "allreduce";
  EXPECT_NO_THROW(plan::check_sfb_order(p, g));
  p.stages[0].actions = "F0 F1 B1 B0";
  EXPECT_NO_THROW(plan::check_sfb_order(p, g));
}

// parallel.sync's overrides are applied by make() over the plan's own
// choice, predicted with it, and a name that is no parameter is refused.
TEST(Plan, MakeAppliesSyncOverridesAndNamesUnknownParameters) {
  const auto& g = model("mlp", "tiny");
  auto c = cost::load_cluster("cpu-local");
  PlanRequest r;
  r.model = g.name(), r.preset = "?", r.devices = 2, r.mini_batch = 64, r.partitioner = "dp", r.micro_batch = 64;
  const auto plain = Planner(g, c, cost::analytic_cost_model(c.device), r).make();
  const std::string name = plain.grad_sync.begin()->first;
  const std::string other = plain.grad_sync.begin()->second == "ps" ? "allreduce" : "ps";
  r.sync_overrides = {{name, other}};
  const auto made = Planner(g, c, cost::analytic_cost_model(c.device), r).make();
  EXPECT_EQ(made.grad_sync.at(name), other);
  EXPECT_FALSE(made.cluster.is_null());  // stamped
  r.sync_overrides = {{"no.such.weight", "ps"}};
  try {
    Planner(g, c, cost::analytic_cost_model(c.device), r).make();
    FAIL() << "an unknown parameter was accepted";
  } catch (const plan::PlanError& e) {
    EXPECT_NE(std::string(e.what()).find("parallel.sync names 'no.such.weight'"), std::string::npos) << e.what();
    EXPECT_EQ(e.kind(), ErrorKind::kBadInput);
  }
}

}  // namespace
}  // namespace trident::planner
