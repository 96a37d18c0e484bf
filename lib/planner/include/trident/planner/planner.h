// The planner: given a model's graph, a cluster and a cost model, find the
// plan that trains fastest within device memory, and predict what it does.
//
//   graphpipe  GraphPipe (docs/algorithms.md §2): binary search on the bottleneck
//              time per sample (TPS); for each target a dynamic program over
//              the series-parallel decomposition decides feasibility with the
//              least pipeline depth. Stages form a DAG; schedule graph-1f1b.
//   pipedream  the sequential baseline: the same search over a linearised
//              graph (contiguous cuts of a topological order); schedule 1f1b.
//   dp         one stage over all devices (pure data parallelism).
//
// Every partitioner tries each power-of-two micro-batch that divides the
// mini-batch (or the one requested), simulates each candidate plan, and keeps
// the one with the most samples per second; graphpipe's stages may run up to
// micro_batch_ratio times that micro-batch (see Note [Per-stage micro-batch
// sizes] in planner/planner.h). Stage data-parallel degrees are powers of two
// that divide the stage's micro-batch. Each parameter of a stage with
// several replicas gets a sync method (HybComm by default). See Note [Stage
// memory] for what must fit on a device.
//
// Note [Automatic schedule]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// With `parallel.schedule: auto` the partition is searched under the base
// schedule (graph-1f1b for graphpipe, 1f1b otherwise: they rank candidates
// the way GraphPipe and PipeDream do), then the zero-bubble schedules that
// apply to it — graph-zb on graphpipe's stage DAG, zb-h1 and zb-h2 on a
// chain — are simulated on the same stages, each with the sync methods it
// allows (hybrid leaves SFB out of a split backward) and recomputation
// where it would not fit otherwise. The base is replaced only by a plan
// more than 1% faster: a schedule that splits runs more, smaller actions
// than the simulator prices. One stage (dp) has nothing to fill; grad_sync
// sfb takes no split. Every schedule simulated is kept in
// plan.schedule_best, which `trident plan` prints. The partition is not
// searched again under each schedule.
//
// Note [Search spaces]
// ~~~~~~~~~~~~~~~~~~~~
// Graphpipe searches the SP decomposition and also the
// sequential space (contiguous cuts of a topological order), and keeps the
// faster plan: the SP space cannot put a fan-in stage together with the tail
// of one branch, nor cross an SP-ization cut, and on such graphs a
// sequential cut can win. So graphpipe considers every plan pipedream does
// (and runs it with graph-1F1B on its real stage DAG). dp searches none.
//
// Per-stage micro-batch sizes (see Note [Per-stage micro-batch sizes]
// below) are searched in the series-parallel space only: the
// sequential one is pipedream's, whose stages share one micro-batch as
// published, and it would double the search's time for plans that the
// series-parallel space mostly has already. The series-parallel space is
// also searched with one size: the TPS search ranks by bottleneck time per
// sample, and its mixed-size candidates can simulate slower than the
// one-size ones they displace (candle_uno, 16 devices, 4 samples each:
// 7052 against 7329 samples/s), so the planner is never worse for them.
// Where the series-parallel space is the chain itself (a sequential
// model), per-stage sizes are searched only when the request names a
// ratio: GraphPipe claims nothing for chains, and the chain's deeper plans
// make the search 4-9x slower (transformer, 256 devices: 0.7 -> 6.8 s).
//
// Note [Class-aware placement]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// GraphPipe's search assumes one kind of device: a stage's replicas run
// equal slices at the same speed. On a mixed cluster the planner keeps that
// search for what it is good at — which ops form stages, their micro-batch
// sizes and the schedule — and decides placement per class afterwards, as
// HetPipe, Metis and Cephalo balance load over unequal devices:
//
//   1. Stage structures come from homogeneous views of the cluster: the
//      search as if every device were the average one (the "as-average"
//      baseline: what a class-unaware planner does), and the search on the
//      devices of each class alone (the "one-class" baseline: the fast
//      devices by themselves, the best homogeneous sub-cluster).
//   2. Each structure is placed on classes. A stage's time per row on a
//      device of class k, tau[s][k], comes from that class's cost model
//      (cost::class_cost_model). Every stage first takes one device, the
//      heaviest stage first, each the fastest device left for it — so a
//      heavy branch gets a fast device and a light one a slow device, and
//      the join stops waiting. Then the remaining devices go one at a time,
//      fastest first, to the stage whose time b_s / sum(1/tau) is the
//      bottleneck, on a host it already uses where one is free. Within a
//      stage, replica j runs a share of each micro-batch in proportion to
//      its speed (Note [Replica shares] in plan/plan.h), so replicas
//      finish together; a stage's replicas may straddle classes and hosts
//      (the slowest link prices their sync). Every placement along the way
//      is simulated (sync, links and bubbles included), since adding a
//      replica also adds communication.
//   3. The fastest of all plans simulated — the baselines included — is the
//      plan; plan.placement_best keeps each kind's best, which `trident
//      plan` prints. `trident plan --placement KIND` returns a kind's best
//      instead (to run a baseline).
//
// Pricing a placed stage (estimate_placed): each replica's rows on
// its class; the stage takes the slowest replica's time. Memory: the
// largest share's activations against the smallest device of the stage
// (conservative where a stage mixes classes). The search is not re-run per
// class assignment: stage boundaries are those the homogeneous views chose.
//
// Note [Per-stage micro-batch sizes]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// GraphPipe gives every stage its own micro-batch b_i and carries it at SP
// subgraphs' sources and sinks. Here an engine at micro-batch b lets each
// stage run b x u for u = 1, 2, ... up to the request's micro_batch_ratio
// (a "config" is replicas and units u; powers of two always nest, so
// neighbours' sizes divide one another). graph-1F1B with ratios keeps rows
// in flight (see Note [Micro-batch ratios] in schedule/schedule.h): a stage forwards
// what its successors hold plus one of its own micro-batches, so its
// in-flight rows are the sum of b x u along its longest path to a sink.
// Depth and heights are therefore counted in units of b — a stage adds u,
// not 1 — and a stage at height H units holds ceil(H / u) of its own
// micro-batches (in_flight_at in estimate.h). The least depth in units is
// the least fill: a bubble lasts about the rows on the critical path. So a
// stage runs at 2b only where b does not meet the target TPS; a larger
// micro-batch is then faster per sample, and its memory is priced at its
// own rows. With u = 1 everywhere this is the program above unchanged.
// Plans mixing b, ..., ratio x b come from the engine at b; the
// planner runs one per candidate b, so every window of sizes is searched.
//
// sp_engine.cc holds the construction and the plain series / parallel cases;
// fork_join.cc the stages that join a branch group with the pieces before or
// after its parallel node (see Note [Fork and join stages]); sp_replay.cc reads
// a plan out.
//
// Note [Fork and join stages]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The SP tree alone cannot put a fork (the
// pieces before a parallel node) or a join (the pieces after it) in the
// same stage as a branch. join() and fork() allow it for a group of
// branches at either end that forms one stage, the other branches split as
// usual; fork_join() puts the fork with one end group and the join with the
// other. Such a stage is convex: the other branches only read
// from a fork stage, and only feed a join stage. Each lowers `best` (the
// fewest devices for S(i, h, δ) so far).
//
// Join: piece i is parallel; pieces i+1..t join a branch group's stage,
// which is then the last stage of the unit (height delta + rest + 1).
#pragma once

