// The plan of a run: plan_for and replan_overrides (trainer.h).
#include <algorithm>

#include "trident/cost/cluster.h"
#include "trident/cost/cost_model.h"
#include "trident/config/plan_request.h"
#include "trident/planner/planner.h"
#include "trident/report/plan_tables.h"
#include "trident/base/files.h"
#include "trident/runtime/trainer.h"

namespace trident::runtime {

bool plan_from_file(const config::ParallelConfig& par) { return config::run_kind(par) == config::PartitionerKind::kPlanFile; }

std::vector<std::string> replan_overrides(const config::TrainConfig& config, int devices) {
  const auto& par = config.parallel;
  std::vector<std::string> sets{"parallel.devices=" + std::to_string(devices)};
  if (!plan_from_file(par)) return sets;
  std::string made_by;
  try {
    made_by = plan::load_plan(par.partitioner).partitioner;
  } catch (const std::exception& e) {
    throw config::ConfigError("parallel.partitioner = " + par.partitioner + ": " + e.what());
  }
  const bool named = config::partitioner_kind(made_by).value_or(config::PartitionerKind::kPlanFile) != config::PartitionerKind::kPlanFile;
  sets.push_back("parallel.partitioner=" + (named ? made_by : std::string("graphpipe")));
  return sets;
}

// The config's request (See Note [Config to request] in config/plan_request.h)
// made into a plan by Planner::make, for parallel.cluster; with its tables.
PipelinePlan plan_for(const config::TrainConfig& config, const graph::OpGraph& g) {
  const auto& par = config.parallel;
  cost::ClusterSpec cluster;
  try {
    cluster = cost::load_cluster(par.cluster);
  } catch (const std::exception& e) {
    throw config::ConfigError("parallel.cluster = '" + par.cluster + "': " + e.what());
  }
  const auto r = config::plan_request(config);
  PipelinePlan out;
  try {
    std::string source;
    auto cost = cost::cost_model_for(cluster, g, config.model.preset,
                                     cluster.threads_per_process(r.devices, r.threads), &source, r.precision);
    planner::Planner planner(g, cluster, std::move(cost), r);
    std::optional<plan::Plan> given;
    if (plan_from_file(par)) {
      try {
        given = planner.make(plan::load_plan(par.partitioner));
      } catch (const plan::PlanError& e) {
        if (e.kind() == ErrorKind::kFailure) throw;
        throw config::ConfigError("parallel.partitioner = " + par.partitioner + ": " + e.what());
      }
    }
    out.plan = given ? std::move(*given) : planner.make();
    out.costs = planner.stage_graph(out.plan);
    out.table = "cluster " + cluster.name + (cluster.note.empty() ? "" : ": " + cluster.note) + "\nop times: " +
                source + "\n" + report::stage_table(planner, out.plan) + "\n" + report::sync_table(planner, out.plan, 6);
  } catch (const plan::PlanError& e) {
    if (e.kind() == ErrorKind::kFailure) throw;  // a planner bug stays a failure
    throw config::ConfigError(std::string("parallel: ") + e.what());
  }
  return out;
}

}  // namespace trident::runtime
