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
#include <initializer_list>
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
  // 0 base stage, 1 parallel piece split among branches, 2 branch split,
  // 3 join merged into a branch group, 4 fork merged into a branch group,
  // 5 fork and join each merged into one of two branch groups
  int kind = -1;
  int j = 0, dev = 0;
  int side = 0, l = 0, d1 = 0;  // kinds 3, 4: which branch group absorbs, devices of the others
};

// A run [i, j) of a Prefix.
struct Span {
  const Prefix* p;
  int i, j;
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
    std::vector<int> next_parallel;  // per piece: the first parallel piece at or after it (or n)
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
    s.next_parallel.assign(s.pieces.size() + 1, static_cast<int>(s.pieces.size()));
    for (int i = static_cast<int>(s.pieces.size()) - 1; i >= 0; --i)
      s.next_parallel[i] = s.pieces[i].parallel >= 0 ? i : s.next_parallel[i + 1];
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
  // A stage made of several runs (a branch group and a fork or join).
  bool tps_ok(std::initializer_list<Span> spans, int k) const {
    double comp = 0, sync = 0;
    for (const auto& s : spans) {
      const int n = s.p->degrees;
      comp += s.p->comp[s.j * n + k] - s.p->comp[s.i * n + k];
      sync += s.p->sync[s.j * n + k] - s.p->sync[s.i * n + k];
    }
    if (bound_s_ > 0) return comp / b_ * mini_ <= bound_s_ && sync <= bound_s_;
    return comp / b_ + sync / mini_ <= target_;
  }
  bool fits(std::initializer_list<Span> spans, int k, int height) const {
    double stat = 0, act = 0;
    for (const auto& s : spans) {
      stat += s.p->static_bytes[s.j] - s.p->static_bytes[s.i];
      act += s.p->act_per_row[s.j] - s.p->act_per_row[s.i];
    }
    return stat + std::min(height, m_) * act * static_cast<double>(b_ / degrees_[k]) <= cap_;
  }
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
      // Splitting off a group leaves depth >= 2: with best <= 2 only the
      // whole suffix as one stage can still improve.
      if (best <= 2 && j + 1 < n) j = n - 1;
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
        join(si, i, d, delta, best, choice);
      }
      if (!any_fast) break;  // a longer group is slower still
    }
    fork(si, i, d, delta, best, choice);
    fork_join(si, i, d, delta, best, choice);
    series_[si].memo[at] = best;
    series_[si].choice[at] = choice;
    return best;
  }

  // Note [Fork and join stages]: the SP tree alone cannot put a fork (the
  // pieces before a parallel node) or a join (the pieces after it) in the
  // same stage as a branch. join() and fork() allow it for a group of
  // branches at either end that forms one stage, the other branches split as
  // usual; fork_join() puts the fork with one end group and the join with the
  // other. Such a stage is convex: the other branches only read
  // from a fork stage, and only feed a join stage.
  //
  // Join: piece i is parallel; pieces i+1..t join a branch group's stage,
  // which is then the last stage of the unit (height delta + rest + 1).
  void join(int si, int i, int d, int delta, int& best, Choice& choice) {
    const Series& s = series_[si];
    const int n = static_cast<int>(s.pieces.size()), par = s.pieces[i].parallel;
    const Parallel& q = parallels_[par];
    const int nq = static_cast<int>(q.children.size());
    for (int t = i + 1; t < n && best > 2; ++t) {
      if (s.pieces[t].parallel >= 0) break;
      bool any_fast = false;
      for (int side = 0; side < 2; ++side) {
        for (int l = 0; l + 1 < nq; ++l) {
          const int lo = side ? l + 1 : 0, hi = side ? nq : l + 1;         // absorbing [lo, hi)
          const int olo = side ? 0 : l + 1, ohi = side ? l : nq - 1;       // others, inclusive
          const Span a{&q.prefix, lo, hi}, b{&s.prefix, i + 1, t + 1};
          for (int k = 0; k < static_cast<int>(degrees_.size()) && degrees_[k] < d; ++k) {
            if (!tps_ok({a, b}, k)) continue;
            any_fast = true;
            for (int d1 = 1; d1 <= d - degrees_[k]; ++d1) {
              const int rest = suffix(si, t + 1, d - degrees_[k] - d1, delta);
              if (rest >= kInf || 1 + rest >= best || !fits({a, b}, k, delta + rest + 1)) continue;
              const int other = split(par, olo, ohi, d1, delta + rest + 1);
              if (other < kInf && rest + 1 + other < best) {
                best = rest + 1 + other;
                choice = {3, t, degrees_[k], side, l, d1};
              }
            }
          }
        }
      }
      if (!any_fast) break;
    }
  }

  // Fork: pieces i..p-1 (none parallel) precede parallel piece p and join a
  // branch group's stage, which feeds the other branches and the rest.
  void fork(int si, int i, int d, int delta, int& best, Choice& choice) {
    const Series& s = series_[si];
    const int n = static_cast<int>(s.pieces.size());
    const int p = s.next_parallel[i];
    if (p == i || p == n || best <= 2) return;
    const int par = s.pieces[p].parallel;
    const Parallel& q = parallels_[par];
    const int nq = static_cast<int>(q.children.size());
    for (int side = 0; side < 2; ++side) {
      for (int l = 0; l + 1 < nq; ++l) {
        const int lo = side ? l + 1 : 0, hi = side ? nq : l + 1;
        const int olo = side ? 0 : l + 1, ohi = side ? l : nq - 1;
        const Span a{&q.prefix, lo, hi}, b{&s.prefix, i, p};
        for (int k = 0; k < static_cast<int>(degrees_.size()) && degrees_[k] < d; ++k) {
          if (!tps_ok({a, b}, k)) continue;
          for (int d1 = 1; d1 <= d - degrees_[k]; ++d1) {
            const int rest = suffix(si, p + 1, d - degrees_[k] - d1, delta);
            if (rest >= kInf || 1 + rest >= best) continue;
            const int other = split(par, olo, ohi, d1, delta + rest);
            if (other >= kInf || !fits({a, b}, k, delta + rest + other + 1)) continue;
            if (rest + other + 1 < best) {
              best = rest + other + 1;
              choice = {4, p, degrees_[k], side, l, d1};
            }
          }
        }
      }
    }
  }

  // Fork and join together: pieces i..p-1 join one end group of parallel
  // piece p, pieces p+1..t the other end group, so the parallel node runs as
  // two stages (the fork stage feeds the join stage).
  void fork_join(int si, int i, int d, int delta, int& best, Choice& choice) {
    const Series& s = series_[si];
    const int n = static_cast<int>(s.pieces.size());
    const int p = s.next_parallel[i];
    if (p == i || p == n || best <= 2) return;
    const Parallel& q = parallels_[s.pieces[p].parallel];
    const int nq = static_cast<int>(q.children.size());
    for (int t = p + 1; t < n && s.pieces[t].parallel < 0; ++t) {
      bool any_fast = false;
      for (int side = 0; side < 2; ++side) {
        for (int l = 0; l + 1 < nq; ++l) {
          // side 0: the fork takes branches [0, l], the join the others.
          const Span fb = side ? Span{&q.prefix, l + 1, nq} : Span{&q.prefix, 0, l + 1};
          const Span jb = side ? Span{&q.prefix, 0, l + 1} : Span{&q.prefix, l + 1, nq};
          const Span fp{&s.prefix, i, p}, jp{&s.prefix, p + 1, t + 1};
          for (int kj = 0; kj < static_cast<int>(degrees_.size()) && degrees_[kj] < d; ++kj) {
            if (!tps_ok({jb, jp}, kj)) continue;
            any_fast = true;
            for (int kf = 0; kf < static_cast<int>(degrees_.size()) && degrees_[kf] + degrees_[kj] <= d; ++kf) {
              if (!tps_ok({fb, fp}, kf)) continue;
              const int rest = suffix(si, t + 1, d - degrees_[kf] - degrees_[kj], delta);
              if (rest >= kInf || rest + 2 >= best) continue;
              if (!fits({jb, jp}, kj, delta + rest + 1) || !fits({fb, fp}, kf, delta + rest + 2)) continue;
              best = rest + 2;
              choice = {5, t, degrees_[kf], side, l, degrees_[kj]};
            }
          }
        }
      }
      if (!any_fast) break;
    }
  }

  void add_branch_ops(int pi, int lo, int hi, std::vector<OpId>& out) const {  // children [lo, hi)
    for (int c = lo; c < hi; ++c)
      for (const auto& piece : series_[parallels_[pi].children[c]].pieces)
        out.insert(out.end(), piece.ops.begin(), piece.ops.end());
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
    } else if (c.kind == 5) {
      int p = i;
      while (s.pieces[p].parallel < 0) ++p;
      const int par = s.pieces[p].parallel;
      const int nq = static_cast<int>(parallels_[par].children.size());
      Planner::StageChoice fork{{}, c.dev}, join{{}, c.d1};
      add_branch_ops(par, c.side ? c.l + 1 : 0, c.side ? nq : c.l + 1, fork.ops);
      add_branch_ops(par, c.side ? 0 : c.l + 1, c.side ? c.l + 1 : nq, join.ops);
      for (int x = i; x < p; ++x) fork.ops.insert(fork.ops.end(), s.pieces[x].ops.begin(), s.pieces[x].ops.end());
      for (int x = p + 1; x <= c.j; ++x) join.ops.insert(join.ops.end(), s.pieces[x].ops.begin(), s.pieces[x].ops.end());
      std::sort(fork.ops.begin(), fork.ops.end());
      std::sort(join.ops.begin(), join.ops.end());
      out.push_back(std::move(fork));
      out.push_back(std::move(join));
      emit_suffix(si, c.j + 1, d - c.dev - c.d1, delta, out);
    } else if (c.kind == 3 || c.kind == 4) {
      // See Note [Fork and join stages].
      const bool join = c.kind == 3;
      const int par = s.pieces[join ? i : c.j].parallel;
      const int nq = static_cast<int>(parallels_[par].children.size());
      const int lo = c.side ? c.l + 1 : 0, hi = c.side ? nq : c.l + 1;
      const int olo = c.side ? 0 : c.l + 1, ohi = c.side ? c.l : nq - 1;
      const int left = d - c.dev - c.d1;
      const int rest = suffix(si, c.j + 1, left, delta);
      Planner::StageChoice st{{}, c.dev};
      add_branch_ops(par, lo, hi, st.ops);
      for (int p = join ? i + 1 : i; p < (join ? c.j + 1 : c.j); ++p)
        st.ops.insert(st.ops.end(), s.pieces[p].ops.begin(), s.pieces[p].ops.end());
      std::sort(st.ops.begin(), st.ops.end());
      out.push_back(std::move(st));
      emit_split(par, olo, ohi, c.d1, join ? delta + rest + 1 : delta + rest, out);
      emit_suffix(si, c.j + 1, left, delta, out);
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
        if (o.stages[i].ops != s.stages[i].ops || o.stages[i].replicas != s.stages[i].replicas) return false;
      return true;
    };
    if (std::none_of(out.begin(), out.end(), same)) out.push_back(std::move(s));
  }
  return out;
}

}  // namespace trident::plan