#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "trident/cost/buckets.h"
#include "trident/cost/cluster.h"
#include "trident/cost/network.h"
#include "trident/cost/cost_model.h"
#include "trident/graph/precision.h"
#include "trident/graph/sp.h"
#include "trident/plan/plan.h"
#include "trident/schedule/simulator.h"
#include "trident/schedule/stage_graph.h"

namespace trident::planner {

struct PlanRequest {
  std::string model, preset;  // recorded in the plan
  std::string model_file;     // recorded in the plan: a user's model file
  std::string model_graph;    // recorded in the plan: a GNN's graph source
  std::int64_t graph_chunks = 0;  // recorded in the plan: GNNPipe mode's chunks (Note [Node chunks])
  std::vector<int> fanouts;        // recorded in the plan: a sampled GNN's (Note [Sampled blocks])
  bool sample_replace = false;
  std::int64_t hidden = 0, node_embedding = 0;
  int devices = 1;
  int mini_batch = 1;
  std::optional<int> micro_batch;  // default: searched
  std::string partitioner = "graphpipe";
  std::string schedule;            // default (auto): see Note [Automatic schedule] in planner/planner.h
  std::string grad_sync = "hybrid";  // hybrid | allreduce | ps | sfb (sfb where it applies, else allreduce)
  int optimizer_states = 2;
  // train.precision: memory, edge bytes and SFB factors as the policy
  // computes them (see Note [Precision policy]); op times are the cost
  // model's (bf16 profiles where calibrated, cost_model_for).
  graph::Precision precision = graph::Precision::kFp32;
  double ps_push_scale = 1;  // parallel.comm_dtype bf16: 0.5 (see Note [Push dtype])
  cost::SyncWire wire() const { return {ps_push_scale, precision == graph::Precision::kBf16 ? 2 : 0}; }
  // The PS's staleness bound (parallel.staleness): under s > 0 every server
  // keeps a copy of its 1/r of the PS-synced weights (see Note [Server copy] in
  // sync/grad_sync.h), which the memory model counts.
  int staleness = 0;
  // parallel.pipeline_delay (see Note [Delayed pipelines] in
  // schedule/delayed.h): recorded in the plan, which then predicts the
  // delayed steady state and holds one more copy of each stage's weights.
  // The search itself ranks plans as synchronous.
  int pipeline_delay = 0;
  std::optional<double> device_memory_bytes;  // default: the cluster's device memory
  double tolerance = 1e-3;  // relative, of the binary search on TPS
  int max_pieces = 64;      // coarsening: at most this many cut points per series
  // graphpipe / pipedream: at most this many data-parallel replicas per
  // stage (0: no limit). Like DeepSpeed's pipeline width, it makes the
  // planner pipeline where it would otherwise replicate.
  int max_replicas = 0;
  // Compute threads per process where the cluster's processes share cores
  // (0: the cores divided among the processes, see Note [Thread defaults]).
  int threads = 0;
  // The runtime's bucket size (see Note [Gradient buckets] in cost/buckets.h).
  double bucket_bytes = static_cast<double>(cost::kDefaultBucketBytes);
  // Which stages recompute their forward (see Note [Pricing recomputation] in
  // schedule/stage_graph.h): auto (where a stage would not fit otherwise), never, always.
  std::string recompute = "auto";
  // See Note [Per-stage micro-batch sizes] (sp_engine.h): a stage's micro-batch
  // may be up to this many times the plan's smallest (a power of two; 1: one
  // size for every stage). 0: 2 for graphpipe when the micro-batch is
  // searched, else 1 (pipedream is the baseline as published, and a
  // requested micro-batch is every stage's).
  int micro_batch_ratio = 0;
  // On a mixed cluster (Note [Class-aware placement]): which placement's best
  // plan to return — auto (the fastest of all), class-aware, as-average or
  // one-class (the baselines, for comparison). Only auto elsewhere.
  std::string placement = "auto";
  // Per-parameter sync methods over the plan's (config parallel.sync):
  // parameter name -> allreduce | ps | sfb. make() applies and checks them.
  std::map<std::string, std::string> sync_overrides;
};

const std::vector<std::string>& recompute_names();  // auto, never, always
const std::vector<std::string>& placement_names();  // auto, class-aware, as-average, one-class

const std::vector<std::string>& partitioner_names();

class Planner {
 public:
  // Throws PlanError naming a bad request field.
  Planner(const graph::OpGraph& graph, cost::ClusterSpec cluster, cost::CostModel cost, PlanRequest request);

