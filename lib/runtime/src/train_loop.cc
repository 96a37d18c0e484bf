// Trainer::run_loop and the built-in observers around it (See Note
// [Training events] in runtime/observer.h).
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "trident/base/files.h"
#include "trident/base/test_hooks.h"
#include "trident/base/text.h"
#include "trident/base/progress.h"
#include "trident/checkpoint/sharded_checkpoint.h"
#include "trident/runtime/trainer.h"

namespace trident::runtime {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Fault injection for the restart tests: TRIDENT_TEST_KILL_AT=R:N makes
// rank R kill itself (SIGKILL) once step N is done, on the launcher's first
// start only (TRIDENT_RESTART_COUNT unset or 0); R:N:every on every start.
// The variable is read once; -1 when unset or not for this start.
std::int64_t kill_after_step_of(int rank) {
  static const std::int64_t step = [&]() -> std::int64_t {
    const auto hook = test_hooks::kill_at();  // See Note [Test hooks]
    if (!hook || hook->rank != rank) return -1;
    const bool first_start = comm::world_from_env().restart_count == 0;
    return hook->every_start || first_start ? hook->step : -1;
  }();
  return step;
}

// TRIDENT_TEST_KILL_AT (kill_after_step_of); installed only when it is set for this rank and start.
class FaultInjection final : public TrainingObserver {
 public:
  explicit FaultInjection(std::int64_t after_step) : after_step_(after_step) {}
  void step_done(const StepEvent& e) override {
    if (e.run.step == after_step_) ::kill(::getpid(), SIGKILL);
  }

 private:
  std::int64_t after_step_;
};

// " data wait 23%" when rank 0 waited for its batches more than a tenth of
// the window: the loader, not the model, bounds the step.
std::string data_wait(const WindowMetrics& w, double steps_per_s) {
  const double share = w.steps ? w.data_wait / w.steps * steps_per_s : 0;
  return share > 0.1 ? " data wait " + format_number("%.0f", 100 * std::min(1.0, share)) + "%" : std::string();
}

// Rank 0's progress line (a bar on a terminal) and its closing line.
class ProgressReport final : public TrainingObserver {
 public:
  ProgressReport(std::ostream& out, bool leader)
      : progress_(leader ? out : quiet_, leader && Progress::is_terminal(out)) {}
  Progress& progress() { return progress_; }
  void step_done(const StepEvent& e) override {
    const auto& w = e.window;
    progress_.update(e.run.step, e.run.total_steps, e.steps_per_s,
                     "epoch " + std::to_string(e.run.epoch + 1) + " loss " + format_number("%.4f", w.mean_loss()) +
                         (e.run.classifies ? " acc " + format_number("%.1f", 100 * w.accuracy()) + "%"
                                           : std::string()) + data_wait(w, e.steps_per_s),
                     e.window_ends);
  }
  void ending(const RunView&, bool interrupted) override {
    if (!interrupted) progress_.finish();
  }
  // After every observer's ending.
  void closing(const RunView& run, bool interrupted) {
    if (interrupted)
      progress_.line("interrupted at step " + std::to_string(run.step) +
                     "; checkpoint written; continue with --resume " + run.run_dir);
    else
      progress_.line("done: " + std::to_string(run.step) + " steps in " + Progress::duration(run.wall_s) +
                     "; checkpoint " + checkpoint::checkpoint_dir(run.run_dir, run.step) + ", metrics " + run.run_dir +
                     "/metrics.jsonl");
  }

 private:
  std::ostringstream quiet_;  // only rank 0 reports progress
  Progress progress_;
};

// metrics.jsonl's training lines, one per window (train.log_every).
class MetricsLog final : public TrainingObserver {
 public:
  MetricsLog(Trainer& t, TrainResult& result) : t_(t), result_(result) {}
  void step_done(const StepEvent& e) override {
    if (!e.window_ends) return;
    result_.last_loss = e.window.mean_loss();
    t_.write_window(e.window, e.lr, e.steps_per_s);
  }

 private:
  Trainer& t_;
  TrainResult& result_;
};

// checkpoint.every, and the last checkpoint at the end or on a stop.
class Checkpoints final : public TrainingObserver {
 public:
  explicit Checkpoints(Trainer& t) : t_(t) {}
  void step_done(const StepEvent& e) override {
    const auto every = e.run.config.checkpoint.every;
    if (every && e.run.step % every == 0 && e.run.step < e.run.total_steps) t_.save_checkpoint();
  }
  void ending(const RunView&, bool) override { t_.save_checkpoint(); }

 private:
  Trainer& t_;
};

// The test split after every epoch and at the end (train.eval).
class Evaluations final : public TrainingObserver {
 public:
  Evaluations(Trainer& t, Progress& progress, TrainResult& result) : t_(t), progress_(progress), result_(result) {}
  void step_done(const StepEvent& e) override {
    const auto& r = e.run;
    if (r.config.train.eval && r.step % r.steps_per_epoch == 0 && r.step < r.total_steps)
      run(r, r.step / r.steps_per_epoch);
  }
  void ending(const RunView& r, bool interrupted) override {
    if (!interrupted && r.config.train.eval) run(r, (r.step + r.steps_per_epoch - 1) / r.steps_per_epoch);
  }

