// Trainer::run_loop and the observers around it.
//
// Note [Training events]: the loop only runs steps — learning rate, step,
// trace — and keeps the window of steps since the last metrics line; what
// happens around the steps is each an observer, told of every step done and
// of the run's end, in the order listed in run_loop: test fault injection,
// the progress line, metrics lines, periodic checkpoints, evaluations, and
// the run's records (trace, op profile, memory). Under bounded staleness a
// step's sums over the ranks may arrive later (Note [Lagged step totals]);
// observers see what has arrived.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>

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

}  // namespace

void Trainer::Window::add(const StepTotals& t) {
  loss += t.loss, correct += t.correct, exposed += t.exposed_s, staleness += t.read_staleness, ++steps;
  summed += t.steps;
}
double Trainer::Window::mean_loss() const { return loss / static_cast<double>(std::max<std::int64_t>(1, summed)); }
double Trainer::Window::accuracy(std::int64_t mini_batch) const {
  return correct / static_cast<double>(std::max<std::int64_t>(1, summed) * mini_batch);
}

double Trainer::wall_s() const { return wall_offset_s_ + seconds_since(run_start_); }

struct Trainer::StepDone {
  double lr = 0;
  const StepTotals& totals;
  const Window& window;  // the steps since the last metrics line, this one included
  double steps_per_s = 0;
  bool window_ends = false;  // a metrics line is due
};

class Trainer::Observer {
 public:
  virtual ~Observer() = default;
  virtual void step_done(const StepDone& done) { (void)done; }
  // The run ends, at its last step or interrupted by a stop request.
  virtual void ending(bool interrupted) { (void)interrupted; }
};

// TRIDENT_TEST_KILL_AT (kill_after_step_of).
class Trainer::FaultInjection final : public Observer {
 public:
  explicit FaultInjection(const Trainer& t) : t_(t) {}
  void step_done(const StepDone&) override {
    if (t_.step_ == kill_after_step_of(t_.rank_)) ::kill(::getpid(), SIGKILL);
  }

 private:
  const Trainer& t_;
};

// Rank 0's progress line (a bar on a terminal) and its closing line.
class Trainer::ProgressReport final : public Observer {
 public:
  explicit ProgressReport(const Trainer& t)
      : t_(t), progress_(t.leader() ? t.out_ : quiet_, t.leader() && Progress::is_terminal(t.out_)) {}
  Progress& progress() { return progress_; }
  void step_done(const StepDone& d) override {
    const auto& w = d.window;
    const auto mini = t_.config_.train.mini_batch;
    progress_.update(t_.step_, t_.total_steps_, d.steps_per_s,
                     "epoch " + std::to_string(t_.sampler_->epoch_of(t_.step_ - 1) + 1) + " loss " +
                         format_number("%.4f", w.mean_loss()) +
                         (t_.classifies_ ? " acc " + format_number("%.1f", 100 * w.accuracy(mini)) + "%" : std::string()),
                     d.window_ends);
  }
  void ending(bool interrupted) override {
    if (!interrupted) progress_.finish();
  }
  // After every observer's ending.
  void closing(bool interrupted) {
    if (interrupted)
      progress_.line("interrupted at step " + std::to_string(t_.step_) +
                     "; checkpoint written; continue with --resume " + t_.run_dir_);
    else
      progress_.line("done: " + std::to_string(t_.step_) + " steps in " + Progress::duration(t_.wall_s()) +
                     "; checkpoint " + checkpoint_dir(t_.run_dir_, t_.step_) + ", metrics " + t_.run_dir_ +
                     "/metrics.jsonl");
  }

 private:
  const Trainer& t_;
  std::ostringstream quiet_;  // only rank 0 reports progress
  Progress progress_;
};

// metrics.jsonl's training lines, one per window (train.log_every).
class Trainer::MetricsLog final : public Observer {
 public:
  MetricsLog(Trainer& t, TrainResult& result) : t_(t), result_(result) {}
  void step_done(const StepDone& d) override {
    if (!d.window_ends) return;
    result_.last_loss = d.window.mean_loss();
    t_.log_window(d.window, d.lr, d.steps_per_s, t_.wall_s());
  }

 private:
  Trainer& t_;
  TrainResult& result_;
};

