// StageGraph: a pipeline as the scheduler and simulator see it — stages with
// per-micro-batch compute time and memory, edges with transfer times, and no
// ops or tensors. The plan component builds it from a plan and a cost model;
// tests build it by hand. Torch-free.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "trident/base/error.h"

namespace trident::schedule {

// A schedule that breaks a dependency or deadlocks, or a malformed stage
// graph; the message names the stage and the action.
class ScheduleError : public Error {
 public:
  explicit ScheduleError(std::string message, ErrorKind kind = ErrorKind::kBadInput, ErrorContext context = {})
      : Error(kind, std::move(message), std::move(context)) {}
};

using StageId = int;

struct SyncTask {
  std::string name;           // parameter or bucket
  double ready_fraction = 0;  // when in the last backward its gradient is ready (0 = at its start)
  double seconds = 0;
};

struct StageCost {
  std::string name;
  int replicas = 1;  // data-parallel devices; each runs its slice at the same time
  // One micro-batch on one replica.
  double forward_s = 0, backward_s = 0;
  double static_bytes = 0;      // weights, gradients, optimizer state (per replica)
  double activation_bytes = 0;  // one micro-batch in flight (per replica)
  std::vector<SyncTask> sync;   // gradient sync after the last backward, WFBP order
};

struct StageEdge {
  StageId from = 0, to = 0;
  double forward_s = 0;   // moving one micro-batch's activations
  double backward_s = 0;  // moving their gradients back
};

struct StageGraph {
  std::vector<StageCost> stages;
  std::vector<StageEdge> edges;

  int size() const { return static_cast<int>(stages.size()); }
  std::vector<std::vector<StageId>> predecessors() const;
  std::vector<std::vector<StageId>> successors() const;
  // Stages in topological order (smallest id first among ready ones).
  std::vector<StageId> topo_order() const;
  // Longest path in stages from each stage to a sink, counting the stage.
  std::vector<int> heights() const;
  int depth() const;  // the longest path overall
  // Throws ScheduleError: no stages, an edge out of range, a self-loop, a cycle.
  void check() const;
};

}  // namespace trident::schedule
