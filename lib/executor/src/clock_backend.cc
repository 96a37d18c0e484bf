// StageExecutor::ClockBackend: a stage's actions on the emulated clock
// (Notes [Emulation] in stage_executor.h and [Action backends]).
#include <algorithm>
#include <chrono>
#include <thread>

#include "stage_parts.h"

namespace trident::executor {

StageExecutor::ClockBackend::ClockBackend(StageExecutor& stage, Emulation emulation)
    : Backend(stage), emulation_(std::move(emulation)) {
  if (emulation_.costs.size() != static_cast<int>(s_.plan_.stages.size()))
    throw PipelineError("emulation: the stage graph has " + std::to_string(emulation_.costs.size()) +
                        " stages but the plan " + std::to_string(s_.plan_.stages.size()));
  if (s_.replicas() > 1) {
    auto devices = s_.plan_.stages[s_.stage_].devices;
    std::sort(devices.begin(), devices.end());
    replicas_ = s_.world_.subgroup(devices, "emulated-stage" + std::to_string(s_.stage_));
  }
}

std::pair<std::int64_t, std::int64_t> StageExecutor::ClockBackend::act(Exchange& x, Pass& p, bool backward, int m,
                                                                       const std::string& action, double seconds) {
  const int d = backward ? 1 : 0;
  const auto t0 = now_us();
  std::int64_t arrive = 0;
  const auto& in_pieces = *x.dir[d].pieces;
  for (std::size_t i = 0; i < in_pieces.size(); ++i) {
    if ((backward && !s_.crossings_[in_pieces[i].k].differentiable) || !in_pieces[i].in(m)) continue;
    arrive = std::max(arrive, static_cast<std::int64_t>(s_.take(x, d, i, m)[0][0].item<double>()));
  }
  std::this_thread::sleep_until(std::chrono::system_clock::time_point(std::chrono::microseconds(arrive)));
  const auto t1 = now_us();
  if (p.trace) p.trace->add_wait("wait " + action, t0, t1);
  std::this_thread::sleep_for(std::chrono::microseconds(scaled_us(seconds)));
  const auto t2 = now_us();
  if (p.trace) p.trace->add(action, backward ? "backward" : "forward", kComputeLane, t1, t2);
  // Send on: one channel per stage pair and direction, as in the simulator.
  std::map<std::pair<int, int>, std::int64_t> arrival;  // per edge, this micro-batch
  for (const auto& piece : backward ? x.layout->in : x.layout->out) {
    const auto& c = s_.crossings_[piece.k];
    if ((backward && !c.differentiable) || !piece.in(m)) continue;
    const auto key = std::make_pair(c.from, c.to);
    if (!arrival.count(key)) {
      double transfer = 0;
      for (const auto& e : emulation_.costs.edges)
        if (e.from == c.from && e.to == c.to) transfer = backward ? e.backward_s : e.forward_s;
      auto& free_at = channel_[{c.from, c.to, d}];
      const auto start = std::max(now_us(), free_at);
      arrival[key] = free_at = start + scaled_us(transfer);
    }
    auto msg = torch::zeros({piece.hi - piece.lo, 1}, torch::kFloat64);
    msg[0][0] = static_cast<double>(arrival[key]);
    s_.post_send(x, piece, msg, m, d);
  }
  return {t1, t2};
}

// W: the modelled weight gradients' time; nothing moves.
void StageExecutor::ClockBackend::weight(Pass& p, int, bool last, const std::string& action) {
  const auto t0 = now_us();
  std::this_thread::sleep_for(std::chrono::microseconds(scaled_us(mine().weight_s)));
  const auto t1 = now_us();
  if (p.trace) p.trace->add(action, "weight", kComputeLane, t0, t1);
  if (last) last_backward_ = {t0, t1};
}

// After the last backward the stage's modelled gradient-sync tasks run one
// after another, each from its ready point in that backward; the replicas
// wait until the last ends, then meet in a one-element all-reduce; then the
// modelled optimizer step.
void StageExecutor::ClockBackend::finish(Pass& p) {
  const auto [b_start, b_end] = last_backward_;
  std::int64_t chain = 0, finish = b_end;
  for (const auto& task : emulation_.costs.stages[s_.stage_].sync) {
    const auto ready = b_start + static_cast<std::int64_t>(task.ready_fraction * static_cast<double>(b_end - b_start));
    const auto start = std::max(ready, chain);
    chain = start + scaled_us(task.seconds);
    if (p.trace && task.seconds > 0) p.trace->add("sync " + task.name, "sync", kCommLane, start, chain);
    finish = std::max(finish, chain);
  }
  channel_.clear();
  const auto t0 = now_us();
  std::this_thread::sleep_until(std::chrono::system_clock::time_point(std::chrono::microseconds(finish)));
  if (replicas_) {
    auto one = torch::ones({1});
    std::vector<at::Tensor> v{one};
    try {
      replicas_->pg().allreduce(v)->wait(replicas_->timeout());
    } catch (const std::exception& e) {
      const auto lost = replicas_->diagnose();
      throw comm::CommError("the replicas' modelled gradient sync failed" + (lost.empty() ? "" : " (" + lost + ")") +
                                ": " + first_line(e),
                            ErrorKind::kFailure, s_.context());
    }
  }
  if (p.trace) p.trace->add_wait("wait for sync", t0, now_us());
  // Then the modelled optimizer step, as the simulator has it.
  if (const double opt = emulation_.costs.stages[s_.stage_].optimizer_s; opt > 0) {
    const auto t1 = now_us();
    std::this_thread::sleep_for(std::chrono::microseconds(scaled_us(opt)));
    if (p.trace) p.trace->add("optimizer", "optimizer", kComputeLane, t1, now_us());
  }
}

}  // namespace trident::executor
