// StageExecutor: one rank's part of a graph pipeline (GraphPipe's runtime,
// docs/algorithms.md §2). From a validated plan each rank finds its stage and
// replica, builds the executor of that stage's ops, and per iteration runs
// the stage's schedule actions — whatever they are (gpipe, 1f1b, graph-1f1b
// or hand-written: there is no schedule-specific code):
//
//   F m  wait for the inputs of micro-batch m from every predecessor stage,
//        forward, send the outputs to every successor stage;
//   B m  wait for the output gradients from every successor (summed at a
//        fan-out), backward, send the input gradients to every predecessor.
//
// Gradients accumulate in the parameters over the micro-batches; the caller
// syncs them among the stage's replicas and steps the optimizer.
//
// Note [Rows and pieces]
// ~~~~~~~~~~~~~~~~~~~~~~
// (docs/design.md, contract "A stage's replicas split each micro-batch"): micro-batch m is rows
// [m·b, (m+1)·b) of the global batch; replica j of a stage with d devices
// holds rows Plan::replica_rows(stage, j, b) of it: an even split, or the
// stage's shares (Note [Replica shares] in plan/plan.h). An edge between stages of
// different d is split into pieces: one p2p message per (producer replica,
// consumer replica) whose row ranges overlap, carrying exactly the overlap.
// Consumers concatenate pieces in row order; gradients travel back the same
// pieces.
//
// See Note [Unequal micro-batches in pieces] (see Note [Micro-batch ratios] in
// schedule/schedule.h): stages may have different micro-batch sizes, one
// dividing the other along each edge. Rows are matched in the global batch:
// over a period of the larger size, each micro-batch of this stage (its
// phase in the period) meets the other stage's micro-batches there, and
// each overlap of two replicas' rows is a piece. So a stage of micro-batch
// 2b concatenates the pieces of two micro-batches of a predecessor of b, and
// sends its gradients back split in two. A message is numbered by the finer
// side's micro-batch, which lies in exactly one of the coarser side's.
//
// Note [Tags]
// ~~~~~~~~~~~
// (docs/design.md, contract "Deterministic communication"): the tensors crossing edges are
// numbered k in plan order (edges, then each edge's tensors); a message
// carries tag (k·M + m)·2 + direction (0 forward, 1 backward), m its
// micro-batch of the finer side and M the most micro-batches any stage has.
// Between two ranks there is at most one piece per (k, m, direction), so
// tags never collide. Under a pipeline delay two mini-batches are in flight
// (Note [Delayed pipelines] in schedule/delayed.h): m then runs over 2M,
// micro-batch m of mini-batch t numbered m + (t mod 2)·M. Sends are asynchronous and waited for only at the end of the
// iteration. Receives are posted ahead, in the order the stage's actions
// consume them, at most `window` micro-batches per direction, where window
// is the stage's in-flight count (the most forwards its schedule runs
// before their backwards): communication overlaps compute while receive
// buffers stay bounded by the plan's in-flight memory, not by the number
// of micro-batches.
//
// Note [Pipelined evaluation]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Evaluate() runs the test rows forward only
// through the same stages, pieces and tags, in chunks of the plan's
// mini-batch split into its micro-batches (a last, shorter chunk as one
// micro-batch); each replica forwards its slice. A chunked graph's rows (its
// node chunks, Note [Node chunks] in nn/node_chunks.h) go as one
// micro-batch, so every aggregation reads live rows: exact inference. The loss stage's sums over
// all ranks equal one process's, and no rank ever holds another stage's
// parameters.
//
// See Note [Recomputation] (activation checkpointing): a stage the plan marks
// `recompute` runs each training forward without recording autograd and
// keeps, per in-flight micro-batch, only the tensors it received and the
// dataset fields it read; right before that micro-batch's backward it runs
// the forward again, recording, and backpropagates through it. Random ops
// replay their draws (see Note [Random ops] in nn/random.h), so the gradients
// equal those of the same plan without recomputation bit for bit. Memory:
// in-flight × inputs plus one micro-batch's activations instead of
// in-flight × activations; time: one more forward per micro-batch.
//
// Edge contracts (contract "Edge contracts"): every piece is checked against its edge's
// declared shape and dtype before it is sent; a mismatch throws
// PipelineError at the sender naming the edge, both stages and the
// micro-batch. A receive that waits longer than the group's timeout throws
// comm::CommError naming the peer rank, its stage, this stage, the
// micro-batch and the action that was waiting.
//
// Note [Unequal micro-batches in pieces]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Over a period of the larger size.
//
// Note [Weight pass]
// ~~~~~~~~~~~~~~~~~~
// B runs autograd from the stage's roots (its loss, its outputs' gradients)
// asking only for the gradients of its inputs, so it executes exactly the
// nodes on paths to the inputs (the input side) and each of them leaves out
// its outputs towards the weights. W must compute those outputs and carry
// them to the weights — nothing else. A node of the input side with an
// edge into the weights-only part of the graph (an addmm's mat2, a
// convolution's weight and bias, a cat fed by an embedding) is an
// *intermediate*: before B a hook on it records the gradients it receives
// there, the same ones a single backward would give it. W then runs autograd
// once, from the intermediates, with those gradients, to their parameters,
// each intermediate's edges into the input side cut for the call: so an
// intermediate computes its weight-side outputs alone (dW and db, not dX
// again), the engine walks only the weights-only part (W stays linear in
// the stage's depth), and the weights-only nodes below it (a transpose, a
// cast) run as in one backward. Every weight gradient comes from the same
// tensors by the same formulas as one process's, accumulated into .grad as
// one backward does.
//
// Parameters that share an intermediate, or a node below one, form a group.
// A group falls back to a second pass over the whole graph (autograd from the
// roots, with the group's parameters as targets; see Note [Two-pass split
// backward]) when that would double a gradient or miss one: when an
// intermediate reaches a parameter of its group through the input side too
// (x @ w @ w: the later product's input gradient feeds the earlier one,
// whose hook already holds it), when a root reaches a parameter without
// passing the input side (a stage with no differentiable input: B computes
// nothing and W is its whole backward), or when a hook did not fire.
//
// Note [Two-pass split backward]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A split micro-batch (Note [Split backward] in schedule.h) runs autograd
// over the graph its forward recorded: B asks only for the gradients of the
// stage's inputs (autograd::grad with the inputs as targets, so no weight
// gradient is computed and no AccumulateGrad runs) and keeps the graph; W
// computes the weight gradients from what B's hooks recorded at the nodes
// where the input side meets the weights (Note [Split backward at the
// weights] in weight_pass.h). Where that cannot give one backward's sums, W
// is a second pass: backward from the same roots and output gradients with
// those parameters as targets, recomputing the gradients along the paths
// to them. Either way every gradient is computed from the same tensors in
// the same order as a single backward, so the weights equal one process's;
// the graph lives from F to W.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "trident/base/error.h"
#include "trident/sync/grad_sync.h"
#include "trident/comm/group.h"
#include "trident/nn/graph_executor.h"
#include "trident/nn/sampled_blocks.h"
#include "trident/nn/node_chunks.h"
#include "trident/nn/node_parts.h"
#include "trident/plan/plan.h"
#include "trident/executor/tensor_placement.h"
#include "trident/executor/trace.h"
#include "trident/executor/weight_versions.h"
#include "trident/schedule/delayed.h"
#include "trident/schedule/schedule.h"