  const graph::OpGraph& graph() const { return graph_; }
  // gnn::partition_bytes of the graph on `parts` parts, computed once per
  // part count (it decodes the adjacency and finds every part's halo).
  double partition_bytes(int parts) const;
  const cost::ClusterSpec& cluster() const { return cluster_; }
  const cost::CostModel& cost() const { return cost_; }
  // A device's cost model: its class's in a mixed cluster (Note [Device
  // classes] in cost/cluster.h, cost::class_cost_model), else cost().
  const cost::CostModel& cost_of(cost::DeviceId device) const;
  const PlanRequest& request() const { return request_; }
  // Each op's output dtype under the request's precision (graph::computed_dtypes).
  const std::vector<graph::DType>& dtypes() const { return dtypes_; }
  double memory_cap() const;
  // What each device of `stage` may hold: the request's device memory, else
  // the smallest of its devices' (their classes').
  double memory_cap(const plan::PlanStage& stage) const;

  // The one place a request becomes a plan (`trident plan`, `trident train`,
  // the emulator): with `given` (a plan file's plan, hand-written or made
  // elsewhere), that plan checked against the graph and the request (model,
  // preset, devices, mini-batch), the sync methods it leaves out filled by
  // the request's rule (fill_sync); without, plan(). Then the request's
  // sync_overrides, each checked; the plan predicted and stamped for this
  // planner's cluster once, and its SFB order checked. Throws PlanError
  // naming the problem.
  plan::Plan make(std::optional<plan::Plan> given = std::nullopt) const;

