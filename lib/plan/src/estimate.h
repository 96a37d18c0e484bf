// Internal: the cost of one stage (a set of ops with a data-parallel degree)
// under a planner's cost model. Every path that needs a stage's time or
// memory — the search, the exhaustive checks, assembly and simulation — goes
// through here (or sums its per-op parts), so they agree.
//
// Note [Stage memory]
// Per device: weights + gradients + optimizer state (optimizer_states tensors
// per parameter) + in-flight × activations of one micro-batch slice
// (activation bytes per sample × micro_batch / replicas). A PS shard's
// smaller optimizer state is not counted (conservative).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "trident/cost/comm.h"
#include "trident/plan/planner.h"

namespace trident::plan::detail {

struct StageEstimate {
  double forward_s = 0, backward_s = 0;  // one micro-batch slice on one replica
  double param_bytes = 0, static_bytes = 0, activation_bytes = 0;
  double sync_s = 0;  // per iteration
  std::vector<schedule::SyncTask> sync;                       // WFBP order
  std::vector<std::pair<std::string, cost::SyncMethod>> methods;  // per parameter, replicas > 1

  double tps(int micro_batch, int mini_batch) const {
    return (forward_s + backward_s) / micro_batch + sync_s / mini_batch;
  }
  double memory(int in_flight) const { return static_bytes + in_flight * activation_bytes; }
};

// Note [Gradient buckets]
// The runtime all-reduces gradients in buckets (parallel.bucket_mb): the
// parameters in reverse order, a new bucket whenever the next would overflow
// the size, each bucket sent once its last gradient is ready. The estimate
// packs the parameters whose method is all-reduce the same way and prices
// one all-reduce per bucket; Gloo's per-call cost makes one 1 MiB bucket far
// cheaper than six separate tensors.
//
// `fixed` (parameter -> method) overrides the request's rule where present.
StageEstimate estimate_stage(const Planner& planner, const std::vector<graph::OpId>& ops, int replicas,
                             int micro_batch, const cost::LinkSpec& link,
                             const std::map<std::string, std::string>* fixed = nullptr);

// The request's rule for one parameter (hybrid = cost::choose_sync).
cost::SyncChoice sync_for(const Planner& planner, const graph::Op& op, const graph::ParamSpec& param, int replicas,
                          const cost::LinkSpec& link);

}  // namespace trident::plan::detail
