// GraphPipe's partitioner (REFERENCE.md §2, Algorithm 1), as used by
// Planner::search for both `graphpipe` (SP decomposition) and `pipedream`
// (linearised graph).
//
// For a target time per sample T, a dynamic program over the SP tree finds,
// for each sub-problem, the least pipeline depth with which it can run on at
// most d devices when δ stages lie downstream of it:
//   series suffix  S(i, d, δ): the first group of pieces i..j is one stage on
//                  d' devices (a power of two dividing the micro-batch), or,
//                  when piece i is a parallel node, split among its branches;
//                  the rest is solved first, since its depth r sets the
//                  group's in-flight count (δ + r + 1 under graph-1F1B).
//   parallel       P(i..j, d, δ): all branches i..j as one stage, or split at
//                  l with d1 + d2 = d devices: depth max(left, right).
// A stage is feasible when its TPS ≤ T and its memory (Note [Stage memory])
// with in-flight min(height, micro-batches) fits. Depth is minimised because
// a shallower pipeline has fewer bubbles and less activation memory upstream.
// The binary search on T stops when the interval is within the tolerance.
#include <algorithm>
#include <cmath>
#include <limits>

#include "estimate.h"

namespace trident::plan {
namespace {

using graph::OpId;
using graph::SpNode;
constexpr int kInf = 1 << 20;

// Stage quantities that add up over ops, per data-parallel degree index.
struct Agg {
  std::vector<double> comp, sync;  // per micro-batch slice / per iteration
  double static_bytes = 0, act_per_row = 0;
  void add(const Agg& o, double sign = 1) {
    for (std::size_t k = 0; k < comp.size(); ++k) comp[k] += sign * o.comp[k], sync[k] += sign * o.sync[k];
    static_bytes += sign * o.static_bytes, act_per_row += sign * o.act_per_row;
  }
};

// Prefix sums of Agg over a sequence of pieces, flat so that the DP's inner
// loop reads an interval's totals without allocating.
struct Prefix {
  int degrees = 0;
  std::vector<double> comp, sync, static_bytes, act_per_row;  // comp/sync: [i * degrees + k]
  explicit Prefix(int k = 0) : degrees(k), comp(k, 0), sync(k, 0), static_bytes(1, 0), act_per_row(1, 0) {}
  void push(const Agg& a) {
    const std::size_t base = comp.size() - degrees;
    for (int k = 0; k < degrees; ++k) {
      comp.push_back(comp[base + k] + a.comp[k]);
      sync.push_back(sync[base + k] + a.sync[k]);
    }
    static_bytes.push_back(static_bytes.back() + a.static_bytes);
    act_per_row.push_back(act_per_row.back() + a.act_per_row);
  }
};

struct Choice {
  int kind = -1;  // 0 base stage, 1 parallel piece / single branch, 2 split
  int j = 0, dev = 0;
};

class Engine {
 public:
  Engine(const Planner& p, const graph::SpDecomposition& sp, int b) : p_(p), b_(b) {
    // A linearised graph is one series holding every op: give it the cut
    // points that a tree's several series would have together.
    const bool chain = sp.root.kind == SpNode::Kind::kSeries &&
                       std::all_of(sp.root.children.begin(), sp.root.children.end(),
                                   [](const SpNode& c) { return c.kind == SpNode::Kind::kLeaf; });
    max_pieces_ = chain ? 2 * p.request().max_pieces : p.request().max_pieces;
    const auto& req = p.request();
    mini_ = req.mini_batch;
    m_ = req.mini_batch / b;
    cap_ = p.memory_cap();
    for (int d = 1; d <= std::min(req.devices, b); d *= 2)
      if (b % d == 0) degrees_.push_back(d);
    devices_ = req.devices;
    hcap_ = std::min(m_, devices_ + 1);
    op_agg_.resize(p.graph().size());
    for (OpId id = 0; id < p.graph().size(); ++id) {
      Agg& a = op_agg_[id];
      for (int d : degrees_) {
        auto e = detail::estimate_stage(p, {id}, d, b, p.cluster().packed_link(d));
        a.comp.push_back(e.forward_s + e.backward_s);
        a.sync.push_back(e.sync_s);
        a.static_bytes = e.static_bytes;
        a.act_per_row = e.activation_bytes / (b / d);
      }
    }
    root_ = add_series(sp.root);
  }

