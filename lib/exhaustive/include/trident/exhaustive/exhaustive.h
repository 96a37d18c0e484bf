// Brute-force references for the partitioners: they enumerate every plan of
// a search space and return the least bottleneck time per sample (TPS) among
// those that fit in memory. Exponential — for tests and the optimality
// benchmark on graphs of about ten ops and a few devices.
//
// Both use the planner's cost model and stage estimates, with data-parallel
// degrees that are powers of two dividing the stage's micro-batch, at most
// request.devices devices in all, stage micro-batches of the search's size
// times a power of two up to request.micro_batch_ratio, and in-flight =
// the stage's micro-batches covering its height (graph-1F1B), where a
// stage's height is its longest path to a sink counting each stage's
// micro-batch in units of the search's (see Note [Per-stage micro-batch sizes]
// in planner/planner.h). The planner's search is tested against them
// (test/search_test.cc); bench/plan_optimality measures how far it falls short.
#pragma once

#include <limits>
#include <vector>

#include "trident/graph/sp.h"
#include "trident/planner/planner.h"

namespace trident::exhaustive {

struct Best {
  double tps = std::numeric_limits<double>::infinity();  // infinity: nothing fits
  long plans = 0;                                          // plans evaluated
  std::vector<planner::Planner::StageChoice> stages;                // a best plan
};

// GraphPipe's search space over `sp` (built without input ops): stages are
// unions of consecutive series pieces, or parallel nodes split into
// consecutive groups of branches, recursively, where a group at either end
// may also take the fork or the join pieces next to its parallel node — the
// partitions the dynamic program can form. Heights come from the SP-ized graph, as in the search.
Best best_in_sp_space(const planner::Planner& planner, const graph::SpDecomposition& sp, int micro_batch);

// Every partition of the non-input ops into convex stages whose dependencies
// form a DAG, with heights from the real stage graph: the true optimum.
Best best_convex(const planner::Planner& planner, int micro_batch);

}  // namespace trident::exhaustive
