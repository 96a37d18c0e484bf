// Trainer's step meets the other ranks: the replicas' gradient sync and the
// optimizer step (weight versions under a pipeline delay), and the step's
// totals summed over every rank (lagged under staleness or a delay).
#include <cmath>

#include "trident/base/text.h"
#include "trident/runtime/trainer.h"
#include "trident/sync/grad_sync.h"

namespace trident::runtime {

// The optimizer step for one parameter (or a PS block of it) at `lr`. By
// value: a PS server may apply it during backward or after apply() returns
// (see Note [Sharded parameter server], see Note [Staleness]).
// Under a pipeline delay it writes the new version around the parameters'
// version counters (Note [Weight versions]).
sync::GradSync::Update Trainer::update_at(double lr, double scale) const {
  sync::GradSync::Update update = [optimizer = optimizer_.get(), lr, scale](const std::string& name, torch::Tensor& p,
                                                                          const torch::Tensor& grad) {
    optimizer->step(name, p, scale == 1 ? grad : grad * scale, lr);
  };
  return stage_->delayed() ? executor::WeightVersions::unseen(std::move(update)) : update;
}

void Trainer::arm_sync(double lr) {
  if (!sync_) return;
  sync_armed_us_ = executor::now_us();
  // A PS server may update during backward, unless the update waits for the
  // global norm (see Note [Global gradient norm]) or writes a new weight
  // version (Note [Weight versions]: it begins after the backward).
  if (config_.optimizer.clip_norm <= 0 && !stage_->delayed()) sync_->set_update(update_at(lr));
  sync_->arm();
}

Trainer::Clip Trainer::clip() {
  const double limit = config_.optimizer.clip_norm;
  if (limit <= 0) return {};
  double mine = tied_->grad_square_sum();
  if (sync_) {
    mine += sync_->grad_square_sum();
  } else {  // one replica: this rank holds the stage's whole gradient
    for (const auto& [name, p] : stage_->params())
      if (!tied_->names().count(name)) mine += sync::square_sum(p.grad());
  }
  Clip c;
  c.norm = std::sqrt(sum_over_ranks({mine})[0]);
  c.scale = std::min(1.0, limit / (c.norm + 1e-6));  // torch's clip_grad_norm_
  return c;
}

Trainer::Stepped Trainer::sync_and_step(double lr, executor::TraceLog& trace) {
  const auto& params = stage_->params();
  if (tied_ && !tied_->empty()) {
    const auto t0 = trace.stamp();
    tied_->all_reduce();
    trace.add_stamped("tied parameters", "wait", t0, trace.stamp());
  }
  if (!sync_) {
    const auto t0 = trace.stamp();
    const auto c = clip();
    if (c.scale != 1)
      for (const auto& [name, p] : params)
        if (p.grad().defined()) p.grad().mul_(c.scale);
    if (stage_->delayed()) {  // See Note [Weight versions]: around the version counters
      const auto update = update_at(lr);
      for (auto [name, p] : params)
        if (p.grad().defined()) update(name, p, p.grad()), p.mutable_grad().zero_();
    } else {
      optimizer_->apply(params, lr);
    }
    trace.add_stamped("optimizer", "optimizer", t0, trace.stamp());
    return {0, c.norm};
  }
  const auto t0 = trace.stamp();
  sync_->finish();
  const auto t1 = trace.stamp();
  trace.add_stamped("wait for sync", "wait", t0, t1);
  const auto c = clip();
  sync_->apply(update_at(lr, c.scale));
  if (stage_->delayed()) sync_->flush();  // PS pulls land in the new version's buffer (Note [Weight versions])
  for (const auto& e : sync_->stats().events)
    trace.add(e.name, "sync", executor::kCommLane, sync_armed_us_ + static_cast<std::int64_t>(e.start_s * 1e6),
              sync_armed_us_ + static_cast<std::int64_t>(e.end_s * 1e6));
  for (const auto& [name, p] : params)  // the replica sync left them (see Note [Tied parameters])
    if (tied_->names().count(name)) {
      auto weights = p;  // a handle: the optimizer updates the parameter itself
      update_at(lr, c.scale)(name, weights, p.grad());
    }
  for (const auto& [name, p] : params)
    if (p.grad().defined()) p.mutable_grad().zero_();
  trace.add_stamped("optimizer", "optimizer", t1, trace.stamp());
  return {sync_->stats().exposed_s, c.norm};
}

// Note [Lagged step totals]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// Every step sums the loss, the correct count
// and the stop flag over the ranks — a collective every rank joins, which
// under bounded staleness would hold the fast ranks to the slowest every
// step (see Note [Staleness] in sync/grad_sync.h). So with staleness s the sum
// of step t is started asynchronously and read at step t + s (every rank at
// the same step, so all stop together), and all are read at the last step.
// A delayed pipeline (Note [Delayed pipelines] in schedule/delayed.h) lags
// its sums by one step alike: its steps meet at no barrier.
// The step's sums: loss, correct, stop, p2p bytes, bad samples; then the chunk reads.
constexpr std::size_t kFixedSums = 5;

Trainer::StepTotals Trainer::sum_step(std::vector<double> values) {
  // A delayed pipeline's steps meet at no barrier either (Note [Delayed pipelines]).
  const auto s = std::max<std::int64_t>(config_.parallel.staleness, stage_->delayed() ? 1 : 0);
  StepTotals t;
  if (s == 0 || size_ == 1) {
    const auto v = sum_over_ranks(std::move(values));
    t.loss = v[0], t.correct = v[1], t.stop = v[2] > 0, t.p2p_bytes = v[3], t.bad_samples = v[4];
    t.chunk_reads.assign(v.begin() + kFixedSums, v.end());
    return t;
  }
  PendingSum p{step_, torch::tensor(values, torch::kFloat64), {}};
  std::vector<at::Tensor> v{p.values};
  p.work = group_->pg().allreduce(v);
  pending_sums_.push_back(std::move(p));
  t.steps = 0;
  const bool last = step_ + 1 >= total_steps_;
  while (!pending_sums_.empty() && (last || static_cast<std::int64_t>(pending_sums_.size()) > s)) {
    auto& front = pending_sums_.front();
    try {
      front.work->wait(group_->timeout());
    } catch (const std::exception& e) {
      const auto lost = group_->diagnose();
      throw comm::CommError("step " + std::to_string(front.step) + ": all-reduce of the loss failed" +
                                (lost.empty() ? "" : " (" + lost + ")") + ": " + first_line(e),
                            ErrorKind::kFailure, where());
    }
    const auto* d = front.values.data_ptr<double>();
    t.loss += d[0], t.correct += d[1], t.stop = t.stop || d[2] > 0, t.p2p_bytes += d[3], t.bad_samples += d[4], ++t.steps;
    t.chunk_reads.resize(static_cast<std::size_t>(front.values.numel() - kFixedSums));
    for (std::size_t i = 0; i < t.chunk_reads.size(); ++i) t.chunk_reads[i] += d[kFixedSums + i];
    pending_sums_.pop_front();
  }
  return t;
}

}  // namespace trident::runtime