namespace trident::executor {

struct Posted;

// A stage produced something its edge does not declare, or a plan cannot be
// run by these processes; the message names the edge, stages and micro-batch.
using PipelineError = ComponentError<struct PipelineErrorTag, ErrorKind::kFailure>;

// Rows [begin, end) of the global batch, with the dataset fields a stage reads.
using FieldSource = std::function<nn::Batch(std::int64_t begin, std::int64_t end, const std::set<std::string>& fields)>;

// Note [Emulation]
// ~~~~~~~~~~~~~~~~~
// `trident train --emulate CLUSTER`: the processes,
// schedule actions, pieces, tags, timeouts and replica synchronisation are
// the real ones; only durations are modelled, from the same stage graph the
// simulator runs (Planner::stage_graph for the emulated cluster). A forward
// or backward is a wait of the stage's modelled time per micro-batch — on a
// mixed cluster, this replica's own (its rows on its device's class,
// StageCost::per_replica).
// Messages shrink to float64 [rows, 1] whose first element is the system-
// clock µs at which the modelled transfer completes: the sender takes the
// edge's channel (one per stage pair and direction, as in the simulator)
// from max(now, channel free) for the edge's modelled time, and the receiver
// waits until then. After the last backward the stage's modelled gradient-
// sync tasks run one after another, each from its ready point in that
// backward; the replicas wait until the last ends, then meet in a
// one-element all-reduce. No model weights exist, so paper-size models run
// on a laptop. `dilation` stretches every modelled duration (time dilation):
// with many processes on few cores, each message costs this machine a
// fraction of a millisecond of scheduling that a real cluster would not
// pay; dilating makes that small against the modelled times, and the
// measured iteration is divided by it again.
struct Emulation {
  schedule::StageGraph costs;
  double dilation = 1;
};

// Note [Slowed processes]
// ~~~~~~~~~~~~~~~~~~~~~~~
// To run a mixed cluster for real on one machine, a process can be made a
// slower device: TRIDENT_SLOWDOWN="RANK:FACTOR[,RANK:FACTOR...]" (e.g.
// "1:2") makes world rank RANK take FACTOR times its compute — after each
// forward, backward and W it waits (FACTOR - 1) times the compute it just
// did (waits for its inputs not counted) before it sends on. Gradient sync
// and the optimizer step are not slowed. A cluster file whose classes
// differ by the same factor (Note [Device classes] in cost/cluster.h) lets
// the planner plan for it; bench/run_heterogeneous.sh measures both.
// Returns 1 for a rank the variable does not name; throws PipelineError
// (bad input) naming the variable for a malformed value or a factor < 1.
double slowdown_for_rank(int rank);

struct StageResult {
  double loss_sum = 0;  // sum of per-sample (per counted token) losses over this rank's rows (loss stage only)
  double correct = 0;   // rows (counted tokens) whose logits' argmax is the label (loss stage only)
};

class StageExecutor {
 public:
  // `plan` must have passed plan::validate_plan against module.graph();
  // `world` holds every device of the plan (its rank is the device id).
  // Throws PipelineError when the world size differs from plan.devices.
  // A rank that the plan gives no stage is idle: run() returns at once.
  // `placement` says where the module lives and where messages travel
  // (see Note [Placement]); the fields a stage is given must be on its device.
  StageExecutor(nn::GraphModule& module, const plan::Plan& plan, comm::Group world, Placement placement = {});
  // Emulated (see Note [Emulation]): no modules; params() is empty.
  StageExecutor(const graph::OpGraph& graph, const plan::Plan& plan, comm::Group world, Emulation emulation);
  ~StageExecutor();