  // Runs the requested partitioner. Throws PlanError "no feasible plan: ..."
  // naming the stage or op that does not fit, its need and the limit (with
  // how many other reasons rejected candidates). A candidate that breaks an
  // invariant is a bug: its PlanError (kind kFailure) is thrown at once.
  // dp is one stage over every device when the micro-batch splits evenly
  // among them, else over the largest power of two of them that it does.
  plan::Plan plan() const;

  // Fills a plan's predictions (per-stage TPS, memory, in-flight, actions if
  // empty; iteration time, samples/s, bubble, depth) by simulating it.
  schedule::SimResult predict(plan::Plan& plan) const;
  // The delayed steady state of `plan` (Note [Delayed pipelines]) into
  // plan.delayed, with its cap on early forwards (Note [Early forwards]);
  // nullopt for a schedule without a delayed form (PlanError when the plan
  // is delayed).
  std::optional<schedule::SimResult> predict_delayed(plan::Plan& plan, const schedule::StageGraph& sg,
                                                     const schedule::Schedule& s) const;
  // Records in the plan the cluster and cost model its predictions are for
  // (plan() does it for its result; once per plan, not per search candidate:
  // a profiled cost model's description carries the whole profile).
  void stamp(plan::Plan& plan) const;
  schedule::StageGraph stage_graph(const plan::Plan& plan) const;
  // Gives every parameter of a stage with several replicas that the plan
  // does not name a sync method by the request's grad_sync (HybComm for
  // hybrid) on the stage's own link; e.g. for hand-written plans.
  void fill_sync(plan::Plan& plan) const;
  // A plan made elsewhere (another planner's, a placement's) checked and
  // predicted for this planner's cluster and request: actions and sync
  // methods kept, recomputation where a stage would not fit; nullopt when
  // one still does not.
  std::optional<plan::Plan> repriced(plan::Plan plan) const;