 private:
  void run(const RunView& r, std::int64_t epoch) {
    const auto ev = t_.evaluate(*t_.data().test);
    if (r.classifies) result_.test_accuracy = ev.accuracy;
    result_.test_loss = ev.loss;
    nlohmann::json line{{"step", r.step}, {"epoch", epoch}, {"test_loss", ev.loss}, {"wall_s", t_.view().wall_s}};
    if (r.classifies) line["test_accuracy"] = ev.accuracy;
    t_.append_metrics(line.dump());
    progress_.line("epoch " + std::to_string(epoch) + " step " + std::to_string(r.step) + ": " +
                   (r.classifies ? "test accuracy " + format_number("%.2f", 100 * ev.accuracy) + "%, " : std::string()) +
                   "test loss " + format_number("%.4f", ev.loss));
  }
  Trainer& t_;
  Progress& progress_;
  TrainResult& result_;
};

// The run's records at its end: the trace, the op profile, memory per rank.
class RunRecords final : public TrainingObserver {
 public:
  explicit RunRecords(Trainer& t) : t_(t) {}
  void ending(const RunView&, bool) override { t_.write_records(); }

 private:
  Trainer& t_;
};

// One step's totals into the window (a template: StepTotals is the Trainer's own).
template <class Totals>
void add(WindowMetrics& w, const Totals& t) {
  w.loss += t.loss, w.correct += t.correct, w.exposed += t.exposed_s, w.staleness += t.read_staleness, ++w.steps;
  w.grad_norm += t.grad_norm, w.p2p_bytes += t.p2p_bytes, w.data_wait += t.data_wait_s, w.bad_samples += t.bad_samples;
  w.summed += t.steps;
}

}  // namespace

double WindowMetrics::mean_loss() const { return loss / static_cast<double>(std::max<std::int64_t>(1, summed)); }
double WindowMetrics::accuracy() const { return correct / static_cast<double>(std::max<std::int64_t>(1, summed)); }

double Trainer::wall_s() const { return wall_offset_s_ + seconds_since(run_start_); }

RunView Trainer::view() const {
  RunView v{config_, run_dir_};
  v.rank = rank_, v.leader = leader();
  v.step = step_, v.total_steps = total_steps_;
  v.steps_per_epoch = sampler_->steps_per_epoch();
  v.epoch = step_ > 0 ? sampler_->epoch_of(step_ - 1) : 0;
  v.classifies = classifies_;
  v.wall_s = wall_s();
  return v;
}

void Trainer::add_observer(std::unique_ptr<TrainingObserver> observer) { added_.push_back(std::move(observer)); }

void Trainer::write_records() {
  write_trace();
  write_op_profile();
  record_memory();
}

// See Note [Loader]: each rank lists the samples it replaced in
// bad_samples.rank<R>.jsonl; rank 0 says how many there were in all.
void Trainer::report_bad_samples(Progress& progress, double total) {
  const auto bad = loader_->bad();
  if (!bad.empty()) {
    std::string lines;
    for (const auto& b : bad)
      lines += nlohmann::json{{"sample", b.id}, {"replaced_by", b.replaced_by}, {"error", b.error}}.dump() + "\n";
    write_file_atomic(run_dir_ + "/bad_samples.rank" + std::to_string(rank_) + ".jsonl", lines);
  }
  if (total > 0)
    progress.line(format_number("%.0f", total) + " bad samples were replaced (data.on_bad_sample: skip); each rank's "
                  "are listed in " + run_dir_ + "/bad_samples.rank<R>.jsonl");
}

TrainResult Trainer::run_loop(std::optional<std::int64_t> stop_after) {
  TrainResult result;
  ProgressReport progress(out_, leader());
  MetricsLog metrics(*this, result);
  Checkpoints checkpoints(*this);
  Evaluations evaluations(*this, progress.progress(), result);
  RunRecords records(*this);
  std::optional<FaultInjection> faults;  // only when a test asks for it (see Note [Test hooks])
  std::vector<TrainingObserver*> observers;
  if (const auto after = kill_after_step_of(rank_); after >= 0) observers.push_back(&faults.emplace(after));
  observers.insert(observers.end(), {&progress, &metrics, &checkpoints, &evaluations, &records});
  for (const auto& o : added_) observers.push_back(o.get());
  progress.progress().line(banner());
  run_start_ = Clock::now();
  WindowMetrics window;
  auto window_start = Clock::now();
  bool interrupted = false;
  double bad_total = 0;  // every rank's samples replaced (data.on_bad_sample: skip)
  while (step_ < total_steps_ && !interrupted) {
    if (stop_after && step_ >= *stop_after) return result;  // as a crash would: no last checkpoint
    const double lr = optim::learning_rate(config_.optimizer, step_, total_steps_);
    executor::TraceLog trace;
    trace.device = clock_.get();
    const auto t = step(lr, trace);
    trace_.push_back(std::move(trace));
    if (trace_.size() > static_cast<std::size_t>(executor::kTracedSteps)) trace_.pop_front();
    ++step_;
    if (config_.train.profile_ops && !op_profile_ && step_ < total_steps_) {  // the first step warms up
      op_profile_ = std::make_unique<nn::OpProfile>();
      profiled_from_ = step_;
    }
    add(window, t);
    bad_total += t.bad_samples;
    window_chunk_reads_.resize(t.chunk_reads.size());
    for (std::size_t i = 0; i < t.chunk_reads.size(); ++i) window_chunk_reads_[i] += t.chunk_reads[i];
    const double window_s = seconds_since(window_start);
    const auto run = view();
    const StepEvent done{run, lr, window, window_s > 0 ? window.steps / window_s : 0,
                         step_ % config_.train.log_every == 0 || step_ == total_steps_};
    for (auto* o : observers) o->step_done(done);
    if (done.window_ends) window = WindowMetrics{}, window_start = Clock::now();
    interrupted = t.stop;
  }
  const auto run = view();
  for (auto* o : observers) o->ending(run, interrupted);
  report_bad_samples(progress.progress(), bad_total);
  progress.closing(view(), interrupted);
  result.steps = step_;
  result.interrupted = interrupted;
  return result;
}

}  // namespace trident::runtime
