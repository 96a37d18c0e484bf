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
//
// Note [Micro-batch ratios]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// Along every edge one stage's micro-batch
// divides the other's, so a micro-batch of one is whole micro-batches of
// the other.
#pragma once

#include <utility>

#include <string>
#include <vector>

#include "trident/schedule/stage_graph.h"

namespace trident::schedule {

// Note [Split backward]
// ~~~~~~~~~~~~~~~~~~~~~
// Zero-bubble schedules (Qi et al., ICLR 2024) split a micro-batch's
// backward in two: B computes the gradients of the stage's inputs — all a
// predecessor waits for — and W the stage's weight gradients from what B
// kept, whenever the stage would otherwise idle. In a stage's list, `W m`
// marks micro-batch m as split: its `B m` is then the input gradients only,
// and W must come after it; without W, `B m` is the whole backward. A
// split micro-batch holds its activations until W (so W counts in the
// in-flight memory), and the stage's weight gradients are complete, and
// synced, after its last B or W. `S` is the optimizer step; it follows a
// stage's last action when not written, and when written it must be last —
// except in delayed steps unrolled for simulation (Note [Delayed pipelines]
// in delayed.h), where an S of micro_batch kStepBetween ends each step.
struct Action {
  enum class Kind { kForward, kBackward, kWeight, kStep };
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
//
// Note [Zero-bubble schedules]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Every backward split (Note [Split backward]), made by one list scheduler
// that runs the iteration in time (the stages' F, B and W times; unit times
// when the graph has none) and, whenever a stage is free, starts its next B
// if its successors' gradients are here (B is what the predecessors wait
// for), else its next F if it holds fewer micro-batches than its limit,
// else its oldest pending W — so W fills every wait, the waits of a join on
// its slowest branch and of a fork on its successors included; with none of
// them ready it waits for the first B or F (with lookahead it also does not
// start a W that the next B could arrive during). A micro-batch is held
// from F to W; the limits keep the peak memory of the schedule each keeps —
// the most any device needs, its static bytes and what it holds — and let
// every stage hold as many micro-batches as fit in that peak:
// zb-h1:    1f1b's peak (Qi et al.'s ZB-H1), made on the stages in
//           topological order as a chain (what a user who linearises the
//           model runs), then run on the DAG;
// zb-h2:    as zb-h1 with each limit doubled less one (ZB-H2's 2p − 1);
// graph-zb: graph-1f1b's peak, made on the DAG.
// Of the list schedule with and without lookahead and the kept schedule
// with each W right after its B (never slower than it), the fastest in
// simulation is returned.
const std::vector<std::string>& schedule_names();
const std::vector<std::string>& zero_bubble_names();
// Both lists: every schedule make_schedule knows.
std::vector<std::string> all_schedule_names();
// Whether `name` is a zero-bubble schedule (it splits every backward).
bool is_zero_bubble(const std::string& name);
Schedule make_schedule(const std::string& name, const StageGraph& graph, int micro_batches);
Schedule make_schedule(const std::string& name, const StageGraph& graph, const std::vector<int>& counts);

std::string to_string(const Action& a);          // "F3", "B0", "W0", "S"
std::string to_string(const StageActions& list);  // "F0 F1 B0 F2 B1 B2"
StageActions parse_actions(const std::string& text);  // throws ScheduleError
// Whether the list splits any backward (has a W; see Note [Split backward]).
bool splits_backward(const StageActions& list);
// The list with each B followed at once by its W (a split that moves nothing).
StageActions weights_after_backwards(const StageActions& list);

struct ScheduleCheck {
  // Per stage: most micro-batches forwarded whose backward is not done (for
  // a split micro-batch, until its W).
  std::vector<int> in_flight;
};

// Throws ScheduleError naming the stage and action: a micro-batch missing,
// repeated or out of range; a backward before its own forward; a W before
// its own B; an optimizer step (S) before another action; neighbours whose
// micro-batch counts do not divide one another; a deadlock (the message
// names each stuck stage's blocked action and what it waits for).
ScheduleCheck validate(const StageGraph& graph, const Schedule& schedule);

}  // namespace trident::schedule