  // Whether some plan could finish an iteration within `bound_s`: every
  // stage computes B x compute/b and syncs within it. An iteration lasts at
  // least its busiest stage's compute and at least any stage's sync, so if
  // none fits, no plan at this micro-batch can beat `bound_s`.
  bool prune(double bound_s) {
    bound_s_ = bound_s;
    Planner::Search unused;
    const bool possible = solve(std::numeric_limits<double>::infinity(), &unused);
    bound_s_ = 0;
    return !possible;
  }

  // Feasibility at target T; fills `out` with a least-depth partition.
  bool solve(double target, Planner::Search* out) {
    target_ = target;
    for (auto& s : series_) std::fill(s.memo.begin(), s.memo.end(), -1);
    for (auto& q : parallels_) std::fill(q.memo.begin(), q.memo.end(), -1);
    const int depth = suffix(root_, 0, devices_, 0);
    if (depth >= kInf) return false;
    out->stages.clear();
    emit_suffix(root_, 0, devices_, 0, out->stages);
    out->depth = depth;
    out->tps = 0;
    for (const auto& st : out->stages) {
      Agg a = zero();
      for (OpId id : st.ops) a.add(op_agg_[id]);
      out->tps = std::max(out->tps, tps(a, index_of(st.replicas)));
    }
    return true;
  }

 private:
  struct Piece {
    std::vector<OpId> ops;
    int parallel = -1;
    Agg agg;
  };
  struct Series {
    std::vector<Piece> pieces;
    Prefix prefix;  // over pieces
    std::vector<int> memo;
    std::vector<Choice> choice;
  };
  struct Parallel {
    std::vector<int> children;  // series indices
    Prefix prefix;  // over children
    std::vector<int> memo;
    std::vector<Choice> choice;
  };

  Agg zero() const {
    Agg a;
    a.comp.assign(degrees_.size(), 0), a.sync.assign(degrees_.size(), 0);
    return a;
  }
  int index_of(int replicas) const {
    return static_cast<int>(std::find(degrees_.begin(), degrees_.end(), replicas) - degrees_.begin());
  }
  Agg agg_of(const std::vector<OpId>& ops) const {
    Agg a = zero();
    for (OpId id : ops) a.add(op_agg_[id]);
    return a;
  }

  int add_series(const SpNode& node) {
    Series s;
    auto push = [&](const SpNode& n) {
      Piece piece;
      piece.ops = n.ops();
      piece.agg = agg_of(piece.ops);
      if (n.kind == SpNode::Kind::kParallel) piece.parallel = add_parallel(n);
      s.pieces.push_back(std::move(piece));
    };
    if (node.kind == SpNode::Kind::kSeries) {
      for (const auto& c : node.children) push(c);
    } else {
      push(node);
    }
    coarsen(s.pieces);
    s.prefix = Prefix(static_cast<int>(degrees_.size()));
    for (const auto& piece : s.pieces) s.prefix.push(piece.agg);
    const std::size_t states = (s.pieces.size() + 1) * (devices_ + 1) * (hcap_ + 1);
    s.memo.assign(states, -1);
    s.choice.assign(states, {});
    series_.push_back(std::move(s));
    return static_cast<int>(series_.size()) - 1;
  }

  int add_parallel(const SpNode& node) {
    Parallel q;
    q.prefix = Prefix(static_cast<int>(degrees_.size()));
    for (const auto& c : node.children) {
      q.children.push_back(add_series(c));
      q.prefix.push(agg_of(c.ops()));
    }
    const std::size_t n = q.children.size();
    q.memo.assign(n * n * (devices_ + 1) * (hcap_ + 1), -1);
    q.choice.assign(q.memo.size(), {});
    parallels_.push_back(std::move(q));
    return static_cast<int>(parallels_.size()) - 1;
  }

