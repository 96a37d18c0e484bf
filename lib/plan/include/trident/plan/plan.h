// Plan: what to run where — stages (convex op sets) with their devices,
// micro-batch and schedule actions, the stage graph's edges and the tensors
// that cross them, a gradient-sync method per parameter, and the planner's
// predictions. Plans are data ("trident-plan/1" JSON): the planner writes
// them, people may edit or write them, and the runtime executes any plan that
// `validate_plan` accepts. Torch-free.
//
// Note [Recomputation]
// ~~~~~~~~~~~~~~~~~~~~
// The forward again, now recording autograd, on the
// inputs and fields kept, under the same random key, so it computes exactly
// what the first forward sent on.
#pragma once

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trident/base/error.h"
#include "trident/graph/op_graph.h"
#include "trident/schedule/schedule.h"

namespace trident::plan {

// A bad plan, a bad planning request, or no feasible plan. The message names
// the field or stage, the value, and what is allowed.
using PlanError = ComponentError<struct PlanErrorTag, ErrorKind::kBadInput>;

struct PlanStage {
  int id = 0;
  std::vector<std::string> ops;  // op names, topological order
  std::vector<int> devices;      // global device ids; replicas = devices.size()
  int micro_batch = 0;           // rows per micro-batch (split among replicas)
  // See Note [Replica shares]: the rows of each micro-batch replica j runs
  // (one per device, summing to micro_batch); empty: an even split.
  std::vector<int> shares;
  // See Note [Node partitions] in nn/node_parts.h: "nodes" — graph
  // parallelism: every replica runs the whole micro-batch (one graph), each
  // owning a contiguous range of its nodes; "" — replicas split the rows.
  std::string partition;
  std::string actions;           // schedule, e.g. "F0 F1 B0 F2 B1 B2"
  // See Note [Recomputation]: the stage keeps only its inputs per in-flight
  // micro-batch and runs its forward again right before each backward.
  bool recompute = false;
  // Filled by prediction (planner or simulate).
  int in_flight = 0;
  double predicted_tps_s = 0;     // time per sample of this stage
  double memory_bytes = 0;        // peak per device
  double param_bytes = 0;
  double activation_bytes = 0;    // one micro-batch in flight, per device
  double forward_s = 0, backward_s = 0, sync_s = 0;
};

struct PlanTensor {
  std::string op;  // producer; the tensor is its output
  std::vector<std::int64_t> shape;
  std::string dtype;
};

struct PlanEdge {
  int from = 0, to = 0;
  std::vector<PlanTensor> tensors;
};

struct Prediction {
  double iteration_s = 0, samples_per_s = 0, bubble_fraction = 0;
  int depth = 0;
};

struct Plan {
  std::string model, preset;
  std::string model_file;     // a user's model (zoo::ModelSpec::file); empty for the zoo's
  std::string model_graph;    // JSON "graph": a GNN's graph (zoo::ModelSpec::graph); empty for others
  std::int64_t graph_chunks = 0;  // JSON "graph_chunks": GNNPipe mode's chunks (zoo::ModelSpec::graph_chunks)
  // JSON "fanouts", "sample_replace", "hidden": a sampled GNN's (zoo::ModelSpec's of those names).
  std::vector<int> fanouts;
  bool sample_replace = false;
  std::int64_t hidden = 0, node_embedding = 0;  // JSON "node_embedding" too
  nlohmann::json cluster;     // ClusterSpec::to_json(), so a plan stands alone
  nlohmann::json cost_model;  // CostModel::describe()
  int devices = 0, mini_batch = 0;
  std::string partitioner = "hand-written", schedule = "graph-1f1b";
  int optimizer_states = 2;   // tensors of optimizer state per parameter (Adam 2, SGD+momentum 1)
  std::string precision = "fp32";  // fp32 | bf16: what memory and edges were priced for (JSON only when bf16)
  std::string comm_dtype = "fp32";  // fp32 | bf16: PS pushes as priced (Note [Push dtype]; JSON only when bf16)
  std::vector<PlanStage> stages;
  std::vector<PlanEdge> edges;
  std::map<std::string, std::string> grad_sync;  // parameter -> allreduce | ps | sfb
  Prediction predicted;
  // See Note [Delayed pipelines] in schedule/delayed.h: JSON "pipeline_delay"
  // (when 1): the stages train under PipeDream-2BW's delayed update and no
  // step fills or drains; `predicted` is then the delayed steady state. Both
  // predictions are kept, labelled, whichever runs ("synchronous",
  // "delayed"; a delayed one only where the schedule is 1F1B's).
  int pipeline_delay = 0;
  // See Note [Early forwards] in schedule/delayed.h: the most warm-up
  // forwards a stage moves into the step before (JSON "pipeline_early";
  // −1: every one), the planner's fastest in simulation.
  int pipeline_early = -1;
  std::optional<Prediction> synchronous, delayed;
  double search_seconds = 0;
  // Which search space the plan came from ("series-parallel", "sequential";
  // empty when not searched), and the best plan's predictions in each space
  // searched (see Note [Search spaces] in planner/planner.h).
  std::string space;
  std::map<std::string, Prediction> space_best;
  // Under `parallel.schedule: auto`, each schedule simulated on the plan's
  // stages (see Note [Automatic schedule] in planner/planner.h); else empty.
  std::map<std::string, Prediction> schedule_best;
  // On a mixed cluster (Note [Class-aware placement] in planner/planner.h): the
  // best plan of each placement tried — "class-aware", "as-average" (planned
  // as if every device were the average one) and "one-class" (the fastest
  // cluster of one class alone); else empty.
  std::map<std::string, Prediction> placement_best;