  int stage() const { return stage_; }  // -1 when idle
  int replica() const { return replica_; }
  int replicas() const;
  // Bytes of every message this rank has sent to other stages so far
  // (activations and their gradients, in the dtype they crossed in).
  std::int64_t bytes_sent() const { return bytes_sent_; }
  bool has_loss() const { return has_loss_; }
  // This stage's parameters by name, and the dataset fields it reads.
  const sync::NamedParams& params() const { return params_; }
  const std::set<std::string>& fields() const { return fields_; }
  nn::GraphExecutor& executor() { return *executor_; }
  const graph::OpGraph& graph() const { return graph_; }
  const plan::Plan& plan() const { return plan_; }

  // One iteration: every action of this stage's schedule. Losses are scaled
  // by 1/divisor (nn::loss_divisor of the global batch; see Note [Loss scale]
  // in nn/graph_executor.h).
  // `before_last_backward` runs right before the stage's last backward (arm
  // the replicas' gradient sync there, so WFBP hooks see only that one).
  // Appends trace events (forward, backward, waits) to `trace` when given.
  StageResult run(const FieldSource& fields, double divisor, const std::function<void()>& before_last_backward,
                  TraceLog* trace = nullptr);
  // The key of the next run()'s random operators (see Note [Random ops] in
  // nn/random.h): the run's seed and the optimizer step.
  void set_random_key(std::uint64_t seed, std::int64_t step) { random_seed_ = seed, random_step_ = step; }

