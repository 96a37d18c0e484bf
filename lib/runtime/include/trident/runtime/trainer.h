// Trainer: training of a zoo model from a TrainConfig, on one process or
// on parallel.devices processes (started by `trident launch`, torchrun,
// mpirun or srun; see comm/world.h). Every run is a plan (docs/design.md,
// contract "One loop"): one process is a plan of one stage on one device; data parallelism
// (partitioner dp) one stage of N replicas; graphpipe | pipedream | a
// plan.json a graph pipeline. One loop runs them all through StageExecutor,
// and each replicated stage syncs its gradients by the plan's methods, so
// the weights equal single-process training on the same global batch.
//
// The run keeps the plan (docs/design.md): rank 0 makes the plan and every rank
// receives it; a rank builds only its stage's modules, parameters and
// optimizer state (initial weights from (train.seed, name), see Note [Initial
// weights] in nn/graph_module.h); evaluation runs through the pipeline;
// checkpoints are written in shards (see Note [Sharded checkpoints]).
//
// Owns the run directory `runs_dir/name/` (rank 0 writes all but the shards):
//   config.yaml     the resolved config (every default filled in)
//   plan.json       the plan that ran
//   metrics.jsonl   one JSON object per line: training windows
//                   {step, epoch, loss, accuracy, lr, samples_per_s, wall_s;
//                   with clipping grad_norm; in a pipeline
//                   p2p_bytes_per_step, what every rank sent to other stages},
//                   evaluations {step, epoch, test_loss, test_accuracy, wall_s}
//                   (accuracy only for a cross_entropy loss; mse has none),
//                   and at the end {step, memory: [per rank: rank, stage,
//                   replica, peak_rss_bytes, planned_bytes, and on a GPU
//                   peak_gpu_bytes]}
//   checkpoints/step-<N>/  the last checkpoint.keep checkpoints (manifest + shards)
//   trace.json      Chrome trace of the last steps, every rank (Perfetto)
//   ops.json        with train.profile_ops: each rank's self time per op
//                   and step from its second step on (see Note [Op self time])
// A fresh run starts a new metrics file; a resumed run (resume = true) loads
// the newest complete checkpoint — under any plan — and appends. With one
// thread and a fixed seed a resumed run ends with the same weights as an
// uninterrupted one: the sample order is a function of (seed, step) and the
// update of (weights, state).
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trident/base/error.h"
#include "trident/checkpoint/sharded_checkpoint.h"
#include "trident/config/config.h"
#include "trident/data/loader.h"
#include "trident/data/sampler.h"
#include "trident/data/source.h"
#include "trident/executor/stage_executor.h"
#include "trident/executor/tensor_placement.h"
#include "trident/executor/tied_params.h"
#include "trident/executor/trace.h"
#include "trident/nn/graph_executor.h"
#include "trident/nn/op_profile.h"
#include "trident/optim/optimizer.h"
#include "trident/process/process.h"
#include "trident/runtime/observer.h"
#include "trident/sync/grad_sync.h"

namespace trident {
class Progress;
}