// checkpoint.every, and the last checkpoint at the end or on a stop.
class Trainer::Checkpoints final : public Observer {
 public:
  explicit Checkpoints(Trainer& t) : t_(t) {}
  void step_done(const StepDone&) override {
    const auto every = t_.config_.checkpoint.every;
    if (every && t_.step_ % every == 0 && t_.step_ < t_.total_steps_) t_.save(t_.wall_s());
  }
  void ending(bool) override { t_.save(t_.wall_s()); }

 private:
  Trainer& t_;
};

// The test split after every epoch and at the end (train.eval).
class Trainer::Evaluations final : public Observer {
 public:
  Evaluations(Trainer& t, Progress& progress, TrainResult& result) : t_(t), progress_(progress), result_(result) {}
  void step_done(const StepDone&) override {
    const auto spe = t_.sampler_->steps_per_epoch();
    if (t_.config_.train.eval && t_.step_ % spe == 0 && t_.step_ < t_.total_steps_) run(t_.step_ / spe);
  }
  void ending(bool interrupted) override {
    const auto spe = t_.sampler_->steps_per_epoch();
    if (!interrupted && t_.config_.train.eval) run((t_.step_ + spe - 1) / spe);
  }

 private:
  void run(std::int64_t epoch) {
    const auto ev = t_.evaluate(t_.data_.test);
    if (t_.classifies_) result_.test_accuracy = ev.accuracy;
    result_.test_loss = ev.loss;
    nlohmann::json line{{"step", t_.step_}, {"epoch", epoch}, {"test_loss", ev.loss}, {"wall_s", t_.wall_s()}};
    if (t_.classifies_) line["test_accuracy"] = ev.accuracy;
    t_.append_metrics(line.dump());
    progress_.line("epoch " + std::to_string(epoch) + " step " + std::to_string(t_.step_) + ": " +
                   (t_.classifies_ ? "test accuracy " + format_number("%.2f", 100 * ev.accuracy) + "%, " : std::string()) +
                   "test loss " + format_number("%.4f", ev.loss));
  }
  Trainer& t_;
  Progress& progress_;
  TrainResult& result_;
};

// The run's records at its end: the trace, the op profile, memory per rank.
class Trainer::RunRecords final : public Observer {
 public:
  explicit RunRecords(Trainer& t) : t_(t) {}
  void ending(bool) override {
    t_.write_trace();
    t_.write_op_profile();
    t_.record_memory();
  }

 private:
  Trainer& t_;
};

TrainResult Trainer::run_loop(std::optional<std::int64_t> stop_after) {
  TrainResult result;
  std::optional<FaultInjection> faults;  // only when a test asks for it (Note [Test hooks])
  ProgressReport progress(*this);
  MetricsLog metrics(*this, result);
  Checkpoints checkpoints(*this);
  Evaluations evaluations(*this, progress.progress(), result);
  RunRecords records(*this);
  std::vector<Observer*> observers;
  if (kill_after_step_of(rank_) >= 0) observers.push_back(&faults.emplace(*this));
  observers.insert(observers.end(), {&progress, &metrics, &checkpoints, &evaluations, &records});
  progress.progress().line(banner());
  run_start_ = Clock::now();
  Window window;
  auto window_start = Clock::now();
  bool interrupted = false;
  while (step_ < total_steps_ && !interrupted) {
    if (stop_after && step_ >= *stop_after) return result;  // as a crash would: no last checkpoint
    const double lr = learning_rate(config_.optimizer, step_, total_steps_);
    TraceLog trace;
    trace.device = clock_.get();
    const auto t = step(lr, trace);
    trace_.push_back(std::move(trace));
    if (trace_.size() > static_cast<std::size_t>(kTracedSteps)) trace_.pop_front();
    ++step_;
    if (config_.train.profile_ops && !op_profile_ && step_ < total_steps_) {  // the first step warms up
      op_profile_ = std::make_unique<nn::OpProfile>();
      profiled_from_ = step_;
    }
    window.add(t);
    const double window_s = seconds_since(window_start);
    const StepDone done{lr, t, window, window_s > 0 ? window.steps / window_s : 0,
                        step_ % config_.train.log_every == 0 || step_ == total_steps_};
    for (auto* o : observers) o->step_done(done);
    if (done.window_ends) window = Window{}, window_start = Clock::now();
    interrupted = t.stop;
  }
  for (auto* o : observers) o->ending(interrupted);
  progress.closing(interrupted);
  result.steps = step_;
  result.interrupted = interrupted;
  return result;
}

}  // namespace trident::runtime
