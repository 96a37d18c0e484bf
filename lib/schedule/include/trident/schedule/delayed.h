// Delayed (asynchronous) pipelines: PipeDream-2BW's schedule on a stage DAG
// (parallel.pipeline_delay: 1). See Note [Delayed pipelines].
//
// Note [Delayed pipelines]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// A synchronous 1F1B list (1f1b or graph-1f1b; Note [Micro-batch ratios] for
// the counts) is, per stage of n micro-batches, w warm-up forwards, then
// n − w pairs of a forward and a backward, then w backwards. Under a delay
// the pipeline never drains between mini-batches: the w warm-up forwards of
// mini-batch t + 1 move into the w trailing backwards of mini-batch t,
// F(t+1, j) right before B(t, n − w + j), as in a 1F1B schedule over an
// endless stream of micro-batches. A step's list (its *body*) is then the
// synchronous list without its warm-up and with those forwards in the
// cooldown; in it, micro-batch n + j means micro-batch j of the next
// mini-batch. A step after a drain (the first, and one after evaluation or
// a checkpoint) starts with the warm-up; a step that drains (before those)
// runs the synchronous list's remainder instead of the body, so warm-up +
// drain is the synchronous list itself.
//
// A stage's weights take PipeDream-2BW's rule W(t+1) = W(t) − opt(∇f(W(t−1))):
// every micro-batch of mini-batch t runs forward and backward on version
// t − 1 (W(−1) = W(0)), and a stage updates after its last backward of t.
// The forwards of t + 1 in t's body use version t, which exists by then;
// those of t + 2 come only in t + 1's body, after the update that makes
// version t + 1 has overwritten t − 1, whose last user was mini-batch t. So
// a stage holds two versions, whatever its depth, by construction.
//
// A step's actions must need only actions of the same or earlier steps:
// the rows a stage forwards early must have been forwarded early by each
// predecessor too, or the two would wait for each other across the step's
// end. 1F1B's warm-ups count more rows upstream, but a stage's warm-up is
// clamped to its micro-batch count, so with per-stage sizes a successor
// can warm up over more rows than its predecessor: it then moves only as
// many forwards as its predecessors cover (in topological order), and runs
// the rest of its warm-up at the start of the step. delay_schedule proves
// the unrolled steps free of deadlock with the schedule validator.
#pragma once

#include <vector>

#include "trident/schedule/schedule.h"
#include "trident/schedule/simulator.h"

namespace trident::schedule {

// An S action with this micro_batch ends a step inside an unrolled delayed
// schedule (unroll()): the stage's per-step sync tail and optimizer step,
// StageCost::optimizer_s long, before its next step's actions; S written by
// hand (micro_batch 0) must still be last.
constexpr int kStepBetween = 1;

// Warm-up w forwards, then one forward / one backward, then the remaining
// backwards (PipeDream-Flush's list; w = m − 1 is GPipe's order).
StageActions one_f_one_b(int warmup, int m);

// One stage's lists under a delay (see Note [Delayed pipelines]).
struct DelayedStage {
  int count = 0;        // the stage's micro-batches per mini-batch
  StageActions warmup;  // F0 .. F(w−1): after a drain, before the body
  StageActions body;    // a step that continues: micro-batch count + j is the next mini-batch's j
  StageActions drain;   // a step that drains: the synchronous list less its warm-up
};

// One stage's lists from its synchronous list of `count` micro-batches,
// `early` of its warm-up forwards moved into the step before (−1: all);
// throws ScheduleError naming `stage` when the list is not 1F1B's.
DelayedStage delay_stage(const StageActions& list, int count, StageId stage, int early = -1);

// Per stage, from a synchronous schedule, each stage moving at most `cap`
// forwards early (−1: its whole warm-up); throws ScheduleError naming the
// stage when its list is not 1F1B's (w warm-up forwards, pairs, w
// backwards: W actions and hand-made orders are refused), or when the
// unrolled steps deadlock. With cap 0 a step is the synchronous list and
// only the barrier between steps is gone; that never deadlocks.
std::vector<DelayedStage> delay_schedule(const StageGraph& graph, const Schedule& sync, int cap = -1);

// `steps` steps run back to back as one schedule, micro-batch m of step s
// numbered s·count + m: the warm-up, steps − 1 bodies each ended by an S of
// kStepBetween, one drain.
Schedule unroll(const Schedule& sync, const std::vector<DelayedStage>& delayed, int steps);

// One step of the delayed pipeline in its steady state: the time between
// two updates of the unrolled steps (no fill or drain, and no barrier: the
// runtime reads a step's loss sums a step later), each stage's gradient
// sync beyond its last backward and its optimizer step counted once per
// step; busy_s and bubble_fraction per step; peak_memory_bytes and
// in_flight as the synchronous schedule's (the weight copy is the
// planner's to add); events those of 4 unrolled steps, fill and drain
// included. Throws as delay_schedule.
SimResult simulate_delayed(const StageGraph& graph, const Schedule& sync, int mini_batch, int cap = -1);

// Note [Early forwards]
// ~~~~~~~~~~~~~~~~~~~~~
// Moving a warm-up forward into the step before fills the pipeline, but
// it also delays the trailing backward it goes before, and that backward's
// gradients are what the stages upstream wait for. With at least as many
// micro-batches as stages the fill wins (1F1B's steady state); with fewer,
// or where per-stage sizes make the moved rows uneven, it may not, and on
// some DAGs moving every warm-up forward deadlocks the unrolled steps. So
// the planner simulates every cap on the forwards a stage moves, from its
// largest warm-up down to 0, and keeps the fastest that validates (ties to
// the larger cap); the plan records it (pipeline_early) and the runtime
// runs exactly that.
struct DelayedChoice {
  int cap = 0;
  SimResult result;
};
DelayedChoice choose_delayed(const StageGraph& graph, const Schedule& sync, int mini_batch);

}  // namespace trident::schedule