namespace trident::runtime {

// A failure while training (non-finite loss, unreadable checkpoint); the CLI
// exits 1 with its message.
using TrainingError = ComponentError<struct TrainingErrorTag, ErrorKind::kFailure>;

struct TrainResult {
  std::int64_t steps = 0;  // optimizer steps completed in total
  double last_loss = 0;    // mean loss over the last logging window
  std::optional<double> test_accuracy, test_loss;
  bool interrupted = false;
};

struct Evaluation {
  double loss = 0, accuracy = 0;
};

// The plan of a run: the config as a plan request, made by planner::Planner::
// make (graphpipe | pipedream planned for parallel.cluster; a .json path
// read and checked against the model and the config; dp one stage of
// parallel.devices replicas); then parallel.sync's overrides. With its
// stage and sync tables. Throws ConfigError naming the field; `trident
// train` calls it before starting processes.
struct PipelinePlan {
  plan::Plan plan;
  std::string table;
  schedule::StageGraph costs;  // what the simulator ran: per-stage and per-edge modelled times
};
PipelinePlan plan_for(const config::TrainConfig& config, const graph::OpGraph& graph);
// Whether plan_for reads parallel.partitioner as a plan file (several
// devices and a partitioner that names none of dp, graphpipe, pipedream).
bool plan_from_file(const config::ParallelConfig& parallel);

// Note [Elastic re-planning]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// A job started again on fewer devices than parallel.devices (`trident
// train --min-devices`, after a slot failed to start) runs its config with
// these overrides: parallel.devices = `devices`, planned anew by the same
// partitioner — parallel.partitioner's own, or for a plan file the
// partitioner that made it (graphpipe for a hand-written plan). Applied
// with the config's own (load_config), so the config is checked again for
// the new count. Everything that decides what is trained stays: the global
// mini-batch, the seed and so the samples of each step, the optimizer. The
// checkpoint is read onto the new plan as any resume is (each rank reads
// its stage's tensors by name); rank 0 prints both plans side by side.
// Throws ConfigError when a plan file cannot be read.
std::vector<std::string> replan_overrides(const config::TrainConfig& config, int devices);

// This process's peak resident memory so far (getrusage), in bytes.
std::int64_t peak_rss_bytes();
// This process's mapped address space now (/proc/self/statm), in bytes.
std::int64_t mapped_bytes();

class Trainer {
 public:
  // Sets threads, joins the ranks (`world` when given, e.g. threads over a
  // HashStore in tests; else the launcher's environment, or a group of one),
  // receives the plan, builds this rank's stage and data and with `resume`
  // loads the run's newest checkpoint. Throws ConfigError / data::DataError
  // for bad input, TrainingError for an unusable checkpoint or a stage that
  // cannot fit this process's memory limit.
  Trainer(config::TrainConfig config, bool resume, std::ostream& out, std::optional<comm::Group> world = std::nullopt);
  ~Trainer();

  // Trains to the configured end; `stop_after` ends early after that many
  // total steps without a final checkpoint, as a crash would (for tests).
  TrainResult run(std::optional<std::int64_t> stop_after = std::nullopt);
  // Loss and accuracy over `split`, forward through the pipeline; every rank calls it.
  Evaluation evaluate(const data::Source& split);

  // This rank's parameters (its stage's; none when idle), by name.
  const sync::NamedParams& params() const { return stage_->params(); }
  const plan::Plan& plan() const { return plan_; }
  int stage() const { return stage_->stage(); }
  const data::Sources& data() const { return data_; }
  const std::string& run_dir() const { return run_dir_; }
  std::int64_t total_steps() const { return total_steps_; }
  std::int64_t steps_done() const { return step_; }

  // Set from a signal handler: the trainer finishes the current step, writes
  // a checkpoint and returns with `interrupted`.
  static std::atomic<bool>& stop_requested();

  // Rank 0: the one rank that reports (progress, summaries, files of the run).
  bool leader() const { return rank_ == 0; }

  // What observers see and do (see Note [Training events] in observer.h).
  RunView view() const;
  // Adds an observer, told of the steps after the built-in ones.
  void add_observer(std::unique_ptr<TrainingObserver> observer);
  // A sharded checkpoint of this step; every rank calls it.
  void save_checkpoint() { save(wall_s()); }
  // Rank 0 appends one line to metrics.jsonl (others: nothing).
  void append_metrics(const std::string& line) const;
  // The metrics line of a window (and, the first time, the per-parameter
  // communication bytes).
  void write_window(const WindowMetrics& window, double lr, double steps_per_s);
  // The run's records at its end: trace.json, ops.json, the memory line;
  // every rank calls it.
  void write_records();

