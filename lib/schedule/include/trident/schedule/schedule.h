// Schedules as data: per stage an ordered list of actions (forward or
// backward of micro-batch m). Generators build the standard ones; the
// validator proves that a schedule — generated or hand-written — respects
// every dependency and cannot deadlock, and reports in-flight counts. The
// runtime executes any valid schedule without schedule-specific code.
//
// Dependencies: F(s, m) needs F(p, m) of every predecessor p; B(s, m) needs
// F(s, m) and B(t, m) of every successor t (gradients summed at a fan-out).
//
// See Note [Micro-batch ratios] (GraphPipe's per-stage micro-batch sizes): each
// stage splits the mini-batch into its own number of micro-batches;
// micro-batch m of a stage of n holds rows [m·B/n, (m+1)·B/n). Neighbours'
// counts divide one another, so a stage of micro-batch k·b consumes k
// micro-batches of a predecessor of micro-batch b, and its gradients split
// into k on the way back. F(s, m) needs F(p, m') for every micro-batch m'
// of a predecessor whose rows overlap m's; B(s, m) needs B(t, m') likewise
// for every successor. With one count everywhere this is the rule above.
#pragma once

#include <utility>

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
  // See Note [Micro-batch ratios]: micro-batches per stage; empty when every
  // stage has `micro_batches`.
  std::vector<int> counts;
  int count(StageId st) const { return counts.empty() ? micro_batches : counts[static_cast<std::size_t>(st)]; }
};

// The micro-batches [first, last) of a stage of `to` micro-batches whose
// rows overlap micro-batch m of a stage of `from` (one of the two counts
// divides the other; see Note [Micro-batch ratios]).
inline std::pair<int, int> overlapping(int m, int from, int to) {
  if (to >= from) return {m * (to / from), (m + 1) * (to / from)};
  return {m / (from / to), m / (from / to) + 1};
}

// gpipe:      all forwards, then all backwards.
// 1f1b:       PipeDream-Flush on the stages' topological order: stage at
//             position i of S warms up with S−1−i forwards, then alternates.
// graph-1f1b: GraphPipe's 1F1B on a stage DAG: warm-up = (longest path to a
//             sink) − 1, so parallel branches do not pay for each other.
// With per-stage counts, warm-ups count rows (see Note [Micro-batch ratios]):
// a stage warms up with as many of its own micro-batches as cover the rows
// its downstream stages need in flight before their first backward returns
// (under graph-1f1b the most over paths to a sink of the successors' sizes;
// under 1f1b the sizes of every later stage in topological order). With one
// count this is the rule above.
const std::vector<std::string>& schedule_names();
Schedule make_schedule(const std::string& name, const StageGraph& graph, int micro_batches);
Schedule make_schedule(const std::string& name, const StageGraph& graph, const std::vector<int>& counts);

std::string to_string(const Action& a);          // "F3", "B0"
std::string to_string(const StageActions& list);  // "F0 F1 B0 F2 B1 B2"
StageActions parse_actions(const std::string& text);  // throws ScheduleError

struct ScheduleCheck {
  std::vector<int> in_flight;  // per stage: most micro-batches forwarded but not yet backwarded
};

// Throws ScheduleError naming the stage and action: a micro-batch missing,
// repeated or out of range; a backward before its own forward; neighbours
// whose micro-batch counts do not divide one another; a deadlock (the
// message names each stuck stage's blocked action and what it waits for).
ScheduleCheck validate(const StageGraph& graph, const Schedule& schedule);

}  // namespace trident::schedule
