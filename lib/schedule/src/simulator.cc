#include "trident/schedule/simulator.h"

#include <algorithm>
#include <limits>

#include "trident/schedule/delayed.h"
#include "walk.h"

namespace trident::schedule {
namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

// One simulated iteration's bookkeeping, shared by both timing paths: when
// each micro-batch's activations and gradients arrive, the edges' channels,
// and the events. A path decides when compute spans start and end; this
// class does the rest.
class Iteration {
 public:
  // See Note [Micro-batch ratios]: activations arrive per micro-batch of the
  // sending stage, gradients per micro-batch of the stage sending them back.
  Iteration(const StageGraph& g, const Schedule& s, SimResult& r)
      : g_(g), s_(s), r_(r), in_(g.size()), out_(g.size()), arrive_f_(g.edges.size()), arrive_b_(g.edges.size()),
        fwd_end_(g.size()), chan_f_(g.edges.size(), 0), chan_b_(g.edges.size(), 0), last_b_(g.size(), {0, 0}),
        split_(g.size()) {
    for (int e = 0; e < static_cast<int>(g.edges.size()); ++e) {
      out_[g.edges[e].from].push_back(e);
      in_[g.edges[e].to].push_back(e);
      arrive_f_[e].assign(s.count(g.edges[e].from), kNever);
      arrive_b_[e].assign(s.count(g.edges[e].to), kNever);
    }
    for (StageId st = 0; st < g.size(); ++st) {
      fwd_end_[st].assign(s.count(st), kNever);
      split_[st].assign(s.count(st), 0);
      for (const auto& a : s.stages[st])
        if (a.kind == Action::Kind::kWeight) split_[st][a.micro_batch] = 1;
    }
    r_.busy_s.assign(g.size(), 0);
  }

  // See Note [Split backward]: a split micro-batch's B leaves weight_s to its W.
  double duration(StageId st, const Action& a) const {
    const auto& c = g_.stages[st];
    switch (a.kind) {
      case Action::Kind::kForward: return c.forward_s;
      case Action::Kind::kBackward: return split_[st][a.micro_batch] ? c.backward_s - c.weight_s : c.backward_s;
      case Action::Kind::kWeight: return c.weight_s;
      case Action::Kind::kStep: return a.micro_batch == kStepBetween ? c.optimizer_s : 0;  // Note [Delayed pipelines]
    }
    return 0;
  }

  // When everything `a` needs is here; kNever while something is not yet sent.
  double inputs_at(StageId st, const Action& a) const {
    const int mb = a.micro_batch;
    auto latest = [&](const std::vector<double>& arrive, StageId other, double at) {
      const auto [first, last] = overlapping(mb, s_.count(st), s_.count(other));
      for (int o = first; o < last; ++o) at = std::max(at, arrive[o]);
      return at;
    };
    double at = 0;
    if (a.kind == Action::Kind::kWeight || a.kind == Action::Kind::kStep) return at;  // after its own B: program order
    if (a.kind == Action::Kind::kForward) {
      for (int e : in_[st]) at = latest(arrive_f_[e], g_.edges[e].from, at);
      return at;
    }
    at = fwd_end_[st][mb];
    for (int e : out_[st]) at = latest(arrive_b_[e], g_.edges[e].to, at);
    return at;
  }

  // A compute span of `a` ran from start to end: record it and send its outputs.
  // The weight gradients are complete after the last backward that makes
  // them: a whole B, or a W (Note [Split backward]).
  void done(StageId st, const Action& a, double start, double end) {
    const int mb = a.micro_batch;
    if (a.kind == Action::Kind::kStep) return;
    r_.busy_s[st] += duration(st, a);
    r_.events.push_back({st, SimEvent::Lane::kCompute, to_string(a), mb, start, end});
    if (a.kind == Action::Kind::kForward) {
      fwd_end_[st][mb] = end;
      for (int e : out_[st]) send(st, e, end, g_.edges[e].forward_s, chan_f_, arrive_f_, mb, "F", g_.edges[e].to);
      return;
    }
    if (a.kind == Action::Kind::kWeight || !split_[st][mb]) last_b_[st] = {start, end};
    if (a.kind == Action::Kind::kBackward)
      for (int e : in_[st]) send(st, e, end, g_.edges[e].backward_s, chan_b_, arrive_b_, mb, "B", g_.edges[e].from);
  }