  // Under plan.pipeline_delay (Note [Delayed pipelines] in schedule/delayed.h):
  // whether the next run() drains (the default) or hands over to the next
  // step, its cooldown running the next mini-batch's first forwards — rows
  // [mini_batch, 2·mini_batch) of its FieldSource, the next global batch —
  // whose losses count in the next run()'s result. Drain before evaluation,
  // a checkpoint and the end: nothing is then in flight.
  void set_drain(bool drain) { drain_ = drain; }
  bool delayed() const { return plan_.pipeline_delay > 0; }
  // Under a delay, this stage's weight versions (Note [Weight versions]);
  // null otherwise and when emulated.
  WeightVersions* versions() { return versions_.get(); }
  // Under a delay, after run(): the update to version step + 1 begins (the
  // parameters point at its buffer, a copy of version step); write it
  // through WeightVersions::unseen. Throws PipelineError when the stage
  // holds another version than the step's, or a micro-batch in flight would
  // need a third. Nothing without a delay.
  void begin_update();
  // Called with true before a forward of the next mini-batch and false
  // after it (make_stage_sync passes GradSync::next_forwards).
  void set_next_forwards(std::function<void(bool)> mark) { next_forwards_ = std::move(mark); }
  // The most weight versions that micro-batches in flight used at once.
  int most_versions() const { return most_versions_; }

  // A sampled GNN's blocks (Note [Sampled blocks] in nn/sampled_blocks.h):
  // called with each micro-batch's `node` field before its forward (an
  // empty one for a replica without rows, since it may be a collective),
  // and `training`; the forward and its recomputation run in a BlockScope
  // of what it returns.
  using BlockFn = std::function<std::shared_ptr<const nn::SampledBlocks>(const torch::Tensor& nodes, bool training)>;
  void set_blocks(BlockFn blocks) { blocks_ = std::move(blocks); }

  // Forward only over rows [0, rows) of `fields` (see Note [Pipelined
  // evaluation]): the loss stage's sums of loss and correct rows over its
  // slice; zeros elsewhere. Every rank of the plan calls it with the same rows.
  StageResult evaluate(const FieldSource& fields, std::int64_t rows);

  struct Piece;
  struct Crossing;
  struct Layout;
  struct Exchange;

 private:
  // See Note [Action backends] (stage_executor.cc): pass() interprets actions;
  // a backend computes them — on tensors, or on the emulated clock.
  struct Pass;
  class Backend;
  class TensorBackend;
  class ClockBackend;

  void build();  // rank -> stage, crossings, actions; the executor when not emulated
  // One group per direction, each pair of ranks met once (see Note [Pipeline
  // transfers on GPUs] in executor/tensor_placement.h); nothing when the world carries both.
  void open_links();
  // See Note [Node partitions] in nn/node_parts.h: a stage with partition
  // "nodes" owns a node range; its halo rows travel on the world group.
  void open_node_parts();
  std::vector<torch::Tensor> trade_halo(const std::vector<torch::Tensor>& out, const std::vector<std::int64_t>& rows,
                                        std::int64_t width, int direction);
  // The owned rows of graph fields (their node axis is 1) and the whole
  // graph's masked count; returns the scope that ops read them from.
  std::optional<nn::NodePartScope> node_scope(nn::Batch* fields = nullptr);
  std::shared_ptr<nn::NodeParts> node_parts_;
  std::string mask_field_;  // the masked_cross_entropy's mask, a dataset field
  // See Note [Node chunks] in nn/node_chunks.h: a chunked graph's chunk
  // bounds (null otherwise), and the split's masked count for this pass.
  void open_node_chunks();
  std::optional<nn::NodeChunkScope> chunk_scope(std::int64_t first, std::int64_t count, bool training);
  void count_masked(const FieldSource& source, std::int64_t first_row, std::int64_t rows);
  std::shared_ptr<const nn::NodeChunks> node_chunks_;
  double chunk_mask_total_ = 0;
  // The group that carries direction d (0 activations, 1 gradients).
  const comm::Group& link(int d) const { return links_.empty() ? world_ : links_[static_cast<std::size_t>(d)]; }
  // Where this rank's rows and pieces lie under the plan's micro-batch
  // sizes (uniform 0), or with `uniform` rows in every stage's micro-batch.
  const Layout& layout(std::int64_t uniform);
  // One pass of `actions` over the micro-batches of `layout`; an error
  // escaping an action gets this rank's context and the action's.
  StageResult pass(const Layout& layout, const std::vector<schedule::Action>& actions, Pass& p);
  // p2p (see Note [Tags]): post the receives of the next micro-batch of direction
  // d, wait for one piece, gather this rank's rows of crossing k, send.
  void post_next(Exchange& x, int d);
  torch::Tensor take(Exchange& x, int d, std::size_t piece, int m);
  torch::Tensor gather(Exchange& x, int d, int k, int m);
  void send(Exchange& x, const Piece& piece, const torch::Tensor& value, int m, int d);
  void post_send(Exchange& x, const Piece& piece, const torch::Tensor& message, int m, int d);
  // The number message m of `piece` carries in its tag (Note [Tags]): under
  // a delay, the micro-batch's mini-batch parity is part of it.
  int message_number(const Piece& piece, int m, const Layout& layout) const;
  int tag_span(const Layout& layout) const;  // the M of the tag formula: 2M under a delay
  // Throws CommError "<what> rank P (stage S) (<who stopped responding,
  // from heartbeats>): <cause>" with this rank's context; `what` ends with
  // "from" or "to".
  [[noreturn]] void fail(const std::string& what, int peer, const std::exception& e) const;
  ErrorContext context() const;  // this rank, its stage and replica

