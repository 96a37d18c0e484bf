#include "trident/exhaustive/exhaustive.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "trident/planner/estimate.h"

namespace trident::exhaustive {
namespace {

using graph::OpId;
using graph::SpNode;
using Partition = std::vector<std::vector<OpId>>;  // stages, each ascending

Partition canonical(Partition p) {
  for (auto& s : p) std::sort(s.begin(), s.end());
  std::sort(p.begin(), p.end());
  return p;
}

std::vector<OpId> union_of(const std::vector<const SpNode*>& nodes) {
  std::vector<OpId> out;
  for (const auto* n : nodes) {
    auto ops = n->ops();
    out.insert(out.end(), ops.begin(), ops.end());
  }
  std::sort(out.begin(), out.end());
  return out;
}

class SpSpace {
 public:
  std::vector<Partition> series(const std::vector<const SpNode*>& pieces, std::size_t i) {
    if (i == pieces.size()) return {{}};
    std::set<Partition> out;
    for (std::size_t j = i; j < pieces.size(); ++j) {
      std::vector<Partition> heads{{union_of({pieces.begin() + i, pieces.begin() + j + 1})}};
      if (j == i && pieces[i]->kind == SpNode::Kind::kParallel) {
        std::vector<const SpNode*> kids;
        for (const auto& c : pieces[i]->children) kids.push_back(&c);
        auto split = parallel(kids, 0, kids.size() - 1);
        heads.insert(heads.end(), split.begin(), split.end());
      }
      combine(heads, series(pieces, j + 1), out);
    }
    // Fork and join stages (see Note [Fork and join stages] in planner/planner.h).
    const std::size_t n = pieces.size();
    auto merged = [&](const SpNode& par, std::size_t from, std::size_t to, std::vector<Partition>& heads) {
      std::vector<const SpNode*> kids;
      for (const auto& c : par.children) kids.push_back(&c);
      const std::size_t nq = kids.size();
      for (int side = 0; side < 2; ++side)
        for (std::size_t l = 0; l + 1 < nq; ++l) {
          const std::size_t lo = side ? l + 1 : 0, hi = side ? nq : l + 1;
          const std::size_t olo = side ? 0 : l + 1, ohi = side ? l : nq - 1;
          std::vector<const SpNode*> nodes(kids.begin() + lo, kids.begin() + hi);
          nodes.insert(nodes.end(), pieces.begin() + from, pieces.begin() + to);
          for (auto p : parallel(kids, olo, ohi)) {
            p.push_back(union_of(nodes));
            heads.push_back(std::move(p));
          }
        }
    };
    if (pieces[i]->kind == SpNode::Kind::kParallel) {
      for (std::size_t t = i + 1; t < n && pieces[t]->kind != SpNode::Kind::kParallel; ++t) {
        std::vector<Partition> heads;
        merged(*pieces[i], i + 1, t + 1, heads);
        combine(heads, series(pieces, t + 1), out);
      }
    } else {
      std::size_t p = i;
      while (p < n && pieces[p]->kind != SpNode::Kind::kParallel) ++p;
      if (p < n) {
        std::vector<Partition> heads;
        merged(*pieces[p], i, p, heads);
        combine(heads, series(pieces, p + 1), out);
        const std::size_t nq = pieces[p]->children.size();
        for (std::size_t t = p + 1; t < n && pieces[t]->kind != SpNode::Kind::kParallel; ++t) {
          std::vector<Partition> two;
          for (std::size_t l = 0; l + 1 < nq; ++l)
            for (int side = 0; side < 2; ++side) {
              std::vector<const SpNode*> fork(pieces.begin() + i, pieces.begin() + p);
              std::vector<const SpNode*> join(pieces.begin() + p + 1, pieces.begin() + t + 1);
              for (std::size_t c = 0; c < nq; ++c)
                ((c <= l) == (side == 0) ? fork : join).push_back(&pieces[p]->children[c]);
              two.push_back({union_of(fork), union_of(join)});
            }
          combine(two, series(pieces, t + 1), out);
        }
      }
    }
    return {out.begin(), out.end()};
  }

  static void combine(const std::vector<Partition>& heads, const std::vector<Partition>& rests,
                      std::set<Partition>& out) {
    for (const auto& rest : rests)
      for (const auto& head : heads) {
        Partition p = head;
        p.insert(p.end(), rest.begin(), rest.end());
        out.insert(canonical(p));
      }
  }

  std::vector<Partition> parallel(const std::vector<const SpNode*>& kids, std::size_t i, std::size_t j) {
    std::set<Partition> out;
    out.insert({union_of({kids.begin() + i, kids.begin() + j + 1})});
    if (i == j) {
      for (auto& p : series(pieces_of(*kids[i]), 0)) out.insert(canonical(p));
    } else {
      for (std::size_t l = i; l < j; ++l)
        for (const auto& left : parallel(kids, i, l))
          for (const auto& right : parallel(kids, l + 1, j)) {
            Partition p = left;
            p.insert(p.end(), right.begin(), right.end());
            out.insert(canonical(p));
          }
    }
    return {out.begin(), out.end()};
  }

