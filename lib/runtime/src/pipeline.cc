// The graph-pipeline half of the Trainer: the plan, and the merged trace.
#include <algorithm>
#include <iostream>
#include <set>

#include "trident/cost/cluster.h"
#include "trident/cost/cost_model.h"
#include "trident/plan/planner.h"
#include "trident/plan/tables.h"
#include "trident/base/files.h"
#include "trident/runtime/trainer.h"

namespace trident::runtime {

namespace {

// parallel.sync: per-parameter methods over the plan's, each checked.
void apply_overrides(const TrainConfig& config, const graph::OpGraph& g, const plan::Planner& planner,
                     plan::Plan& plan) {
  if (config.parallel.sync.empty()) return;
  std::set<std::string> known;
  for (const auto& op : g.ops())
    for (const auto& p : op.params) known.insert(p.name);
  for (const auto& [name, method] : config.parallel.sync) {
    if (!known.count(name))
      throw ConfigError("parallel.sync names '" + name + "', which is not a parameter of " + g.name() +
                        " (see `trident graph --model " + g.name() + " --ops`)");
    plan.grad_sync[name] = method;
  }
  try {
    plan::validate_plan(plan, g);
  } catch (const plan::PlanError& e) {
    throw ConfigError(std::string("parallel.sync: ") + e.what());
  }
  planner.predict(plan);
}

}  // namespace

bool plan_from_file(const ParallelConfig& par) {
  // One device is one process whatever the partitioner: a plan of one stage.
  const auto& names = plan::partitioner_names();
  return par.devices > 1 && std::find(names.begin(), names.end(), par.partitioner) == names.end();
}

std::vector<std::string> replan_overrides(const TrainConfig& config, int devices) {
  const auto& par = config.parallel;
  std::vector<std::string> sets{"parallel.devices=" + std::to_string(devices)};
  if (!plan_from_file(par)) return sets;
  std::string made_by;
  try {
    made_by = plan::load_plan(par.partitioner).partitioner;
  } catch (const std::exception& e) {
    throw ConfigError("parallel.partitioner = " + par.partitioner + ": " + e.what());
  }
  const auto& names = plan::partitioner_names();
  const bool named = std::find(names.begin(), names.end(), made_by) != names.end();
  sets.push_back("parallel.partitioner=" + (named ? made_by : std::string("graphpipe")));
  return sets;
}

// Note [Config to request]: the runtime only translates the config into a
// plan request (and a plan file into `given`); lib/plan makes the plan
// (Planner::make). parallel.micro_batch 0 means the whole mini-batch for dp
// (one micro-batch, no accumulation) and "searched" for the pipelines; one
// device is a one-stage plan whatever the partitioner.
PipelinePlan plan_for(const TrainConfig& config, const graph::OpGraph& g) {
  const auto& par = config.parallel;
  cost::ClusterSpec cluster;
  try {
    cluster = cost::load_cluster(par.cluster);
  } catch (const std::exception& e) {
    throw ConfigError("parallel.cluster = '" + par.cluster + "': " + e.what());
  }
  plan::PlanRequest r;
  r.model = config.model.name, r.preset = config.model.preset, r.model_file = config.model.file;
  r.devices = static_cast<int>(par.devices);
  r.mini_batch = static_cast<int>(config.train.mini_batch);
  const bool from_file = plan_from_file(par);
  const bool dp = !from_file && (par.partitioner == "dp" || par.devices == 1);
  if (par.micro_batch) r.micro_batch = static_cast<int>(par.micro_batch);
  else if (dp) r.micro_batch = r.mini_batch;
  r.partitioner = dp ? "dp" : from_file ? "graphpipe" : par.partitioner;
  r.schedule = par.schedule == "auto" ? "" : par.schedule;
  r.grad_sync = par.grad_sync;
  r.optimizer_states = plan::optimizer_states_for(config.optimizer.name, config.optimizer.momentum);
  r.staleness = static_cast<int>(par.staleness);
  r.max_replicas = dp ? 0 : static_cast<int>(par.max_replicas);
  r.threads = static_cast<int>(config.train.threads);
  r.bucket_bytes = par.bucket_mb * 1024 * 1024;
  r.recompute = par.recompute;
  r.micro_batch_ratio = static_cast<int>(par.micro_batch_ratio);
  PipelinePlan out;
  try {
    std::string source;
    auto cost = cost::cost_model_for(cluster, g, config.model.preset,
                                     cluster.threads_per_process(r.devices, r.threads), &source);
    plan::Planner planner(g, cluster, std::move(cost), r);
    if (from_file) {
      try {
        out.plan = planner.make(plan::load_plan(par.partitioner));
      } catch (const plan::PlanError& e) {
        if (e.kind() == ErrorKind::kFailure) throw;
        throw ConfigError("parallel.partitioner = " + par.partitioner + ": " + e.what());
      }
    } else {
      out.plan = planner.make();
    }
    apply_overrides(config, g, planner, out.plan);
    planner.stamp(out.plan);  // the predictions shown beside the run's measurements are for this cluster
    plan::check_sfb_order(out.plan, g);  // now that the actions and sync methods are known
    out.costs = planner.stage_graph(out.plan);
    out.table = "cluster " + cluster.name + (cluster.note.empty() ? "" : ": " + cluster.note) + "\nop times: " +
                source + "\n" + plan::stage_table(planner, out.plan) + "\n" + plan::sync_table(planner, out.plan, 6);
  } catch (const plan::PlanError& e) {
    if (e.kind() == ErrorKind::kFailure) throw;  // a planner bug stays a failure
    throw ConfigError(std::string("parallel: ") + e.what());
  }
  return out;
}


std::vector<std::string> Trainer::gather_strings(const std::string& mine) const {
  return size_ > 1 ? comm::allgather_strings(*group_, mine, "gathering the ranks' traces") : std::vector<std::string>{mine};
}

void Trainer::write_trace() const {
  std::vector<TraceEvent> mine;
  for (const auto& step : trace_) mine.insert(mine.end(), step.events.begin(), step.events.end());
  const auto all = gather_strings(to_json(mine).dump());
  if (!leader()) return;
  nlohmann::json meta{{"model", config_.model.name + "/" + config_.model.preset},
                      {"steps", trace_.size()},
                      {"mini_batch", config_.train.mini_batch},
                      {"threads", threads_.threads}};
  write_file_atomic(run_dir_ + "/trace.json",
                    merged_trace(all, &plan_, std::move(meta)).dump() + "\n");
}

namespace {

// One rank's part of ops.json: its ops by self time per step, largest first.
nlohmann::json rank_ops(const nn::OpProfile& profile, std::int64_t steps, const ErrorContext& where) {
  std::vector<std::pair<std::string, nn::OpTotals>> ops;
  double self_s = 0;
  for (const auto& [name, totals] : profile.totals()) {
    ops.emplace_back(name, totals);
    self_s += totals.self_s;
  }
  std::sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.second.self_s > b.second.self_s; });
  const double per_step_ms = 1e3 / static_cast<double>(steps);
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& [name, totals] : ops)
    rows.push_back({{"op", name},
                    {"self_ms_per_step", totals.self_s * per_step_ms},
                    {"calls_per_step", static_cast<double>(totals.calls) / static_cast<double>(steps)}});
  return {{"rank", where.rank.value_or(0)},
          {"stage", where.stage.value_or(-1)},
          {"replica", where.replica.value_or(0)},
          {"step_ms", profile.wall_s() * per_step_ms},
          {"op_self_ms_per_step", self_s * per_step_ms},
          {"outside_ops_ms_per_step", (profile.wall_s() - self_s) * per_step_ms},
          {"ops", std::move(rows)}};
}

}  // namespace

void Trainer::write_op_profile() {
  if (!op_profile_) return;
  op_profile_->stop();
  const auto steps = step_ - profiled_from_;
  const auto all = gather_strings(rank_ops(*op_profile_, steps, where()).dump());
  op_profile_.reset();
  if (!leader()) return;
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& one : all) ranks.push_back(nlohmann::json::parse(one));
  const nlohmann::json file{{"model", config_.model.name + "/" + config_.model.preset},
                            {"steps", steps},
                            {"after_step", profiled_from_},
                            {"mini_batch", config_.train.mini_batch},
                            {"threads", threads_.threads},
                            {"ranks", std::move(ranks)}};
  write_file_atomic(run_dir_ + "/ops.json", file.dump(1) + "\n");
}

}  // namespace trident::runtime