  // After the stage's last action (at `free`): its gradient sync (WFBP: a
  // task starts once its gradient is ready in the last backward) and its
  // sends must end before the optimizer step starts.
  double optimizer_ready(StageId st, double free) {
    double ready = free, chan = 0;
    const auto [b_start, b_end] = last_b_[st];
    for (const auto& task : g_.stages[st].sync) {
      const double start = std::max(b_start + task.ready_fraction * (b_end - b_start), chan);
      chan = start + task.seconds;
      if (task.seconds > 0) r_.events.push_back({st, SimEvent::Lane::kSync, "sync " + task.name, -1, start, chan});
      ready = std::max(ready, chan);
    }
    for (int e : out_[st]) ready = std::max(ready, chan_f_[e]);
    for (int e : in_[st]) ready = std::max(ready, chan_b_[e]);
    return ready;
  }

  void optimizer(StageId st, double start, double end) {
    if (end > start) r_.events.push_back({st, SimEvent::Lane::kCompute, "optimizer", -1, start, end});
  }

 private:
  void send(StageId st, int e, double ready, double seconds, std::vector<double>& chan,
            std::vector<std::vector<double>>& arrive, int mb, const char* dir, StageId to) {
    const double start = std::max(ready, chan[e]);
    chan[e] = arrive[e][mb] = start + seconds;
    if (seconds > 0)
      r_.events.push_back({st, SimEvent::Lane::kSend,
                           std::string("send ") + dir + std::to_string(mb) + " -> s" + std::to_string(to), mb, start,
                           start + seconds});
  }

  const StageGraph& g_;
  const Schedule& s_;
  SimResult& r_;
  std::vector<std::vector<int>> in_, out_;
  std::vector<std::vector<double>> arrive_f_, arrive_b_, fwd_end_;
  std::vector<double> chan_f_, chan_b_;
  std::vector<std::pair<double, double>> last_b_;  // the span of the last backward that made weight gradients
  std::vector<std::vector<char>> split_;           // by stage and micro-batch: has a W
};

// Each stage on its own cores: an action starts as soon as its stage is free
// and its inputs are here, and takes its own duration. Returns each stage's
// finish time.
std::vector<double> run_dedicated(const StageGraph& g, const Schedule& s, Iteration& it) {
  std::vector<double> free_at(g.size(), 0);
  detail::Walk(g, s).run([&](StageId st, const Action& a) {
    const double start = std::max(free_at[st], it.inputs_at(st, a));
    free_at[st] = start + it.duration(st, a);
    it.done(st, a, start, free_at[st]);
  });
  for (StageId st = 0; st < g.size(); ++st) {
    const double start = it.optimizer_ready(st, free_at[st]);
    free_at[st] = start + g.stages[st].optimizer_s;
    it.optimizer(st, start, free_at[st]);
  }
  return free_at;
}

// See Note [Shared cores]: an event-driven run in which busy replicas share their
// node's cores. Between two events every rate is constant.
class SharedRun {
 public:
  SharedRun(const StageGraph& g, const Schedule& s, Iteration& it) : g_(g), s_(s), it_(it), st_(g.size()) {}

  std::vector<double> run() {
    double now = 0;
    while (true) {
      for (StageId st = 0; st < g_.size(); ++st) try_start(st, now);
      const auto rates = current_rates();
      double next = kNever;
      for (StageId st = 0; st < g_.size(); ++st) next = std::min(next, next_event(st, now, rates[st]));
      if (next == kNever) break;
      for (StageId st = 0; st < g_.size(); ++st) advance(st, now, next, rates[st]);
      now = next;
    }
    std::vector<double> finish;
    for (const auto& st : st_) finish.push_back(st.finish);
    return finish;
  }

 private:
  enum class Phase { kActions, kComputing, kBeforeOptimizer, kOptimizing, kDone };
  struct State {
    Phase phase = Phase::kActions;
    std::size_t pos = 0;       // the next action
    double left = 0;           // seconds of work left at full speed
    double start = 0;          // of the current span
    double optimizer_at = 0;   // when the optimizer may start
    double finish = 0;
  };

  void try_start(StageId st, double now) {
    State& x = st_[st];
    const auto& actions = s_.stages[st];
    if (x.phase == Phase::kActions && x.pos == actions.size()) {
      x.phase = Phase::kBeforeOptimizer;
      x.optimizer_at = it_.optimizer_ready(st, now);
    }
    if (x.phase == Phase::kActions && it_.inputs_at(st, actions[x.pos]) <= now) {
      x.phase = Phase::kComputing, x.start = now, x.left = it_.duration(st, actions[x.pos]);
    } else if (x.phase == Phase::kBeforeOptimizer && x.optimizer_at <= now) {
      x.phase = Phase::kOptimizing, x.start = now, x.left = g_.stages[st].optimizer_s;
    }
  }

  bool busy(const State& x) const { return x.phase == Phase::kComputing || x.phase == Phase::kOptimizing; }

