// StageGraph: a pipeline as the scheduler and simulator see it — stages with
// per-micro-batch compute time and memory, edges with transfer times, and no
// ops or tensors. The plan component builds it from a plan and a cost model;
// tests build it by hand. Torch-free.
//
// Note [Pricing recomputation]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A stage that recomputes (see Note [Recomputation] in plan/plan.h)
// keeps per in-flight micro-batch only its inputs — the tensors other stages
// send it and the dataset fields it reads — and holds one micro-batch's
// activations while it runs a forward; each backward first runs the forward
// again. So its memory is static + activations + in-flight × inputs, and its
// backward takes backward + forward. PlanRequest::recompute says when a
// stage recomputes: `never`; `always`; `auto`, only where the stage would
// not fit otherwise (recomputing never makes a stage faster; it lets the
// search pick fewer stages or larger micro-batches).
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "trident/base/error.h"

namespace trident::schedule {

// A schedule that breaks a dependency or deadlocks, or a malformed stage
// graph; the message names the stage and the action.
using ScheduleError = ComponentError<struct ScheduleErrorTag, ErrorKind::kBadInput>;

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
  // Per micro-batch in flight (per replica): its activations, or what a
  // recomputing stage keeps (planner/src/estimate.h, see Note [Pricing recomputation]).
  double activation_bytes = 0;
  std::vector<SyncTask> sync;   // gradient sync after the last backward, WFBP order
  double optimizer_s = 0;       // the optimizer step, once the sync (and every send) is done
  // Where the replicas run, for Note [Shared cores]: the node of each replica
  // (empty: all on node 0) and the compute threads of each replica's process.
  std::vector<int> nodes;
  int threads = 1;
  // Of backward_s, the weight gradients' part: what W takes when a schedule
  // splits the backward (Note [Split backward] in schedule.h); B takes the rest.
  double weight_s = 0;
  // On a mixed cluster, each replica at its own speed (its rows on its
  // device's class; forward_s, backward_s and weight_s are the slowest
  // replica's, which the simulator prices): what an emulated replica waits
  // (Note [Emulation]). Empty: every replica takes the stage's times.
  struct Replica {
    double forward_s = 0, backward_s = 0, weight_s = 0;
  };
  std::vector<Replica> per_replica;
  Replica replica(int j) const {
    return j >= 0 && j < static_cast<int>(per_replica.size()) ? per_replica[static_cast<std::size_t>(j)]
                                                              : Replica{forward_s, backward_s, weight_s};
  }
};

struct StageEdge {
  StageId from = 0, to = 0;
  double forward_s = 0;   // moving one micro-batch's activations
  double backward_s = 0;  // moving their gradients back
};

// Note [Shared cores]
// ~~~~~~~~~~~~~~~~~~~
// On GPUs each device computes on its own. On CPUs a "device" is a process,
// and the processes of a node share its cores: when more compute threads are
// busy than the node can serve, each runs slower. The simulator models this
// as processor sharing of the node's throughput: with T busy threads the node
// does the work of X(T) threads alone (measured, see Note [Core throughput] in
// cost/cluster.h; else min(T, cores)), shared in proportion to threads, so a
// busy replica of t threads (profiled alone at t threads, X(t)) progresses at
//   min(1, X(T) t / (T X(t)))
// of its own speed, re-evaluated at every start and end of a compute span
// (forward, backward, optimizer). Sends and gradient sync take no cores in
// the model (their latency and bandwidth were measured on the machine as it
// is).
struct StageGraph {
  std::vector<StageCost> stages;
  std::vector<StageEdge> edges;
  int cores_per_node = 0;  // 0: devices do not share compute (GPUs)
  // X(k) of Note [Shared cores] for k = 1..K (beyond: the last); empty:
  // min(k, cores_per_node).
  std::vector<double> core_throughput;
  // Once per iteration, after every stage is done: the all-reduce of the loss
  // that ends each step (and the barrier it implies).
  double step_s = 0;

  int size() const { return static_cast<int>(stages.size()); }
  std::vector<std::vector<StageId>> predecessors() const;
  std::vector<std::vector<StageId>> successors() const;
  // Stages in topological order (smallest id first among ready ones).
  std::vector<StageId> topo_order() const;
  // Longest path in stages from each stage to a sink, counting the stage.
  std::vector<int> heights() const;
  int depth() const;  // the longest path overall
  // The speed of a busy replica of `own` threads while its node has `busy`
  // threads busy, its own included (see Note [Shared cores]); 1 without sharing.
  double speed(int busy, int own) const;
  // Whether some node can run its replicas below their own speed (Note
  // [Shared cores]).
  bool oversubscribed() const;
  // Throws ScheduleError: no stages, an edge out of range, a self-loop, a cycle.
  void check() const;
};

}  // namespace trident::schedule
