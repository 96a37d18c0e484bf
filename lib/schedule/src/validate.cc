#include <algorithm>

#include "trident/schedule/delayed.h"
#include "trident/schedule/schedule.h"
#include "walk.h"

namespace trident::schedule {
namespace {

// One stage's list on its own (see Note [Split backward]): every micro-batch
// forwarded and backwarded once, a W at most once and after its B, S last.
// Returns the most micro-batches in flight.
int check_stage(const Schedule& schedule, StageId st) {
  const int m = schedule.count(st);
  const std::string where = "schedule '" + schedule.name + "', stage " + std::to_string(st) + ": ";
  std::vector<int> fwd_at(m, -1), bwd_at(m, -1), weight_at(m, -1);
  const auto& list = schedule.stages[st];
  for (int i = 0; i < static_cast<int>(list.size()); ++i) {
    const Action& a = list[i];
    if (a.kind == Action::Kind::kStep) {
      if (i + 1 < static_cast<int>(list.size()) && a.micro_batch != kStepBetween)  // Note [Delayed pipelines]
        throw ScheduleError(where + "S comes before " + to_string(list[i + 1]) +
                            "; the optimizer step must follow every action of the stage");
      continue;
    }
    if (a.micro_batch < 0 || a.micro_batch >= m)
      throw ScheduleError(where + to_string(a) + " is outside micro-batches 0.." + std::to_string(m - 1));
    auto& at = (a.kind == Action::Kind::kForward ? fwd_at : a.kind == Action::Kind::kBackward ? bwd_at : weight_at)[a.micro_batch];
    if (at >= 0) throw ScheduleError(where + to_string(a) + " appears twice");
    at = i;
  }
  for (int mb = 0; mb < m; ++mb) {
    const auto n = std::to_string(mb);
    if (fwd_at[mb] < 0) throw ScheduleError(where + "F" + n + " is missing");
    if (bwd_at[mb] < 0) throw ScheduleError(where + "B" + n + " is missing");
    if (bwd_at[mb] < fwd_at[mb]) throw ScheduleError(where + "B" + n + " comes before its own F" + n);
    if (weight_at[mb] >= 0 && weight_at[mb] < bwd_at[mb])
      throw ScheduleError(where + "W" + n + " comes before its own B" + n +
                          "; the weight gradients need what the input gradients' pass keeps");
  }
  // A micro-batch is in flight from its F to its backward's end: its W when split.
  int live = 0, peak = 0;
  for (const Action& a : list) {
    if (a.kind == Action::Kind::kForward) peak = std::max(peak, ++live);
    if (a.kind == Action::Kind::kWeight || (a.kind == Action::Kind::kBackward && weight_at[a.micro_batch] < 0)) --live;
  }
  return peak;
}

}  // namespace

ScheduleCheck validate(const StageGraph& graph, const Schedule& schedule) {
  graph.check();
  if (schedule.micro_batches < 1) throw ScheduleError("schedule '" + schedule.name + "': micro_batches must be >= 1");
  if (static_cast<int>(schedule.stages.size()) != graph.size())
    throw ScheduleError("schedule '" + schedule.name + "' has " + std::to_string(schedule.stages.size()) +
                        " stage lists for " + std::to_string(graph.size()) + " stages");
  if (!schedule.counts.empty() && static_cast<int>(schedule.counts.size()) != graph.size())
    throw ScheduleError("schedule '" + schedule.name + "' has " + std::to_string(schedule.counts.size()) +
                        " micro-batch counts for " + std::to_string(graph.size()) + " stages");
  for (StageId st = 0; st < graph.size(); ++st)
    if (schedule.count(st) < 1)
      throw ScheduleError("schedule '" + schedule.name + "', stage " + std::to_string(st) + ": " +
                          std::to_string(schedule.count(st)) + " micro-batches; at least 1");
  // See Note [Micro-batch ratios]: a neighbour's micro-batches nest in ours or ours in theirs.
  for (const auto& e : graph.edges) {
    const int a = schedule.count(e.from), b = schedule.count(e.to);
    if (std::max(a, b) % std::min(a, b))
      throw ScheduleError("schedule '" + schedule.name + "': stage " + std::to_string(e.from) + " has " +
                          std::to_string(a) + " micro-batches and stage " + std::to_string(e.to) + " " +
                          std::to_string(b) + "; one count must divide the other");
  }
  ScheduleCheck check;
  for (StageId st = 0; st < graph.size(); ++st) check.in_flight.push_back(check_stage(schedule, st));
  detail::Walk(graph, schedule).run([](StageId, const Action&) {});
  return check;
}

}  // namespace trident::schedule
