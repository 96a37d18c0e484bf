// What `trident plan`, `simulate` and `report` share: the cost model a plan
// is priced with, and a planner for a plan that was written down.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "trident/cost/cluster.h"
#include "trident/cost/cost_model.h"
#include "trident/graph/op_graph.h"
#include "trident/graph/precision.h"
#include "trident/plan/plan.h"
#include "trident/planner/planner.h"

namespace trident::cli {

// The plan's own cost model (`described`: a profile it carries), else the
// profile at `profile_path`, else what the cluster implies (its calibrated
// profiles, or its device's analytic model).
cost::CostModel plan_cost_model(const nlohmann::json& described, const std::string& profile_path,
                                const cost::ClusterSpec& cluster, const graph::OpGraph& g, const std::string& preset,
                                int devices, graph::Precision precision);

// A planner for a written plan (checked against `g`, its model's graph) on
// the cluster and cost model the plan records, to simulate it again.
// `origin` names the plan in errors.
planner::Planner planner_for(plan::Plan& plan, const graph::OpGraph& g, const std::string& origin);

}  // namespace trident::cli