  static std::vector<const SpNode*> pieces_of(const SpNode& n) {
    if (n.kind != SpNode::Kind::kSeries) return {&n};
    std::vector<const SpNode*> out;
    for (const auto& c : n.children) out.push_back(&c);
    return out;
  }
};

// Tries every assignment of stage configs (replicas and micro-batch units,
// planner::stage_configs) to the stages of one partition; heights count each
// stage's units (see Note [Per-stage micro-batch sizes] in planner/planner.h).
void assign(const planner::Planner& planner, const Partition& stages, const std::vector<std::pair<OpId, OpId>>& extra,
            int micro_batch, Best& best) {
  const auto& req = planner.request();
  const int m = req.mini_batch / micro_batch;
  const auto configs = planner::stage_configs(req, micro_batch, req.micro_batch_ratio);
  std::vector<int> sizes;  // the units any config has
  for (const auto& c : configs)
    if (std::find(sizes.begin(), sizes.end(), c.units) == sizes.end()) sizes.push_back(c.units);
  // Per stage and config: its estimate (the same whatever the other stages'
  // units), and its TPS at the current heights, or infinity when it does not
  // fit (or has other units).
  std::vector<std::vector<planner::StageEstimate>> estimate(stages.size());
  for (std::size_t i = 0; i < stages.size(); ++i)
    for (const auto& c : configs)
      estimate[i].push_back(planner::estimate_stage(planner, stages[i], c.replicas, micro_batch * c.units,
                                                   planner.cluster().packed_link(c.replicas)));
  std::vector<std::vector<double>> tps(stages.size(), std::vector<double>(configs.size()));
  std::vector<int> units(stages.size(), 1), pick(stages.size());
  std::function<void(std::size_t, int, double)> go = [&](std::size_t s, int left, double worst) {
    if (s == stages.size()) ++best.plans;
    if (worst >= best.tps) return;
    if (s == stages.size()) {
      best.tps = worst;
      best.stages.clear();
      for (std::size_t i = 0; i < stages.size(); ++i)
        best.stages.push_back({stages[i], configs[pick[i]].replicas, micro_batch * configs[pick[i]].units});
      return;
    }
    for (std::size_t k = 0; k < configs.size() && configs[k].replicas <= left; ++k) {
      if (configs[k].units != units[s]) continue;
      pick[s] = static_cast<int>(k);
      go(s + 1, left - configs[k].replicas, std::max(worst, tps[s][k]));
    }
  };
  std::function<void(std::size_t)> each_units = [&](std::size_t s) {
    if (s < stages.size()) {
      for (int u : sizes) units[s] = u, each_units(s + 1);
      return;
    }
    const auto h = planner::stage_heights(planner.graph(), stages, extra, units);
    if (h.empty()) return;
    for (std::size_t i = 0; i < stages.size(); ++i)
      for (std::size_t k = 0; k < configs.size(); ++k) {
        const auto& c = configs[k];
        tps[i][k] = std::numeric_limits<double>::infinity();
        if (c.units != units[i]) continue;
        const int size = micro_batch * c.units;
        const auto& e = estimate[i][k];
        const auto recompute = e.recompute_at(req.recompute, planner::in_flight_at(h[i], c.units, m), planner.memory_cap());
        if (recompute) tps[i][k] = *recompute ? e.recomputing().tps(size, req.mini_batch) : e.tps(size, req.mini_batch);
      }
    go(0, req.devices, 0);
  };
  each_units(0);
}

}  // namespace

Best best_in_sp_space(const planner::Planner& planner, const graph::SpDecomposition& sp, int micro_batch) {
  Best best;
  SpSpace space;
  for (const auto& p : space.series(SpSpace::pieces_of(sp.root), 0)) {
    if (static_cast<int>(p.size()) > planner.request().devices) continue;
    assign(planner, p, sp.added_edges, micro_batch, best);
  }
  return best;
}

Best best_convex(const planner::Planner& planner, int micro_batch) {
  const auto& g = planner.graph();
  std::vector<OpId> ops;
  for (OpId id = 0; id < g.size(); ++id)
    if (!g.op(id).is_input()) ops.push_back(id);
  Best best;
  const int max_blocks = planner.request().devices;
  // Set partitions as restricted growth strings.
  std::vector<int> block(ops.size(), 0);
  std::function<void(std::size_t, int)> go = [&](std::size_t i, int used) {
    if (i == ops.size()) {
      Partition p(used);
      for (std::size_t k = 0; k < ops.size(); ++k) p[block[k]].push_back(ops[k]);
      for (const auto& s : p)
        if (!g.is_convex({s.begin(), s.end()})) return;
      if (!planner::stage_heights(g, p, {}).empty()) assign(planner, p, {}, micro_batch, best);
      return;
    }
    for (int b = 0; b <= used && b < max_blocks; ++b) {
      block[i] = b;
      go(i + 1, std::max(used, b + 1));
    }
  };
  if (!ops.empty()) go(0, 0);
  return best;
}

}  // namespace trident::exhaustive