  // Merges the cheapest adjacent pair of plain pieces until at most
  // max_pieces remain, keeping parallel pieces whole.
  void coarsen(std::vector<Piece>& pieces) const {
    while (static_cast<int>(pieces.size()) > max_pieces_) {
      int best = -1;
      double best_cost = std::numeric_limits<double>::infinity();
      for (std::size_t i = 0; i + 1 < pieces.size(); ++i) {
        if (pieces[i].parallel >= 0 || pieces[i + 1].parallel >= 0) continue;
        const double c = pieces[i].agg.comp[0] + pieces[i + 1].agg.comp[0];
        if (c < best_cost) best_cost = c, best = static_cast<int>(i);
      }
      if (best < 0) return;
      auto& a = pieces[best];
      auto& b = pieces[best + 1];
      a.ops.insert(a.ops.end(), b.ops.begin(), b.ops.end());
      std::sort(a.ops.begin(), a.ops.end());
      a.agg.add(b.agg);
      pieces.erase(pieces.begin() + best + 1);
    }
  }

  double tps(const Agg& a, int k) const { return a.comp[k] / b_ + a.sync[k] / mini_; }
  // The same for the pieces [i, j) of a prefix.
  bool tps_ok(const Prefix& p, int i, int j, int k) const {
    const int n = p.degrees;
    const double comp = p.comp[j * n + k] - p.comp[i * n + k], sync = p.sync[j * n + k] - p.sync[i * n + k];
    if (bound_s_ > 0) return comp / b_ * mini_ <= bound_s_ && sync <= bound_s_;  // see prune()
    return comp / b_ + sync / mini_ <= target_;
  }
  bool fits(const Prefix& p, int i, int j, int k, int height) const {
    const double rows = static_cast<double>(b_ / degrees_[k]);
    return p.static_bytes[j] - p.static_bytes[i] +
               std::min(height, m_) * (p.act_per_row[j] - p.act_per_row[i]) * rows <=
           cap_;
  }
  std::size_t sidx(int i, int d, int delta) const {
    return (static_cast<std::size_t>(i) * (devices_ + 1) + d) * (hcap_ + 1) + delta;
  }
  std::size_t pidx(const Parallel& q, int i, int j, int d, int delta) const {
    const std::size_t n = q.children.size();
    return ((static_cast<std::size_t>(i) * n + j) * (devices_ + 1) + d) * (hcap_ + 1) + delta;
  }

  int suffix(int si, int i, int d, int delta) {
    Series& s = series_[si];
    const int n = static_cast<int>(s.pieces.size());
    if (i == n) return 0;
    if (d <= 0) return kInf;
    delta = std::min(delta, hcap_);
    const auto at = sidx(i, d, delta);
    if (s.memo[at] >= 0) return s.memo[at];
    int best = kInf;
    Choice choice;
    for (int j = i; j < n; ++j) {
      const Prefix& pre = series_[si].prefix;
      bool any_fast = false;
      for (int k = 0; k < static_cast<int>(degrees_.size()) && degrees_[k] <= d; ++k) {
        if (!tps_ok(pre, i, j + 1, k)) continue;
        any_fast = true;
        const int rest = suffix(si, j + 1, d - degrees_[k], delta);
        if (rest >= kInf || !fits(pre, i, j + 1, k, delta + rest + 1)) continue;
        if (1 + rest < best) best = 1 + rest, choice = {0, j, degrees_[k]};
        break;  // more devices for this group only leave fewer for the rest
      }
      const int par = series_[si].pieces[i].parallel;
      if (j == i && par >= 0) {
        const int branches = static_cast<int>(parallels_[par].children.size());
        for (int d1 = 1; d1 <= d; ++d1) {
          const int rest = suffix(si, i + 1, d - d1, delta);
          if (rest >= kInf) continue;
          const int u = split(par, 0, branches - 1, d1, delta + rest);
          if (u < kInf && u + rest < best) best = u + rest, choice = {1, i, d1};
        }
      }
      if (!any_fast) break;  // a longer group is slower still
    }
    series_[si].memo[at] = best;
    series_[si].choice[at] = choice;
    return best;
  }

