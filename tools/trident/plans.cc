// See plans.h.
#include "plans.h"

#include <algorithm>

#include "trident/cost/cost_model.h"
#include "trident/schedule/schedule.h"

namespace trident::cli {

cost::CostModel plan_cost_model(const nlohmann::json& described, const std::string& profile_path,
                               const cost::ClusterSpec& cluster, const graph::OpGraph& g, const std::string& preset,
                               int devices, graph::Precision precision) {
  std::string path = profile_path;
  const bool profiled = described.is_object() && described.value("kind", "analytic") == "profiled";
  if (path.empty() && profiled && described.contains("data")) {
    const auto origin = described.value("profile", std::string("the plan's profile"));
    return cost::profiled_cost_model(cost::Profile::from_json(described["data"], origin), g, origin);
  }
  if (path.empty() && profiled) path = described.value("profile", "");
  if (path.empty()) return cost::cost_model_for(cluster, g, preset, cluster.threads_per_process(devices), nullptr, precision);
  return cost::profiled_cost_model(cost::load_profile(path), g, path);
}

planner::Planner planner_for(plan::Plan& p, const graph::OpGraph& g, const std::string& origin) {
  plan::validate_plan(p, g);
  if (p.cluster.is_null())
    throw plan::PlanError("plan " + origin + ": cluster is missing; add \"cluster\": {...} (see `trident plan --out`)");
  const auto cluster = cost::parse_cluster(p.cluster.dump(), origin + " (cluster)");
  planner::PlanRequest r;
  r.model = p.model, r.preset = p.preset, r.model_file = p.model_file, r.model_graph = p.model_graph;
  r.graph_chunks = p.graph_chunks;
  r.fanouts = p.fanouts, r.sample_replace = p.sample_replace, r.hidden = p.hidden;
  r.node_embedding = p.node_embedding;
  r.devices = p.devices, r.mini_batch = p.mini_batch;
  r.optimizer_states = p.optimizer_states;
  r.precision = graph::precision_from_string(p.precision).value_or(graph::Precision::kFp32);
  r.ps_push_scale = p.comm_dtype == "bf16" ? 0.5 : 1;  // See Note [Push dtype]
  const auto names = schedule::all_schedule_names();
  r.schedule = std::find(names.begin(), names.end(), p.schedule) != names.end() ? p.schedule : "1f1b";
  return planner::Planner(g, cluster, plan_cost_model(p.cost_model, "", cluster, g, p.preset, p.devices, r.precision), r);
}

}  // namespace trident::cli
