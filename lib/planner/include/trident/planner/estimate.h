// The cost of one stage (a set of ops with a data-parallel degree) under a
// planner's cost model. Every path that needs a stage's time or memory — the
// search, assembly and simulation, and the exhaustive references of
// lib/exhaustive — goes through here (or sums its per-op parts), so they agree.
//
// Note [Stage memory]
// ~~~~~~~~~~~~~~~~~~~
// Per device: weights + gradients + optimizer state (optimizer_states tensors
// per parameter) + in-flight × activations of one micro-batch slice
// (activation bytes per sample × micro_batch / replicas). PS-synced
// parameters' optimizer state counts 1/replicas (see Note [Sharded parameter
// server] in sync/grad_sync.h).
#pragma once

#include <algorithm>
#include <optional>

#include <map>
#include <string>
#include <vector>

#include "trident/cost/network.h"
#include "trident/planner/planner.h"

namespace trident::planner {

struct StageEstimate {
  double forward_s = 0, backward_s = 0;  // one micro-batch slice on one replica
  double weight_grad_s = 0;  // of backward_s, the weight gradients' own work (cost::CostModel::weight_grad_s)
  double param_bytes = 0, static_bytes = 0, activation_bytes = 0;
  double input_bytes = 0;  // one micro-batch slice's received tensors and dataset fields
  double sync_s = 0;  // per iteration
  std::vector<schedule::SyncTask> sync;                       // WFBP order
  std::vector<std::pair<std::string, cost::SyncMethod>> methods;  // per parameter, replicas > 1
  int slowest_device = -1;  // estimate_placed: the replica whose compute sets the stage's time
  std::vector<schedule::StageCost::Replica> per_replica;  // estimate_placed: each replica's compute

  double tps(int micro_batch, int mini_batch) const {
    return (forward_s + backward_s) / micro_batch + sync_s / mini_batch;
  }
  double memory(int in_flight) const { return static_bytes + in_flight * activation_bytes; }
  // The same stage recomputing (see Note [Pricing recomputation]): activation_bytes
  // becomes what is kept per in-flight micro-batch, static_bytes holds the
  // one forward's activations, backward_s the forward run again.
  StageEstimate recomputing() const {
    StageEstimate e = *this;
    e.backward_s += forward_s;
    for (auto& r : e.per_replica) r.backward_s += r.forward_s;
    e.static_bytes += activation_bytes;
    e.activation_bytes = input_bytes;
    return e;
  }
  // Whether the stage recomputes under `rule` (auto | never | always) with
  // `in_flight` micro-batches and `cap` bytes per device; nullopt when it
  // fits neither way the rule allows.
  std::optional<bool> recompute_at(const std::string& rule, int in_flight, double cap) const {
    if (rule != "always" && memory(in_flight) <= cap) return false;
    if (rule != "never" && recomputing().memory(in_flight) <= cap) return true;
    return std::nullopt;
  }
};

// Longest path to a sink, per stage, over the op edges plus `extra` edges
// (an SP-ization's), each stage counting `units[s]` (empty: 1 each; Note
// [Per-stage micro-batch sizes] in planner/planner.h); empty when the stages'
// dependencies have a cycle.
std::vector<int> stage_heights(const graph::OpGraph& g, const std::vector<std::vector<graph::OpId>>& stages,
                               const std::vector<std::pair<graph::OpId, graph::OpId>>& extra,
                               const std::vector<int>& units = {});

// What a stage may run as in a search at micro-batch b: `replicas` (a power
// of two dividing its micro-batch, at most the request's devices and
// max_replicas) at micro-batch b x `units` (units a power of two up to
// `ratio`, b x units dividing the mini-batch). Ordered by replicas, then
// units.
struct StageConfig {
  int replicas = 1, units = 1;
};
std::vector<StageConfig> stage_configs(const PlanRequest& request, int b, int ratio);

// The micro-batches a stage of `units` keeps in flight at a height of
// `height` units (graph-1F1B counts rows: see Note [Micro-batch ratios] in
// schedule/schedule.h), with m micro-batches of the searched size in the mini-batch.
inline int in_flight_at(int height, int units, int m) {
  return std::min((height + units - 1) / units, m / units);
}

// The bytes per sample of the tensors that ops outside `ops` produce and
// ops in `ops` read, each producer once: what a recomputing stage of `ops`
// keeps per micro-batch row.
double input_bytes_per_row(const graph::OpGraph& g, const std::vector<graph::OpId>& ops);

// Prices the stage's gradient sync as the runtime runs it: the parameters
// whose method is all-reduce (and, apart, PS) packed into buckets by the
// runtime's own packer (see Note [Gradient buckets] in cost/buckets.h), one
// collective per bucket; SFB per parameter.
//
// `fixed` (parameter -> method) overrides the request's rule where present.
StageEstimate estimate_stage(const Planner& planner, const std::vector<graph::OpId>& ops, int replicas,
                             int micro_batch, const cost::LinkSpec& link,
                             const std::map<std::string, std::string>* fixed = nullptr);

// See Note [Class-aware placement] (planner.h): stage `stage` of `plan` on
// its devices, each replica running its rows (Plan::replica_rows) on its
// device's class. Compute: the slowest replica's (the others wait for it
// at every edge and at the sync); activations and kept inputs: the largest
// share's; sync and static bytes as estimate_stage prices them.
StageEstimate estimate_placed(const Planner& planner, const std::vector<graph::OpId>& ops, const plan::Plan& plan, int stage,
                              const cost::LinkSpec& link, const std::map<std::string, std::string>* fixed);

// See Note [Node partitions] in nn/node_parts.h: a stage of partition
// "nodes" on P devices — each runs 1/P of the graph's rows (compute and
// activations as the whole graph's over P) and trades its halo rows over the
// stage's link at every aggregation (gnn::partition_bytes over P, half each
// way); the weights' gradients sync among the P as any replicated stage's.
StageEstimate estimate_partitioned(const Planner& planner, const std::vector<graph::OpId>& ops, const plan::PlanStage& stage,
                                   const cost::LinkSpec& link, const std::map<std::string, std::string>* fixed);

// The request's rule for one parameter (hybrid = cost::choose_sync).
cost::SyncChoice sync_for(const Planner& planner, const graph::Op& op, const graph::ParamSpec& param, int replicas,
                          const cost::LinkSpec& link);

}  // namespace trident::planner
