// The TPS search of Planner::search and Planner::candidates: a binary search
// on the target time per sample, each step one run of the SP dynamic program
// (sp_engine.h), stopping when the interval is within the tolerance.
#include <cmath>
#include <limits>

#include "sp_engine.h"

namespace trident::planner {
namespace {

using detail::Engine;
using detail::kInf;

// Least TPS in [lo, hi] (hi feasible with depth <= max_depth, found as `best`)
// to the tolerance.
void bisect(Engine& engine, double lo, double tolerance, int max_depth, Planner::Search& best) {
  Planner::Search trial;
  double hi = best.tps;
  while (hi - lo > tolerance * hi) {
    const double mid = (lo + hi) / 2;
    if (engine.solve(mid, &trial) && trial.depth <= max_depth) {
      best = trial;
      hi = trial.tps;
    } else {
      lo = mid;
    }
  }
}

}  // namespace

std::optional<Planner::Search> Planner::search(const graph::SpDecomposition& sp, int micro_batch) const {
  Engine engine(*this, sp, micro_batch, request_.micro_batch_ratio);
  Search best;
  if (!engine.solve(std::numeric_limits<double>::infinity(), &best)) return std::nullopt;
  bisect(engine, 0, request_.tolerance, kInf, best);
  return best;
}

std::vector<Planner::Search> Planner::candidates(const graph::SpDecomposition& sp, int micro_batch, double bound_s,
                                                int ratio) const {
  // Note [Depth sweep]
  // ~~~~~~~~~~~~~~~~~~
  // The TPS search minimises the bottleneck stage, but an
  // iteration takes about TPS x (B + (depth - 1) x b): a shallower pipeline
  // with a slightly slower bottleneck can win, most of all with few
  // micro-batches. So after the least TPS, look for the least TPS at each
  // smaller depth, as long as that estimate could still beat the best so far.
  //
  Engine engine(*this, sp, micro_batch, ratio > 0 ? ratio : request_.micro_batch_ratio);
  const double mini = request_.mini_batch, b = micro_batch;
  if (std::isfinite(bound_s) && engine.prune(bound_s)) return {};
  Search best;
  if (!engine.solve(std::numeric_limits<double>::infinity(), &best)) return {};
  bisect(engine, 0, request_.tolerance, kInf, best);
  std::vector<Search> out{best};
  auto estimate = [&](const Search& s) { return s.tps * (mini + (s.depth - 1) * b); };
  double bound = estimate(best);
  for (int depth = best.depth - 1; depth >= 1; --depth) {
    const double hi = bound / (mini + (depth - 1) * b);
    Search s;
    if (hi <= out.back().tps || !engine.solve(hi, &s) || s.depth > depth) continue;
    bisect(engine, out.back().tps, request_.tolerance, depth, s);
    bound = std::min(bound, estimate(s));
    out.push_back(s);
  }
  // The TPS objective ignores where in the iteration a stage's time falls;
  // with few micro-batches a plan with a slower bottleneck but a shorter
  // critical path can win. A few targets above the least TPS give the
  // simulator such alternatives (the DP prefers plain stages over fork and
  // join ones when both are as shallow).
  for (double f : {1.1, 1.25, 1.5}) {
    Search s;
    if (!engine.solve(out.front().tps * f, &s)) continue;
    auto same = [&](const Search& o) {
      if (o.stages.size() != s.stages.size()) return false;
      for (std::size_t i = 0; i < o.stages.size(); ++i)
        if (o.stages[i].ops != s.stages[i].ops || o.stages[i].replicas != s.stages[i].replicas ||
            o.stages[i].micro_batch != s.stages[i].micro_batch)
          return false;
      return true;
    };
    if (std::none_of(out.begin(), out.end(), same)) out.push_back(std::move(s));
  }
  return out;
}

}  // namespace trident::planner