  int node(StageId st, int replica) const {
    const auto& nodes = g_.stages[st].nodes;
    return replica < static_cast<int>(nodes.size()) ? nodes[replica] : 0;
  }

  // Each busy stage's speed: its slowest replica's share of its node's cores.
  std::vector<double> current_rates() const {
    std::vector<int> threads;
    for (StageId st = 0; st < g_.size(); ++st) {
      if (!busy(st_[st])) continue;
      for (int r = 0; r < g_.stages[st].replicas; ++r) {
        const int n = node(st, r);
        if (n >= static_cast<int>(threads.size())) threads.resize(n + 1, 0);
        threads[n] += g_.stages[st].threads;
      }
    }
    std::vector<double> rates(g_.size(), 1.0);
    for (StageId st = 0; st < g_.size(); ++st)
      for (int r = 0; busy(st_[st]) && r < g_.stages[st].replicas; ++r)
        rates[st] = std::min(rates[st], g_.speed(threads[node(st, r)], g_.stages[st].threads));
    return rates;
  }

  double next_event(StageId st, double now, double rate) const {
    const State& x = st_[st];
    if (busy(x)) return now + x.left / rate;
    if (x.phase == Phase::kBeforeOptimizer) return x.optimizer_at;
    if (x.phase == Phase::kActions) {
      const double at = it_.inputs_at(st, s_.stages[st][x.pos]);
      return at > now ? at : kNever;  // not yet sent: a later event sends it
    }
    return kNever;
  }

  void advance(StageId st, double now, double next, double rate) {
    State& x = st_[st];
    if (!busy(x)) return;
    x.left -= (next - now) * rate;
    if (x.left > 1e-12 * std::max(1.0, next)) return;
    if (x.phase == Phase::kComputing) {
      it_.done(st, s_.stages[st][x.pos++], x.start, next);
      x.phase = Phase::kActions;
    } else {
      it_.optimizer(st, x.start, next);
      x.phase = Phase::kDone, x.finish = next;
    }
  }

  const StageGraph& g_;
  const Schedule& s_;
  Iteration& it_;
  std::vector<State> st_;
};

}  // namespace

SimResult simulate(const StageGraph& g, const Schedule& s, int mini_batch) {
  const auto check = validate(g, s);
  const int n = g.size();
  SimResult r;
  Iteration it(g, s, r);
  const auto finish = g.oversubscribed() ? SharedRun(g, s, it).run() : run_dedicated(g, s, it);
  const double iteration = *std::max_element(finish.begin(), finish.end()) + g.step_s;
  r.iteration_s = iteration;
  r.samples_per_s = iteration > 0 ? mini_batch / iteration : 0;
  r.depth = g.depth();
  r.in_flight = check.in_flight;
  double busy = 0, devices = 0;
  for (StageId st = 0; st < n; ++st) {
    const auto& c = g.stages[st];
    r.utilisation.push_back(iteration > 0 ? r.busy_s[st] / iteration : 0);
    r.peak_memory_bytes.push_back(c.static_bytes + check.in_flight[st] * c.activation_bytes);
    busy += r.busy_s[st] * c.replicas;
    devices += c.replicas;
  }
  r.bubble_fraction = iteration > 0 ? 1 - busy / (iteration * devices) : 0;
  return r;
}

nlohmann::json chrome_trace(const StageGraph& g, const SimResult& r) {
  auto events = nlohmann::json::array();
  static const char* lanes[] = {"compute", "send", "gradient sync"};
  for (StageId st = 0; st < g.size(); ++st) {
    const auto& c = g.stages[st];
    events.push_back({{"name", "process_name"},
                      {"ph", "M"},
                      {"pid", st},
                      {"args", {{"name", "stage " + std::to_string(st) + " " + c.name + " (x" +
                                                 std::to_string(c.replicas) + ")"}}}});
    events.push_back({{"name", "process_sort_index"}, {"ph", "M"}, {"pid", st}, {"args", {{"sort_index", st}}}});
    for (int lane = 0; lane < 3; ++lane)
      events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", st}, {"tid", lane}, {"args", {{"name", lanes[lane]}}}});
  }
  for (const auto& e : r.events) {
    nlohmann::json ev{{"name", e.name},
                      {"ph", "X"},
                      {"pid", e.stage},
                      {"tid", static_cast<int>(e.lane)},
                      {"ts", e.start * 1e6},
                      {"dur", (e.end - e.start) * 1e6}};
    if (e.micro_batch >= 0) ev["args"] = {{"micro_batch", e.micro_batch}};
    events.push_back(std::move(ev));
  }
  return {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
}

}  // namespace trident::schedule
