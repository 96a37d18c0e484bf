#include "trident/schedule/delayed.h"

#include <algorithm>

namespace trident::schedule {

StageActions one_f_one_b(int warmup, int m) {
  warmup = std::clamp(warmup, 0, m);
  StageActions a;
  for (int i = 0; i < warmup; ++i) a.push_back({Action::Kind::kForward, i});
  for (int i = 0; i < m - warmup; ++i) {
    a.push_back({Action::Kind::kForward, warmup + i});
    a.push_back({Action::Kind::kBackward, i});
  }
  for (int i = m - warmup; i < m; ++i) a.push_back({Action::Kind::kBackward, i});
  return a;
}

namespace {

DelayedStage delay_stage(const StageActions& list, int count, StageId st) {
  int forwards = 0;
  while (forwards < static_cast<int>(list.size()) && list[forwards].kind == Action::Kind::kForward) ++forwards;
  const int w = std::max(0, forwards - 1);
  if (list != one_f_one_b(w, count))
    throw ScheduleError("stage " + std::to_string(st) + ": parallel.pipeline_delay needs a 1F1B list (warm-up forwards, "
                        "then a forward and a backward in turn, then backwards; schedule 1f1b or graph-1f1b), got '" +
                        to_string(list) + "'");
  DelayedStage d;
  d.count = count;
  d.warmup.assign(list.begin(), list.begin() + w);
  d.drain.assign(list.begin() + w, list.end());
  for (const auto& a : d.drain) {
    if (a.kind == Action::Kind::kBackward && a.micro_batch >= count - w)
      d.body.push_back({Action::Kind::kForward, count + a.micro_batch - (count - w)});
    d.body.push_back(a);
  }
  return d;
}

// Micro-batch m of step s: s·count + m; the body's next-step micro-batches fall in step s + 1.
StageActions renumbered(const StageActions& list, int step, int count) {
  StageActions out = list;
  for (auto& a : out) a.micro_batch += step * count;
  return out;
}

// The early forwards of every stage need only early forwards of its
// predecessors (see Note [Delayed pipelines]): a step needs no later step.
void check_early_rows(const StageGraph& graph, const std::vector<DelayedStage>& d) {
  for (const auto& e : graph.edges) {
    const int early = static_cast<int>(d[e.to].warmup.size());
    if (!early) continue;
    const auto [first, last] = overlapping(early - 1, d[e.to].count, d[e.from].count);
    (void)first;
    if (last > static_cast<int>(d[e.from].warmup.size()))
      throw ScheduleError("stage " + std::to_string(e.to) + " forwards " + std::to_string(early) +
                          " micro-batches of the next mini-batch early, but its predecessor stage " +
                          std::to_string(e.from) + " only " + std::to_string(d[e.from].warmup.size()) +
                          "; parallel.pipeline_delay needs each stage to warm up with at least the rows of its successors "
                          "(schedule 1f1b or graph-1f1b)");
  }
}

}  // namespace

std::vector<DelayedStage> delay_schedule(const StageGraph& graph, const Schedule& sync) {
  std::vector<DelayedStage> d;
  for (StageId st = 0; st < graph.size(); ++st) d.push_back(delay_stage(sync.stages.at(st), sync.count(st), st));
  check_early_rows(graph, d);
  validate(graph, unroll(sync, d, 3));  // no deadlock over steps, in-flight counts
  return d;
}

Schedule unroll(const Schedule& sync, const std::vector<DelayedStage>& delayed, int steps) {
  Schedule s{sync.name + " delayed", sync.micro_batches * steps, std::vector<StageActions>(delayed.size()), {}};
  for (std::size_t st = 0; st < delayed.size(); ++st) {
    const auto& d = delayed[st];
    auto& list = s.stages[st];
    list = d.warmup;
    for (int step = 0; step < steps; ++step) {
      const auto part = renumbered(step + 1 < steps ? d.body : d.drain, step, d.count);
      list.insert(list.end(), part.begin(), part.end());
    }
    s.counts.push_back(d.count * steps);
  }
  return s;
}

SimResult simulate_delayed(const StageGraph& graph, const Schedule& sync, int mini_batch) {
  const auto delayed = delay_schedule(graph, sync);
  constexpr int kSteps = 3;
  const auto a = simulate(graph, unroll(sync, delayed, kSteps), mini_batch * kSteps);
  const auto b = simulate(graph, unroll(sync, delayed, kSteps + 1), mini_batch * (kSteps + 1));
  auto r = simulate(graph, sync, mini_batch);
  double period = b.iteration_s - a.iteration_s;
  double busy = 0, devices = 0;
  for (StageId st = 0; st < graph.size(); ++st) {
    const auto& c = graph.stages[st];
    r.busy_s[st] = b.busy_s[st] - a.busy_s[st];
    double sync_s = 0;
    for (const auto& t : c.sync) sync_s += t.seconds;
    const double own = r.busy_s[st] + std::max(0.0, sync_s - c.backward_s) + c.optimizer_s;
    period = std::max(period, own);
    busy += r.busy_s[st] * c.replicas, devices += c.replicas;
  }
  r.iteration_s = period;
  r.samples_per_s = period > 0 ? mini_batch / period : 0;
  r.bubble_fraction = period > 0 && devices > 0 ? std::max(0.0, 1 - busy / (devices * period)) : 0;
  for (StageId st = 0; st < graph.size(); ++st) r.utilisation[st] = period > 0 ? r.busy_s[st] / period : 0;
  r.events.clear();
  return r;
}

}  // namespace trident::schedule
