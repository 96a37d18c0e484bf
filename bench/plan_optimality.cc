// How far graphpipe's search falls short of the true optimum (issue 3): on
// random small models (<= 10 ops) and 2-4 devices, compare the least
// bottleneck TPS that graphpipe (and pipedream) find with the least over
// every convex partition and device assignment (exhaustive::best_convex).
//   build/bench/plan_optimality [TRIALS] [SEED]   (make bench-plan)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>

#include "../lib/planner/test/test_graphs.h"
#include "trident/exhaustive/exhaustive.h"
#include "trident/planner/planner.h"

using namespace trident;

int main(int argc, char** argv) {
  const int trials = argc > 1 ? std::atoi(argv[1]) : 200;
  std::mt19937 rng(argc > 2 ? std::atoi(argv[2]) : 1);
  const auto cluster = cost::load_cluster("summit-v100");
  const auto cost = cost::analytic_cost_model(cluster.device);
  for (int family = 0; family < 2; ++family) {
  struct Tally {
    int optimal = 0, short_ = 0, infeasible = 0;
    double sum = 0, worst = 0;
  } tally[3];
  int compared = 0;
  for (int t = 0; t < trials; ++t) {
    auto g = family == 0 ? planner::testing::random_sp_model(rng, 10) : planner::testing::random_model(rng, 10);
    planner::PlanRequest r;
    r.devices = 2 + static_cast<int>(rng() % 3), r.mini_batch = 32;
    const int micro = 4 << (rng() % 3);
    r.device_memory_bytes = static_cast<double>(g.param_bytes()) * 4 * (0.3 + 0.2 * (rng() % 6)) + (1 << 20);
    planner::Planner p(g, cluster, cost, r);
    const auto truth = exhaustive::best_convex(p, micro);
    if (!std::isfinite(truth.tps)) continue;
    ++compared;
    std::optional<planner::Planner::Search> results[3];
    results[0] = p.search(graph::sp_decompose(g, true), micro);
    results[1] = p.search(graph::linearize(g, true), micro);
    results[2] = results[0];  // what `trident plan` runs: the better of both (see Note [Search spaces])
    if (results[1] && (!results[2] || results[1]->tps < results[2]->tps)) results[2] = results[1];
    for (int i = 0; i < 3; ++i) {
      const auto& found = results[i];
      auto& s = tally[i];
      if (!found) {
        ++s.infeasible;
        continue;
      }
      const double gap = found->tps / truth.tps - 1;
      if (gap <= r.tolerance) {
        ++s.optimal;
      } else {
        ++s.short_;
        s.sum += gap;
        s.worst = std::max(s.worst, gap);
      }
    }
  }
  std::printf("\n%s\n\n", family == 0 ? "Random series-parallel models (branches joined by concat):"
                                        : "Random DAGs (any earlier tensor may feed a layer or a concat; mostly not SP):");
  std::printf("| search | cases | within tolerance of the true optimum | short of it | mean shortfall when short | worst | found no plan though one fits |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  const char* names[3] = {"SP decomposition alone (GraphPipe's space)", "pipedream (contiguous cuts)",
                          "graphpipe as planned (best of both)"};
  for (int i = 0; i < 3; ++i) {
    const auto& s = tally[i];
    std::printf("| %s | %d | %d (%.0f%%) | %d (%.0f%%) | %.1f%% | %.1f%% | %d |\n", names[i], compared, s.optimal,
                100.0 * s.optimal / compared, s.short_, 100.0 * s.short_ / compared,
                s.short_ ? 100 * s.sum / s.short_ : 0.0, 100 * s.worst, s.infeasible);
  }
  }
  return 0;
}
