#include "trident/schedule/delayed.h"

#include <algorithm>
#include <optional>

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

DelayedStage delay_stage(const StageActions& list, int count, StageId stage, int early) {
  int forwards = 0;
  while (forwards < static_cast<int>(list.size()) && list[forwards].kind == Action::Kind::kForward) ++forwards;
  const int w = std::max(0, forwards - 1);
  if (list != one_f_one_b(w, count))
    throw ScheduleError("stage " + std::to_string(stage) + ": parallel.pipeline_delay needs a 1F1B list (warm-up forwards, "
                        "then a forward and a backward in turn, then backwards; schedule 1f1b or graph-1f1b), got '" +
                        to_string(list) + "'");
  early = early < 0 ? w : std::min(early, w);
  DelayedStage d;
  d.count = count;
  d.warmup.assign(list.begin(), list.begin() + early);
  d.drain.assign(list.begin() + early, list.end());
  for (const auto& a : d.drain) {
    if (a.kind == Action::Kind::kBackward && a.micro_batch >= count - early)
      d.body.push_back({Action::Kind::kForward, count + a.micro_batch - (count - early)});
    d.body.push_back(a);
  }
  return d;
}

namespace {

// Micro-batch m of step s: s·count + m; the body's next-step micro-batches fall in step s + 1.
StageActions renumbered(const StageActions& list, int step, int count) {
  StageActions out = list;
  for (auto& a : out) a.micro_batch += step * count;
  return out;
}

// The forwards a stage runs early (Note [Delayed pipelines]): its warm-up,
// less what its predecessors do not run early, so that a step needs no
// later step.
std::vector<int> early_forwards(const StageGraph& graph, const Schedule& sync, int cap) {
  std::vector<int> early(graph.size());
  const auto preds = graph.predecessors();
  for (StageId st : graph.topo_order()) {
    const auto& list = sync.stages.at(st);
    int forwards = 0;
    while (forwards < static_cast<int>(list.size()) && list[forwards].kind == Action::Kind::kForward) ++forwards;
    early[st] = std::max(0, forwards - 1);
    if (cap >= 0) early[st] = std::min(early[st], cap);
    for (StageId p : preds[st])
      while (early[st] > 0 && overlapping(early[st] - 1, sync.count(st), sync.count(p)).second > early[p]) --early[st];
  }
  return early;
}

}  // namespace

std::vector<DelayedStage> delay_schedule(const StageGraph& graph, const Schedule& sync, int cap) {
  std::vector<DelayedStage> d;
  for (StageId st = 0; st < graph.size(); ++st) delay_stage(sync.stages.at(st), sync.count(st), st);  // the form first
  const auto early = early_forwards(graph, sync, cap);
  for (StageId st = 0; st < graph.size(); ++st) d.push_back(delay_stage(sync.stages.at(st), sync.count(st), st, early[st]));
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
      if (step + 1 < steps) list.push_back({Action::Kind::kStep, kStepBetween});
    }
    s.counts.push_back(d.count * steps);
  }
  return s;
}

SimResult simulate_delayed(const StageGraph& graph, const Schedule& sync, int mini_batch, int cap) {
  const auto delayed = delay_schedule(graph, sync, cap);
  // Each stage ends its step with its gradient sync's tail beyond its last
  // backward and its optimizer step (the S between unrolled steps).
  StageGraph g = graph;
  for (auto& c : g.stages) {
    double sync_s = 0;
    for (const auto& t : c.sync) sync_s += t.seconds;
    c.optimizer_s += std::max(0.0, sync_s - c.backward_s);
    c.sync.clear();
  }
  g.step_s = 0;  // the loss sums are read a step later: no barrier
  constexpr int kSteps = 3;
  const auto a = simulate(g, unroll(sync, delayed, kSteps), mini_batch * kSteps);
  const auto b = simulate(g, unroll(sync, delayed, kSteps + 1), mini_batch * (kSteps + 1));
  auto r = simulate(graph, sync, mini_batch);
  const double period = b.iteration_s - a.iteration_s;
  double busy = 0, devices = 0;
  for (StageId st = 0; st < graph.size(); ++st) {
    r.busy_s[st] = b.busy_s[st] - a.busy_s[st];
    busy += r.busy_s[st] * graph.stages[st].replicas, devices += graph.stages[st].replicas;
  }
  r.iteration_s = period;
  r.samples_per_s = period > 0 ? mini_batch / period : 0;
  r.bubble_fraction = period > 0 && devices > 0 ? std::max(0.0, 1 - busy / (devices * period)) : 0;
  for (StageId st = 0; st < graph.size(); ++st) r.utilisation[st] = period > 0 ? r.busy_s[st] / period : 0;
  r.events = b.events;  // the unrolled steps: what `trident simulate --trace` and the report draw
  return r;
}

// See Note [Early forwards].
DelayedChoice choose_delayed(const StageGraph& graph, const Schedule& sync, int mini_batch) {
  for (StageId st = 0; st < graph.size(); ++st) delay_stage(sync.stages.at(st), sync.count(st), st);  // the form: else throw
  int most = 0;
  for (StageId st = 0; st < graph.size(); ++st) most = std::max(most, sync.count(st) - 1);
  std::vector<int> caps;  // every cap up to 8; beyond, halving (a step has at most so many micro-batches)
  for (int cap = most; cap >= 0; cap = cap > 8 ? cap / 2 : cap - 1) caps.push_back(cap);
  if (caps.back() != 0) caps.push_back(0);
  std::optional<DelayedChoice> best;
  for (int cap : caps) {
    try {
      auto r = simulate_delayed(graph, sync, mini_batch, cap);
      if (!best || r.iteration_s < best->result.iteration_s * (1 - 1e-9)) best = DelayedChoice{cap, std::move(r)};
    } catch (const ScheduleError&) {
      if (cap == 0) throw;  // cap 0 is the synchronous list: its error is the schedule's
    }
  }
  return *best;
}

}  // namespace trident::schedule