  int split(int pi, int i, int j, int d, int delta) {
    if (d <= 0) return kInf;
    delta = std::min(delta, hcap_);
    if (i == j) return suffix(parallels_[pi].children[i], 0, d, delta);
    const auto at = pidx(parallels_[pi], i, j, d, delta);
    if (parallels_[pi].memo[at] >= 0) return parallels_[pi].memo[at];
    int best = kInf;
    Choice choice;
    const Prefix& pre = parallels_[pi].prefix;
    for (int k = 0; k < static_cast<int>(degrees_.size()) && degrees_[k] <= d; ++k) {
      if (tps_ok(pre, i, j + 1, k) && fits(pre, i, j + 1, k, delta + 1)) {
        best = 1, choice = {0, j, degrees_[k]};
        break;
      }
    }
    for (int l = i; l < j && best > 1; ++l) {
      for (int d1 = 1; d1 < d; ++d1) {
        const int left = split(pi, i, l, d1, delta);
        if (left >= best) continue;
        const int right = split(pi, l + 1, j, d - d1, delta);
        const int v = std::max(left, right);
        if (v < best) best = v, choice = {2, l, d1};
      }
    }
    parallels_[pi].memo[at] = best;
    parallels_[pi].choice[at] = choice;
    return best;
  }

  void emit_suffix(int si, int i, int d, int delta, std::vector<Planner::StageChoice>& out) {
    const Series& s = series_[si];
    if (i == static_cast<int>(s.pieces.size())) return;
    delta = std::min(delta, hcap_);
    const Choice c = s.choice[sidx(i, d, delta)];
    if (c.kind == 0) {
      Planner::StageChoice st{{}, c.dev};
      for (int p = i; p <= c.j; ++p) st.ops.insert(st.ops.end(), s.pieces[p].ops.begin(), s.pieces[p].ops.end());
      std::sort(st.ops.begin(), st.ops.end());
      out.push_back(std::move(st));
      emit_suffix(si, c.j + 1, d - c.dev, delta, out);
    } else {
      const int rest = suffix(si, i + 1, d - c.dev, delta);
      const int par = s.pieces[i].parallel;
      emit_split(par, 0, static_cast<int>(parallels_[par].children.size()) - 1, c.dev, delta + rest, out);
      emit_suffix(si, i + 1, d - c.dev, delta, out);
    }
  }

  void emit_split(int pi, int i, int j, int d, int delta, std::vector<Planner::StageChoice>& out) {
    delta = std::min(delta, hcap_);
    const Parallel& q = parallels_[pi];
    if (i == j) return emit_suffix(q.children[i], 0, d, delta, out);
    const Choice c = q.choice[pidx(q, i, j, d, delta)];
    if (c.kind == 0) {
      Planner::StageChoice st{{}, c.dev};
      for (int b = i; b <= j; ++b) {
        for (const auto& piece : series_[q.children[b]].pieces)
          st.ops.insert(st.ops.end(), piece.ops.begin(), piece.ops.end());
      }
      std::sort(st.ops.begin(), st.ops.end());
      out.push_back(std::move(st));
      return;
    }
    emit_split(pi, i, c.j, c.dev, delta, out);
    emit_split(pi, c.j + 1, j, d - c.dev, delta, out);
  }

  const Planner& p_;
  int max_pieces_ = 0;
  int b_, mini_ = 0, m_ = 0, devices_ = 0, hcap_ = 0, root_ = 0;
  double cap_ = 0, target_ = 0, bound_s_ = 0;
  std::vector<int> degrees_;
  std::vector<Agg> op_agg_;
  std::vector<Series> series_;
  std::vector<Parallel> parallels_;
};

}  // namespace

namespace {

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
  Engine engine(*this, sp, micro_batch);
  Search best;
  if (!engine.solve(std::numeric_limits<double>::infinity(), &best)) return std::nullopt;
  bisect(engine, 0, request_.tolerance, kInf, best);
  return best;
}

std::vector<Planner::Search> Planner::candidates(const graph::SpDecomposition& sp, int micro_batch,
                                                double bound_s) const {
  // Note [Depth sweep]: the TPS search minimises the bottleneck stage, but an
  // iteration takes about TPS x (B + (depth - 1) x b): a shallower pipeline
  // with a slightly slower bottleneck can win, most of all with few
  // micro-batches. So after the least TPS, look for the least TPS at each
  // smaller depth, as long as that estimate could still beat the best so far.
  //
  Engine engine(*this, sp, micro_batch);
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
  return out;
}

}  // namespace trident::plan
