// Zero-bubble schedules by list scheduling over the stage DAG (schedule.h,
// Note [Zero-bubble schedules]).
#include <algorithm>
#include <deque>
#include <limits>
#include <optional>

#include "trident/schedule/schedule.h"
#include "zero_bubble.h"

namespace trident::schedule::detail {
namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

// F, B (input gradients) and W of one micro-batch of a stage; unit times
// when the graph carries none (a schedule made before any costing).
struct Times {
  double f = 1, b = 1, w = 1;
};

std::vector<Times> stage_times(const StageGraph& g) {
  const bool costed = std::any_of(g.stages.begin(), g.stages.end(),
                                  [](const StageCost& c) { return c.forward_s > 0 || c.backward_s > 0; });
  std::vector<Times> t(g.size());
  if (!costed) return t;
  for (StageId st = 0; st < g.size(); ++st) {
    const auto& c = g.stages[st];
    t[st] = {c.forward_s, c.backward_s - c.weight_s, c.weight_s};
  }
  return t;
}

class ListScheduler {
 public:
  ListScheduler(const StageGraph& g, const std::vector<int>& counts, std::vector<int> limits, bool lookahead)
      : g_(g), counts_(counts), limits_(std::move(limits)), lookahead_(lookahead), times_(stage_times(g)), st_(g.size()),
        in_(g.size()), out_(g.size()) {
    for (int e = 0; e < static_cast<int>(g.edges.size()); ++e) {
      out_[g.edges[e].from].push_back(e);
      in_[g.edges[e].to].push_back(e);
    }
    for (StageId s = 0; s < g.size(); ++s) {
      st_[s].f_end.assign(counts[s], kNever);
      st_[s].b_end.assign(counts[s], kNever);
    }
  }

  std::vector<StageActions> run() {
    for (;;) {
      StageId best = -1;
      Choice pick;
      for (StageId s = 0; s < g_.size(); ++s) {
        const auto c = choose(s, lookahead_);
        if (c.kind && (best < 0 || c.start < pick.start)) best = s, pick = c;
      }
      for (StageId s = 0; best < 0 && s < g_.size(); ++s)  // every stage holds its W for a B: the first free takes it
        if (const auto c = choose(s, false); c.kind && (best < 0 || c.start < pick.start)) best = s, pick = c;
      if (best < 0) break;
      take(best, pick);
    }
    std::vector<StageActions> lists;
    for (StageId s = 0; s < g_.size(); ++s) {
      if (st_[s].list.size() != 3 * static_cast<std::size_t>(counts_[s]))
        throw ScheduleError("zero-bubble scheduling stalled at stage " + std::to_string(s) + " after " +
                            to_string(st_[s].list) + " (a bug: please report it with the stage graph)");
      lists.push_back(std::move(st_[s].list));
    }
    return lists;
  }

 private:
  struct Choice {
    std::optional<Action::Kind> kind;
    double start = kNever;
  };
  struct State {
    StageActions list;
    std::vector<double> f_end, b_end;
    int next_f = 0, next_b = 0, in_flight = 0;
    std::deque<int> pending_w;  // B done, W not yet
    double free = 0;
  };

  // When the latest of `arrive` over the micro-batches of `other` that
  // overlap micro-batch m of `s` (Note [Micro-batch ratios]), plus `transfer`.
  double arrival(StageId s, int m, StageId other, const std::vector<double>& end, double transfer) const {
    const auto [first, last] = overlapping(m, counts_[s], counts_[other]);
    double at = 0;
    for (int o = first; o < last; ++o) at = std::max(at, end[o] + transfer);
    return at;
  }

  double forward_ready(StageId s) const {
    const auto& x = st_[s];
    if (x.next_f >= counts_[s] || x.in_flight >= limits_[s]) return kNever;
    double at = x.free;
    for (int e : in_[s]) at = std::max(at, arrival(s, x.next_f, g_.edges[e].from, st_[g_.edges[e].from].f_end, g_.edges[e].forward_s));
    return at;
  }

  double backward_ready(StageId s) const {
    const auto& x = st_[s];
    if (x.next_b >= counts_[s] || x.next_b >= x.next_f) return kNever;
    double at = std::max(x.free, x.f_end[x.next_b]);
    for (int e : out_[s]) at = std::max(at, arrival(s, x.next_b, g_.edges[e].to, st_[g_.edges[e].to].b_end, g_.edges[e].backward_s));
    return at;
  }

  // The earliest the next B's gradients can be here: a successor's B not yet
  // placed starts no earlier than the successor is free.
  double backward_soonest(StageId s) const {
    const auto& x = st_[s];
    if (x.next_b >= counts_[s] || x.next_b >= x.next_f) return kNever;
    double at = x.f_end[x.next_b];
    for (int e : out_[s]) {
      const StageId t = g_.edges[e].to;
      const auto [first, last] = overlapping(x.next_b, counts_[s], counts_[t]);
      for (int o = first; o < last; ++o) {
        const double end = st_[t].b_end[o] < kNever ? st_[t].b_end[o] : st_[t].free + times_[t].b;
        at = std::max(at, end + g_.edges[e].backward_s);
      }
    }
    return at;
  }

  // See Note [Zero-bubble schedules]: B if it can start now, else F, else a
  // pending W; when none can start now, whichever of B and F can first.
  // With `lookahead`, a W that the next B could arrive during is not started:
  // the stage waits for the B (when its time is known) or decides later.
  Choice choose(StageId s, bool lookahead) const {
    const double now = st_[s].free, b = backward_ready(s), f = forward_ready(s);
    if (b <= now) return {Action::Kind::kBackward, now};
    if (f <= now) return {Action::Kind::kForward, now};
    if (!st_[s].pending_w.empty()) {
      if (!lookahead || backward_soonest(s) >= now + times_[s].w) return {Action::Kind::kWeight, now};
      if (b < kNever) return {Action::Kind::kBackward, b};
      return {};
    }
    if (b == kNever && f == kNever) return {};
    return b <= f ? Choice{Action::Kind::kBackward, b} : Choice{Action::Kind::kForward, f};
  }

  void take(StageId s, const Choice& c) {
    auto& x = st_[s];
    const auto& t = times_[s];
    if (*c.kind == Action::Kind::kForward) {
      const int m = x.next_f++;
      x.list.push_back({Action::Kind::kForward, m});
      x.free = x.f_end[m] = c.start + t.f;
      ++x.in_flight;
    } else if (*c.kind == Action::Kind::kBackward) {
      const int m = x.next_b++;
      x.list.push_back({Action::Kind::kBackward, m});
      x.free = x.b_end[m] = c.start + t.b;
      x.pending_w.push_back(m);
    } else {
      const int m = x.pending_w.front();
      x.pending_w.pop_front();
      x.list.push_back({Action::Kind::kWeight, m});
      x.free = c.start + t.w;
      --x.in_flight;
    }
  }

  const StageGraph& g_;
  const std::vector<int>& counts_;
  std::vector<int> limits_;
  bool lookahead_;
  std::vector<Times> times_;
  std::vector<State> st_;
  std::vector<std::vector<int>> in_, out_;
};

}  // namespace

std::vector<StageActions> list_schedule(const StageGraph& graph, const std::vector<int>& counts,
                                        const std::vector<int>& limits, bool lookahead) {
  return ListScheduler(graph, counts, limits, lookahead).run();
}

}  // namespace trident::schedule::detail