  // One stage candidate: ops, data-parallel degree and micro-batch size
  // (0: the size the search ran at).
  struct StageChoice {
    std::vector<graph::OpId> ops;
    int replicas = 1;
    int micro_batch = 0;
    std::string partition;  // "nodes": graph parallelism (PlanStage::partition)
  };
  // The TPS search at one micro-batch over a decomposition (graphpipe uses
  // sp_decompose, pipedream linearize): the least bottleneck TPS found (to
  // the tolerance), and the stages of a least-depth partition at that TPS.
  // Stages may run up to micro_batch_ratio times that micro-batch; depth
  // counts each stage's micro-batch in units of the searched one (Note
  // [Per-stage micro-batch sizes]).
  struct Search {
    double tps = 0;
    int depth = 0;
    std::vector<StageChoice> stages;
  };
  std::optional<Search> search(const graph::SpDecomposition& sp, int micro_batch) const;
  // The least-TPS search followed by the least TPS at each smaller depth
  // that could still give a shorter iteration (see Note [Depth sweep]); the
  // partitioners simulate every candidate and keep the fastest. Plans whose
  // bottleneck alone would take longer than `bound_s` per iteration are not
  // searched for (empty result when none is left). `ratio` overrides the
  // request's micro_batch_ratio (0: the request's).
  std::vector<Search> candidates(const graph::SpDecomposition& sp, int micro_batch,
                                 double bound_s = std::numeric_limits<double>::infinity(), int ratio = 0) const;

  // A plan from stage choices: orders stages, places devices, finds edges and
  // sync methods, builds the schedule and predicts. Throws PlanError if a
  // stage does not fit in memory.
  plan::Plan assemble(const std::vector<StageChoice>& stages, int micro_batch, const std::string& partitioner) const;


 private:
  // Sets the request's sync_overrides in the plan; throws PlanError for a
  // name that is not a parameter of the graph, or a method the plan cannot run.
  void override_sync(plan::Plan& plan) const;
  [[noreturn]] void no_plan(const std::vector<std::string>& reasons, int micro_batch) const;
  // assemble's parts: the stages in topological order, each input op the
  // search left out joined to its earliest consumer's stage; devices placed;
  // recomputation where a stage does not fit (see Note [Pricing recomputation]),
  // then a PlanError for a stage that still does not.
  std::vector<StageChoice> ordered_stages(const std::vector<StageChoice>& stages) const;
  void place_devices(plan::Plan& plan, const std::vector<StageChoice>& ordered) const;
  void fit_memory(plan::Plan& plan) const;
  // See Note [Automatic schedule]: under `auto`, the base plan or the same
  // stages under a zero-bubble schedule, whichever is simulated faster.
  plan::Plan with_best_schedule(plan::Plan base) const;
  // See Note [Class-aware placement] (placement.cc): plan() on a mixed cluster.
  plan::Plan plan_mixed() const;
  // A planner for the same request on a cluster of one kind of device:
  // `device` repeated over `count` devices (links: the mixed cluster's
  // inside-host and between-host defaults), priced by `cost`.
  Planner homogeneous_view(const cost::DeviceSpec& device, int count, cost::CostModel cost) const;
  // Places `structure`'s stages (ops and micro-batch) on the request's
  // devices by class (Note [Class-aware placement]); every placement tried,
  // predicted, fastest first. Empty when none fits.
  std::vector<plan::Plan> place_on_classes(const plan::Plan& structure) const;
  std::vector<cost::CostModel> class_costs_;  // by class (mixed clusters)
  const graph::OpGraph& graph_;
  mutable std::map<int, double> partition_bytes_;
  cost::ClusterSpec cluster_;
  cost::CostModel cost_;
  PlanRequest request_;
  std::vector<graph::DType> dtypes_;
  bool ratio_given_ = false;  // micro_batch_ratio was set, not defaulted
  bool schedule_auto_ = false;  // the schedule was left to the planner
};

}  // namespace trident::planner