  const graph::OpGraph& graph_;
  nn::GraphModule* module_ = nullptr;  // null when emulated
  std::int64_t bytes_sent_ = 0;
  plan::Plan plan_;
  comm::Group world_;
  std::vector<comm::Group> links_;  // [activations, gradients]; empty: world_ carries both
  Placement placement_;
  int stage_ = -1, replica_ = 0, micro_batches_ = 0;  // micro_batches_: this stage's
  std::uint64_t random_seed_ = 0;
  double slowdown_ = 1;  // See Note [Slowed processes]
  std::int64_t random_step_ = 0;
  bool has_loss_ = false;
  bool recompute_ = false;  // See Note [Recomputation]
  graph::OpId logits_ = -1, labels_ = -1, mask_ = -1;  // mask_: masked_cross_entropy's
  std::string loss_kind_;
  std::int64_t ignore_index_ = graph::OpGraph::kIgnoreIndex;  // a per-token loss's (Note [Token losses])
  bool classifies_ = true;  // cross_entropy: accuracy is counted; mse: it is not
  std::unique_ptr<nn::GraphExecutor> executor_;
  sync::NamedParams params_;
  std::set<std::string> fields_;
  std::vector<int> stage_of_device_;
  std::vector<Crossing> crossings_;  // indexed by k (see Note [Tags])
  std::map<std::int64_t, std::unique_ptr<Layout>> layouts_;  // by micro-batch rows
  std::vector<schedule::Action> actions_;  // F, B and W (see Note [Split backward]); S dropped
  std::unique_ptr<Backend> backend_;  // null when idle
  BlockFn blocks_;  // See Note [Sampled blocks]
  // See Note [Delayed pipelines]: this stage's lists, whether this run
  // drains, whether the next mini-batch's forwards are in flight, their
  // sends (waited at the end of the next run) and losses.
  schedule::DelayedStage delayed_;
  bool drain_ = true, warm_ = false;
  std::vector<Posted> next_sends_;
  StageResult next_result_;
  std::unique_ptr<WeightVersions> versions_;
  int most_versions_ = 0;
  std::function<void(bool)> next_forwards_;
  // The version micro-batch m of this run computes on: its mini-batch − 1.
  std::int64_t version_of(int m) const { return random_step_ + (m >= micro_batches_ ? 1 : 0) - 1; }
  void wait_sends(std::vector<Posted>& sends, const std::string& what);
};

// The gradient sync among the replicas of this rank's stage, over a new
// subgroup of them (every replica calls it): each parameter by its plan
// method (plan.grad_sync; missing = allreduce), WFBP buckets of
// `bucket_bytes`, PS staleness `staleness` and PS pushes in `ps_push_dtype`
// (see Note [Push dtype] in sync/grad_sync.h). Attaches its observer to the
// stage's executor (SFB). Null when the stage has one replica or the rank
// is idle. Parameters in `leave` (tied ones, see Note [Tied parameters]) are not
// synced here.
std::unique_ptr<sync::GradSync> make_stage_sync(StageExecutor& stage, const plan::Plan& plan, const comm::Group& world,
                                                std::int64_t bucket_bytes, int staleness,
                                                const std::set<std::string>& leave = {},
                                                torch::ScalarType ps_push_dtype = torch::kFloat);

}  // namespace trident::executor