 private:
  TrainResult run_loop(std::optional<std::int64_t> stop_after);
  // Runs one phase of construction; an Error from it gets this rank's
  // context and the phase's name.
  void phase(const char* name, const std::function<void()>& run);
  ErrorContext where() const;  // this rank, its stage and replica (see Note [Errors])
  void join(std::optional<comm::Group> world);  // the group of every rank, checked by a preflight
  // Rank 0 makes the plan (plan_for), prints and saves it; every rank
  // receives it and checks that its config (and plan file) agree.
  void agree_on_plan(const graph::OpGraph& graph);
  void build_stage(const graph::OpGraph& graph);
  void check_memory_limit(int stage) const;
  void load(const std::string& run_dir);
  void show_plan_change(const checkpoint::CheckpointReader& ck) const;
  // Sums values over the ranks (a no-op on one process).
  std::vector<double> sum_over_ranks(std::vector<double> values) const;
  // Every rank's `mine`, in rank order, on every rank (one string when alone).
  std::vector<std::string> gather_strings(const std::string& mine) const;
  // What this rank writes of the optimizer state, and what it loads of a
  // parameter's (see Note [Sharded optimizer state]).
  std::vector<std::pair<std::string, torch::Tensor>> state_to_write() const;
  struct Shard {
    bool sharded = false;  // this rank updates only `span` of the parameter (a PS block)
    sync::GradSync::Span span;
  };
  Shard shard_of(const std::string& name) const;
  optim::ParamState state_to_load(const checkpoint::CheckpointReader& ck, const std::string& name, const torch::Tensor& param) const;
  // Arms the gradient sync (if any) before the backward that completes the gradients.
  void arm_sync(double lr);
  // The optimizer's update at `lr` of the gradient times `scale`.
  sync::GradSync::Update update_at(double lr, double scale = 1) const;
  // With optimizer.clip_norm, after the gradients are synced: their global
  // norm (every rank calls it) and the factor that clips it; {0, 1} without.
  // See Note [Global gradient norm] in sync/grad_sync.h.
  struct Clip {
    double norm = 0, scale = 1;
  };
  Clip clip();
  // After backward: waits for the gradient sync (if any) and steps the
  // optimizer on this stage's parameters, zeroing their gradients; records
  // both in `trace`. Returns the exposed communication seconds (0 without
  // sync) and the gradient norm when clipping.
  struct Stepped {
    double exposed_s = 0, grad_norm = 0;
  };
  Stepped sync_and_step(double lr, executor::TraceLog& trace);
  std::string banner() const;
  std::string precision_note() const;
  // Figures summed over the ranks, of `steps` steps: one, or under
  // staleness s those whose sums have arrived (see Note [Lagged step totals]).
  struct StepTotals {
    double loss = 0, correct = 0, exposed_s = 0;
    double read_staleness = 0;  // this rank's (sync::SyncStats::read_staleness)
    double grad_norm = 0;       // the global gradient norm before clipping (with optimizer.clip_norm)
    double p2p_bytes = 0;       // sent between stages by every rank (of the summed steps)
    double data_wait_s = 0;     // this rank's wait for its batch (Note [Loader] in data/loader.h)
    double bad_samples = 0;     // samples newly replaced (data.on_bad_sample: skip), every rank's
    bool stop = false;
    std::int64_t steps = 1;
    std::vector<double> chunk_reads;  // per chunked aggregation: stale reads, all reads (every rank's)
  };
  // See Note [Node chunks] in nn/node_chunks.h: GNNPipe mode's aggregations
  // (empty otherwise), this rank's stale and total reads of each so far, and
  // every rank's over the current logging window.
  std::vector<std::string> chunked_ops_;
  std::vector<double> local_chunk_reads() const;
  std::vector<double> window_chunk_reads_;
  StepTotals step(double lr, executor::TraceLog& trace);
  // See Note [Lagged step totals]
  StepTotals sum_step(std::vector<double> values);
  void report_bad_samples(Progress& progress, double total);
  std::string loader_note() const;
  // See Note [Data in checkpoints] (trainer_state.cc).
  nlohmann::json data_state() const;
  void check_data_state(const checkpoint::CheckpointReader& ck) const;
  struct PendingSum {
    std::int64_t step = 0;
    torch::Tensor values;
    c10::intrusive_ptr<c10d::Work> work;
  };
  std::deque<PendingSum> pending_sums_;
  // See Note [Delayed pipelines] (schedule/delayed.h): whether the step
  // about to run drains the pipeline (before evaluation, checkpoints, the
  // end, and a stop: a stop then takes effect one step later), and a stop
  // every rank has seen that waits for that drain.
  bool drains(std::int64_t step) const;
  bool stop_pending_ = false;
  void load_older_weights(const checkpoint::CheckpointReader& ck);
  void save(double wall_s);
  // Rank 0 writes trace.json: every rank's events of the last traced steps.
  void write_trace() const;
  // With train.profile_ops, rank 0 writes ops.json: every rank's op self time
  // per step, the step's wall time and the rest (outside any op).
  void write_op_profile();
  void record_memory();  // the memory line of metrics.jsonl: every rank's peak against the plan
  double wall_s() const;  // of the whole run, resumes included
  std::chrono::steady_clock::time_point run_start_;
  std::vector<std::unique_ptr<TrainingObserver>> added_;  // add_observer's, after the built-in ones

