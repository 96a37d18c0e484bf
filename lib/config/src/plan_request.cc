#include "trident/config/plan_request.h"

#include <algorithm>

namespace trident::config {
namespace {

// Tensors of optimizer state per parameter (PlanRequest::optimizer_states):
// adam and adamw 2, sgd with momentum 1, plain sgd 0.
int optimizer_states_for(const std::string& optimizer, double momentum) {
  if (optimizer == "adam" || optimizer == "adamw") return 2;
  if (optimizer == "sgd") return momentum > 0 ? 1 : 0;
  throw plan::PlanError("optimizer '" + optimizer + "' is unknown; use sgd, adam or adamw");
}

}  // namespace

std::optional<PartitionerKind> partitioner_kind(const std::string& partitioner) {
  const auto& names = planner::partitioner_names();  // the searches and dp
  if (partitioner == "dp") return PartitionerKind::kDataParallel;
  if (std::find(names.begin(), names.end(), partitioner) != names.end()) return PartitionerKind::kSearch;
  const std::string suffix = ".json";
  if (partitioner.size() > suffix.size() &&
      partitioner.compare(partitioner.size() - suffix.size(), suffix.size(), suffix) == 0)
    return PartitionerKind::kPlanFile;
  return std::nullopt;
}

PartitionerKind run_kind(const ParallelConfig& parallel) {
  if (parallel.devices <= 1) return PartitionerKind::kDataParallel;  // one process: a plan of one stage
  return partitioner_kind(parallel.partitioner).value_or(PartitionerKind::kPlanFile);
}

planner::PlanRequest plan_request(const TrainConfig& config) {
  const auto& par = config.parallel;
  const auto kind = run_kind(par);
  const bool dp = kind == PartitionerKind::kDataParallel;
  planner::PlanRequest r;
  r.model = config.model.name, r.preset = config.model.preset, r.model_file = config.model.file;
  r.model_graph = config.model.graph, r.graph_chunks = config.model.graph_chunks;
  r.fanouts = config.model.fanouts, r.sample_replace = config.model.sample_replace, r.hidden = config.model.hidden;
  r.node_embedding = config.model.node_embedding;
  r.devices = static_cast<int>(par.devices);
  r.mini_batch = static_cast<int>(config.train.mini_batch);
  if (par.micro_batch) r.micro_batch = static_cast<int>(par.micro_batch);
  else if (dp) r.micro_batch = r.mini_batch / static_cast<int>(config.train.accumulate);
  r.partitioner = dp ? "dp" : kind == PartitionerKind::kPlanFile ? "graphpipe" : par.partitioner;
  r.schedule = par.schedule == "auto" ? "" : par.schedule;
  r.grad_sync = par.grad_sync;
  r.optimizer_states = optimizer_states_for(config.optimizer.name, config.optimizer.momentum);
  r.staleness = static_cast<int>(par.staleness);
  r.pipeline_delay = static_cast<int>(par.pipeline_delay);
  r.max_replicas = dp ? 0 : static_cast<int>(par.max_replicas);
  r.threads = static_cast<int>(config.train.threads);
  r.bucket_bytes = par.bucket_mb * cost::kBytesPerMiB;
  r.recompute = par.recompute;
  r.micro_batch_ratio = static_cast<int>(par.micro_batch_ratio);
  r.sync_overrides = par.sync;
  r.precision = graph::precision_from_string(config.train.precision).value_or(graph::Precision::kFp32);
  r.ps_push_scale = config.parallel.comm_dtype == "bf16" ? 0.5 : 1;  // See Note [Push dtype]
  return r;
}

}  // namespace trident::config
