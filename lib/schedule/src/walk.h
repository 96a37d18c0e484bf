// Internal: runs the actions of every stage in an order that respects each
// stage's program order and the cross-stage dependencies (schedule.h). Both
// the validator and the simulator walk a schedule this way.
#pragma once

#include <string>
#include <vector>

#include "trident/schedule/schedule.h"

namespace trident::schedule::detail {

class Walk {
 public:
  Walk(const StageGraph& g, const Schedule& s)
      : s_(s), pred_(g.predecessors()), succ_(g.successors()), pos_(g.size(), 0), fwd_(g.size()) {
    for (StageId st = 0; st < g.size(); ++st) fwd_[st].assign(s.count(st), 0);
    bwd_ = fwd_;
  }

  // Calls visit(stage, action) for every action; throws ScheduleError naming
  // the stuck actions when none can proceed.
  template <class Visit>
  void run(Visit&& visit) {
    bool progress = true;
    while (progress) {
      progress = false;
      for (StageId st = 0; st < static_cast<StageId>(pos_.size()); ++st) {
        while (pos_[st] < s_.stages[st].size() && waiting_for(st).empty()) {
          const Action& a = s_.stages[st][pos_[st]++];
          visit(st, a);
          if (a.kind == Action::Kind::kForward) fwd_[st][a.micro_batch] = 1;
          if (a.kind == Action::Kind::kBackward) bwd_[st][a.micro_batch] = 1;
          progress = true;
        }
      }
    }
    std::string stuck;
    for (StageId st = 0; st < static_cast<StageId>(pos_.size()); ++st) {
      if (pos_[st] < s_.stages[st].size())
        stuck += (stuck.empty() ? "" : "; ") + std::string("stage ") + std::to_string(st) + " at " +
                 to_string(s_.stages[st][pos_[st]]) + " waits for " + waiting_for(st);
    }
    if (!stuck.empty()) throw ScheduleError("schedule '" + s_.name + "' deadlocks: " + stuck);
  }

 private:
  // What the next action of `st` still needs, or "" when it can run (Note
  // [Micro-batch ratios]: every overlapping micro-batch of each neighbour).
  std::string waiting_for(StageId st) const {
    const Action& a = s_.stages[st][pos_[st]];
    const int m = a.micro_batch;
    auto missing = [&](const std::vector<std::vector<char>>& done, StageId other, const char* kind) -> std::string {
      const auto [first, last] = overlapping(m, s_.count(st), s_.count(other));
      for (int o = first; o < last; ++o)
        if (!done[other][o]) return kind + std::to_string(o) + " of stage " + std::to_string(other);
      return "";
    };
    if (a.kind == Action::Kind::kForward) {
      for (StageId p : pred_[st])
        if (auto w = missing(fwd_, p, "F"); !w.empty()) return w;
      return "";
    }
    // W needs only its own B, S only what came before it: program order.
    if (a.kind == Action::Kind::kWeight || a.kind == Action::Kind::kStep) return "";
    if (!fwd_[st][m]) return "its own F" + std::to_string(m);
    for (StageId t : succ_[st])
      if (auto w = missing(bwd_, t, "B"); !w.empty()) return w;
    return "";
  }

  const Schedule& s_;
  std::vector<std::vector<StageId>> pred_, succ_;
  std::vector<std::size_t> pos_;
  std::vector<std::vector<char>> fwd_, bwd_;
};

}  // namespace trident::schedule::detail
