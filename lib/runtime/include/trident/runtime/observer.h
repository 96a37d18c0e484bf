// Training events: what the training loop tells its observers after every
// step and at the end, and the read-only view of the run they get.
//
// Note [Training events]
// ~~~~~~~~~~~~~~~~~~~~~~
// The loop (Trainer::run) only runs steps — learning rate, step, trace — and
// keeps the window of steps since the last metrics line. What happens around
// the steps is each an observer, told of every step done (step_done) and of
// the run's end (ending), in order: test fault injection (installed only
// when a test asks for it; see Note [Test hooks] in base/test_hooks.h), the
// progress line, metrics lines, periodic checkpoints, evaluations, the run's
// records (trace, op profile, memory), then those added with
// Trainer::add_observer. An observer reads the run through RunView and acts
// only through the Trainer's public operations (save_checkpoint, evaluate,
// write_window, append_metrics, write_records): it owns its decision of
// when, the Trainer the state. Under bounded staleness a step's sums over
// the ranks may arrive later (Note [Lagged step totals]); observers see
// what has arrived.
#pragma once

#include <cstdint>
#include <string>

#include "trident/config/config.h"

namespace trident::runtime {

// The steps since the last metrics line, summed over the ranks: loss and
// accuracy (each step's share of its samples, or counted tokens, predicted
// right) of the `summed` steps whose sums have arrived, exposed
// communication, read staleness and (with optimizer.clip_norm) the global
// gradient norm before clipping, of all `steps`.
struct WindowMetrics {
  double loss = 0, correct = 0, exposed = 0, staleness = 0, grad_norm = 0;
  double p2p_bytes = 0;  // sent between pipeline stages by every rank, of the summed steps
  double data_wait = 0;  // seconds rank 0 waited for its batches
  double bad_samples = 0;  // replaced by data.on_bad_sample: skip, every rank's
  std::int64_t steps = 0, summed = 0;
  double mean_loss() const;
  double accuracy() const;  // the mean over the summed steps
};

// The run as an observer sees it.
struct RunView {
  const config::TrainConfig& config;
  const std::string& run_dir;
  int rank = 0;
  bool leader = false;                 // rank 0: the one that reports and writes the run's files
  std::int64_t step = 0;               // optimizer steps done (resumes included)
  std::int64_t total_steps = 0;
  std::int64_t steps_per_epoch = 1;
  std::int64_t epoch = 0;              // 0-based epoch of the last step done
  bool classifies = true;              // a cross_entropy loss: accuracy is reported
  double wall_s = 0;                   // of the whole run, resumes included
};

struct StepEvent {
  const RunView& run;
  double lr = 0;
  const WindowMetrics& window;  // this step included
  double steps_per_s = 0;       // over the window
  bool window_ends = false;     // a metrics line is due
};

class TrainingObserver {
 public:
  virtual ~TrainingObserver() = default;
  virtual void step_done(const StepEvent& event) { (void)event; }
  // The run ends, at its last step or interrupted by a stop request.
  virtual void ending(const RunView& run, bool interrupted) {
    (void)run;
    (void)interrupted;
  }
};

}  // namespace trident::runtime
