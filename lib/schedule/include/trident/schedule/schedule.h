// Schedules as data: per stage an ordered list of actions (forward or
// backward of micro-batch m). Generators build the standard ones; the
// validator proves that a schedule — generated or hand-written — respects
// every dependency and cannot deadlock, and reports in-flight counts. The
// runtime executes any valid schedule without schedule-specific code.
//
// Dependencies: F(s, m) needs F(p, m) of every predecessor p; B(s, m) needs
// F(s, m) and B(t, m) of every successor t (gradients summed at a fan-out).
#pragma once

#include <string>
#include <vector>

#include "trident/schedule/stage_graph.h"

namespace trident::schedule {

struct Action {
  enum class Kind { kForward, kBackward };
  Kind kind = Kind::kForward;
  int micro_batch = 0;
  bool operator==(const Action& o) const { return kind == o.kind && micro_batch == o.micro_batch; }
};

using StageActions = std::vector<Action>;

struct Schedule {
  std::string name;
  int micro_batches = 0;
  std::vector<StageActions> stages;  // indexed by StageId
};

// gpipe:      all forwards, then all backwards.
// 1f1b:       PipeDream-Flush on the stages' topological order: stage at
//             position i of S warms up with S−1−i forwards, then alternates.
// graph-1f1b: GraphPipe's 1F1B on a stage DAG: warm-up = (longest path to a
//             sink) − 1, so parallel branches do not pay for each other.
const std::vector<std::string>& schedule_names();
Schedule make_schedule(const std::string& name, const StageGraph& graph, int micro_batches);

std::string to_string(const Action& a);          // "F3", "B0"
std::string to_string(const StageActions& list);  // "F0 F1 B0 F2 B1 B2"
StageActions parse_actions(const std::string& text);  // throws ScheduleError

struct ScheduleCheck {
  std::vector<int> in_flight;  // per stage: most micro-batches forwarded but not yet backwarded
};

// Throws ScheduleError naming the stage and action: a micro-batch missing,
// repeated or out of range; a backward before its own forward; a deadlock
// (the message names each stuck stage's blocked action and what it waits for).
ScheduleCheck validate(const StageGraph& graph, const Schedule& schedule);

}  // namespace trident::schedule
