#include <algorithm>

#include "trident/schedule/schedule.h"
#include "walk.h"

namespace trident::schedule {

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
  for (StageId st = 0; st < graph.size(); ++st) {
    const int m = schedule.count(st);
    const std::string where = "schedule '" + schedule.name + "', stage " + std::to_string(st) + ": ";
    std::vector<int> fwd_at(m, -1), bwd_at(m, -1);
    int live = 0, peak = 0;
    const auto& list = schedule.stages[st];
    for (int i = 0; i < static_cast<int>(list.size()); ++i) {
      const Action& a = list[i];
      if (a.micro_batch < 0 || a.micro_batch >= m)
        throw ScheduleError(where + to_string(a) + " is outside micro-batches 0.." + std::to_string(m - 1));
      auto& at = (a.kind == Action::Kind::kForward ? fwd_at : bwd_at)[a.micro_batch];
      if (at >= 0) throw ScheduleError(where + to_string(a) + " appears twice");
      at = i;
      live += a.kind == Action::Kind::kForward ? 1 : -1;
      peak = std::max(peak, live);
    }
    for (int mb = 0; mb < m; ++mb) {
      if (fwd_at[mb] < 0) throw ScheduleError(where + "F" + std::to_string(mb) + " is missing");
      if (bwd_at[mb] < 0) throw ScheduleError(where + "B" + std::to_string(mb) + " is missing");
      if (bwd_at[mb] < fwd_at[mb])
        throw ScheduleError(where + "B" + std::to_string(mb) + " comes before its own F" + std::to_string(mb));
    }
    check.in_flight.push_back(peak);
  }
  detail::Walk(graph, schedule).run([](StageId, const Action&) {});
  return check;
}

}  // namespace trident::schedule
