// Trainer: training of a zoo model from a TrainConfig, on one process,
// as a graph pipeline (parallel.partitioner graphpipe | pipedream | plan.json:
// each rank runs one stage replica, see stage_executor.h), or
// data parallel on parallel.devices processes (started by `trident launch`,
// torchrun, mpirun or srun; see comm/world.h). Each process takes a
// contiguous, equal slice of every global batch and gradients are synced by
// parallel.grad_sync, so the weights equal single-process training on the
// same global batch. Rank 0 writes the run directory.
// Owns the run directory `runs_dir/name/`:
//   config.yaml     the resolved config (every default filled in)
//   metrics.jsonl   one JSON object per line: training windows
//                   {step, epoch, loss, accuracy, lr, samples_per_s, wall_s}
//                   and evaluations {step, epoch, test_loss, test_accuracy, wall_s}
//   checkpoint.pt   weights + optimizer state by parameter name (atomic)
//   plan.json       graph pipelines: the plan that ran
//   trace.json      Chrome trace of the last steps, every rank (Perfetto)
// A fresh run starts a new metrics file; a resumed run (resume = true) loads
// checkpoint.pt and appends. With one thread and a fixed seed a resumed run
// ends with bitwise the same weights as an uninterrupted one: the sample
// order is a function of (seed, step) and the update of (weights, state).
#pragma once

#include <atomic>
#include <deque>
#include <iosfwd>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "trident/comm/grad_sync.h"
#include "trident/data/dataset.h"
#include "trident/data/sampler.h"
#include "trident/nn/executor.h"
#include "trident/runtime/config.h"
#include "trident/runtime/optimizer.h"
#include "trident/runtime/stage_executor.h"
#include "trident/runtime/trace.h"

namespace trident::runtime {

// A failure while training (non-finite loss, unreadable checkpoint); the CLI
// exits 1 with its message.
class TrainingError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct TrainResult {
  std::int64_t steps = 0;  // optimizer steps completed in total
  double last_loss = 0;    // mean loss over the last logging window
  std::optional<double> test_accuracy, test_loss;
  bool interrupted = false;
};

struct Evaluation {
  double loss = 0, accuracy = 0;
};

// Graph pipelines (parallel.devices > 1, partitioner not dp): the plan —
// planned for parallel.cluster, or read from the .json path and checked
// against the model and the config — and its stage and sync tables. Throws
// ConfigError naming the field; `trident train` calls it before starting
// processes.
struct PipelinePlan {
  plan::Plan plan;
  std::string table;
  schedule::StageGraph costs;  // what the simulator ran: per-stage and per-edge modelled times
};
PipelinePlan plan_for(const TrainConfig& config, const graph::OpGraph& graph);

class Trainer {
 public:
  // Sets threads and seed, builds the model and data, and with `resume`
  // loads the run's checkpoint. Throws ConfigError / data::DataError for bad
  // input, TrainingError for an unusable checkpoint.
  Trainer(TrainConfig config, bool resume, std::ostream& out);
  ~Trainer();

  // Trains to the configured end; `stop_after` ends early after that many
  // total steps without a final checkpoint, as a crash would (for tests).
  TrainResult run(std::optional<std::int64_t> stop_after = std::nullopt);
  Evaluation evaluate(const data::Dataset& split) const;

  const nn::GraphModule& module() const { return *module_; }
  const data::Splits& data() const { return data_; }
  const std::string& run_dir() const { return run_dir_; }
  std::int64_t total_steps() const { return total_steps_; }
  std::int64_t steps_done() const { return step_; }

  // Set from a signal handler: the trainer finishes the current step, writes
  // a checkpoint and returns with `interrupted`.
  static std::atomic<bool>& stop_requested();

 private:
  void save(double wall_s) const;
  void append_metrics(const std::string& line) const;
  void connect();  // data parallel: rendezvous, preflight, equal weights, gradient sync
  std::map<std::string, std::string> sync_methods() const;
  // Sums values over the ranks (a no-op on one process).
  std::vector<double> sum_over_ranks(std::vector<double> values) const;
  std::map<std::string, ParamState> gathered_optimizer_state() const;
  // Every rank's `mine`, in rank order, on every rank (one string when alone).
  std::vector<std::string> gather_strings(const std::string& mine) const;
  // Graph pipelines: the plan (planned now, or read from parallel.partitioner),
  // checked against the model and the config; rank 0 prints and saves it.
  void make_plan();
  // Rank 0 writes trace.json: every rank's events of the last traced steps.
  void write_trace() const;
  bool pipelined() const { return plan_.has_value(); }
  // Arms the gradient sync (if any) before the backward that completes the gradients.
  void arm_sync();
  // After backward: waits for the gradient sync (if any) and steps the
  // optimizer on `params`, zeroing their gradients; records both in
  // `trace`. Returns the exposed communication seconds (0 without sync).
  double sync_and_step(const comm::NamedParams& params, double lr, TraceLog& trace);
  bool leader() const { return world_.rank == 0; }

  TrainConfig config_;
  std::ostream& out_;
  std::string run_dir_;
  std::shared_ptr<nn::GraphModule> module_;
  std::unique_ptr<nn::GraphExecutor> executor_;  // whole graph, loss and logits out
  graph::OpId logits_ = -1;
  data::Splits data_;
  std::unique_ptr<data::EpochSampler> sampler_;
  std::unique_ptr<Optimizer> optimizer_;
  std::vector<std::pair<std::string, torch::Tensor>> params_;
  std::int64_t total_steps_ = 0, step_ = 0;
  comm::WorldInfo world_;
  std::optional<comm::Group> group_;
  std::unique_ptr<comm::GradSync> sync_;
  double wall_offset_s_ = 0;  // wall time of the run before a resume
  std::optional<plan::Plan> plan_;          // graph pipeline (devices > 1, partitioner not dp)
  std::unique_ptr<StageExecutor> stage_;
  std::deque<TraceLog> trace_;              // the last few steps' events
  static constexpr std::size_t kTracedSteps = 4;
  std::int64_t sync_armed_us_ = 0;          // when the gradient sync of this step was armed
};

}  // namespace trident::runtime