  config::TrainConfig config_;
  std::ostream& out_;
  std::string run_dir_;
  int rank_ = 0, size_ = 1;
  int local_processes_ = 1;  // the job's processes on this host (see Note [Thread defaults])
  process::ThreadChoice threads_;
  executor::Placement placement_;  // where this process's tensors live (see Note [Placement])
  std::unique_ptr<executor::DeviceClock> clock_;  // times compute spans on a GPU (see Note [GPU spans]); null on the CPU
  std::optional<comm::Group> group_;
  plan::Plan plan_;
  std::shared_ptr<nn::GraphModule> module_;  // this stage's ops only
  std::unique_ptr<executor::StageExecutor> stage_;
  bool classifies_ = true;  // the loss is cross_entropy: accuracy is reported (mse: it is not)
  graph::Op loss_op_;       // for each batch's divisor (nn::loss_divisor)
  std::unique_ptr<sync::GradSync> sync_;
  std::unique_ptr<executor::TiedSync> tied_;  // parameters read by several stages (see Note [Tied parameters])
  data::Sources data_;
  std::unique_ptr<data::EpochSampler> sampler_;
  std::unique_ptr<data::Loader> loader_;
  // A sampled GNN's graph, feature store and blocks (Note [Sampled blocks]
  // in nn/sampled_blocks.h); null for every other model.
  std::unique_ptr<class SampledGraph> sampled_;
  std::vector<std::pair<std::int64_t, std::int64_t>> block_rows_;  // the global batch's rows each micro-batch's blocks read
  bool block_rows_learnt_ = false;
  void prefetch_blocks();
  std::string sample_log_;  // TRIDENT_TEST_SAMPLE_LOG (Note [Test hooks])
  void log_samples(const torch::Tensor& ids, const data::Batch& batch, std::int64_t step) const;
  double bad_reported_ = 0;  // this rank's bad samples already summed
  std::int64_t window_samples_ = 0;  // the loader's totals at the last metrics line
  double window_read_s_ = 0;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::int64_t total_steps_ = 0, step_ = 0;
  double wall_offset_s_ = 0;  // wall time of the run before a resume
  std::deque<executor::TraceLog> trace_;              // the last few steps' events
  std::int64_t sync_armed_us_ = 0;          // when the gradient sync of this step was armed
  bool comm_bytes_logged_ = false;          // the per-parameter bytes line is written once
  std::unique_ptr<nn::OpProfile> op_profile_;  // train.profile_ops, from the run's second step
  std::int64_t profiled_from_ = 0;             // the step it started after
};

}  // namespace trident::runtime