  // See Note [Micro-batch ratios] in schedule/schedule.h: each stage has its
  // own micro-batch; these are mini_batch / micro_batch per stage.
  int micro_batches(int stage) const;
  std::vector<int> micro_batch_counts() const;
  bool one_micro_batch_size() const;  // every stage's micro_batch is the same
  // Note [Replica shares]
  // ~~~~~~~~~~~~~~~~~~~~~
  // A stage's replicas split each micro-batch into contiguous row ranges, in
  // device order: evenly (sizes differ by at most one row, the larger
  // first), or by the stage's `shares` — on devices of unequal speed the
  // planner gives a faster one more rows (Cephalo's uneven batch shares,
  // HetPipe's and Metis's load balancing). Training stays one process's:
  // the loss is a sum over the global batch divided by its size and the
  // replicas' gradients are summed, whatever rows each one ran. A chunk of
  // `rows` other than the micro-batch (evaluation's last, shorter one)
  // splits in proportion: replica j starts at floor(rows·S_j / b), S_j the
  // shares before j.
  // The rows [begin, end) of a `rows`-row micro-batch of `stage` that
  // replica `replica` runs.
  std::pair<std::int64_t, std::int64_t> replica_rows(int stage, int replica, std::int64_t rows) const;
  nlohmann::json to_json() const;
  // Throws PlanError naming the missing or mistyped field.
  static Plan from_json(const nlohmann::json& doc, const std::string& origin);
};

Plan load_plan(const std::string& path);

// Checks a plan against its model's graph: every op in exactly one stage,
// stages convex and their dependencies acyclic, devices in range and used
// once, micro-batch sizes that divide the mini-batch and split among
// replicas evenly or by shares that sum to them (Note [Replica shares]), neighbouring stages' micro-batch sizes that divide one another
// (see Note [Micro-batch ratios]), parameters' sync methods known (sfb only on
// Linear weights), and schedule actions that pass the schedule validator
// (under pipeline_delay, also delay_schedule's checks). Rebuilds `edges` from
// the graph when the plan has none. Throws PlanError naming the problem.
// Also runs check_sfb_order.
void validate_plan(Plan& plan, const graph::OpGraph& graph);

// SFB pairs each micro-batch's captured layer inputs with its output
// gradients by position, so a stage with several replicas and an sfb
// parameter must run its backwards in the order of its forwards. Throws
// PlanError naming the stage and its actions otherwise. Stages without
// actions yet pass (call again once the planner has filled them).
void check_sfb_order(const Plan& plan, const graph::OpGraph& graph);

// The schedule a plan's stage actions spell, with each stage's micro-batch
// count (see Note [Micro-batch ratios]); throws PlanError naming a stage whose
// actions do not parse. Not validated.
schedule::Schedule schedule_of(const Plan& plan);

// The stage of every device (by device id) of a plan; -1 for a device the
// plan leaves idle.
std::vector<int> stage_of_devices(const Plan& plan);

// The stage of every op (by op id) of a validated plan.
std::vector<int> stage_of_ops(const Plan& plan, const graph::OpGraph& graph);

// The bytes one optimizer step moves between stages, over all ranks: every
// tensor on an edge, for each row of the mini-batch, forward in its dtype,
// and its gradient backward when it carries one (Graph::carries_gradients:
// not a dataset field). For a GNN's layer split, with fp32 activations of
// width d on the cuts and one graph of N nodes: 8 N sum(d). A stage with
// partition "nodes" adds its halo rows, 8 d sum_p |B_p| per aggregation
// (gnn::partition_bytes).
double stage_transfer_bytes(const Plan& plan, const graph::OpGraph& graph);

}  // namespace trident::plan
