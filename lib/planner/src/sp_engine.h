// Internal: the dynamic program of GraphPipe's partitioner (docs/algorithms.md §2,
// Algorithm 1) over an SP decomposition, for one micro-batch size. Planner::
// search (search.cc) runs it inside a binary search on the target TPS.
//
// For a target time per sample T, the search asks for the least pipeline
// depth with which the whole graph runs on the devices there are. It is
// solved the other way round (see Note [Devices for a depth]): for each
// sub-problem and each depth budget h, the fewest devices that run it with
// depth at most h when δ stages lie downstream of it:
//   series suffix  S(i, h, δ): the first group of pieces i..j is one stage on
//                  d' devices (a power of two dividing the micro-batch), or,
//                  when piece i is a parallel node, split among its branches;
//                  the rest gets depth r < h, which sets the group's
//                  in-flight count (δ + r + 1 under graph-1F1B).
//   parallel       P(i..j, h, δ): all branches i..j as one stage, or split at
//                  l: P(i..l, h, δ) + P(l+1..j, h, δ).
// A stage is feasible when its TPS ≤ T and its memory (see Note [Stage memory])
// with in-flight min(height, micro-batches) fits. The least depth is the
// least h whose S(0, h, 0) is at most the devices: a shallower pipeline has
// fewer bubbles and less activation memory upstream.
//
// Note [Devices for a depth]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// Asked as "the least depth on d devices", the table has a row per device
// count: its size and the loops that split devices between two parts grow
// with the cluster (18 s for mmt at 256 devices). Asked as "the fewest
// devices for depth h", it has a row per depth, and depths are few (a
// pipeline deeper than its pieces is impossible, and budgets above a
// sub-problem's deepest plan are clamped to it); splitting devices becomes a
// sum, and splitting depth a loop over a few budgets. The least depth on d
// devices is then the least h with S(i, h, δ) <= d (depth()).
//
// Which plan of that depth: the fewest devices would leave devices idle that
// a plan of the same depth could use (a shorter critical path). So the plan
// is read out as the device-indexed program picked it: at each step along
// the plan, the first option in a fixed order (shortest first group, fewest
// replicas, fewest devices for the branches) of least depth on the devices
// that step has, each option's depth read from the table (sp_replay.cc).
// Only the steps of one plan are visited, and the plans are the ones the
// device-indexed program found (the same JSON on 104 planning problems).
#pragma once

#include <algorithm>
#include <initializer_list>
#include <cstdint>
#include <limits>
#include <map>
#include <vector>

#include "trident/planner/estimate.h"
#include "trident/graph/sp.h"

namespace trident::planner::detail {

using graph::OpId;
using graph::SpNode;
constexpr int kInf = 1 << 20;

// Stage quantities that add up over ops, per stage config index
// (StageConfig: replicas and micro-batch units).
struct Agg {
  std::vector<double> comp, fwd, sync;  // per micro-batch slice (comp: forward + backward) / per iteration
  std::vector<double> static_bytes;  // per replica: PS-synced optimizer state is 1/d of it
  double act_per_row = 0;
  void add(const Agg& o) {
    for (std::size_t k = 0; k < comp.size(); ++k)
      comp[k] += o.comp[k], fwd[k] += o.fwd[k], sync[k] += o.sync[k], static_bytes[k] += o.static_bytes[k];
    act_per_row += o.act_per_row;
  }
};

// Prefix sums of Agg over a sequence of pieces, flat so that the DP's inner
// loop reads an interval's totals without allocating; and, for Note
// [Recomputation costs], the input bytes per row of every run of pieces.
struct Prefix {
  int configs = 0;
  std::vector<double> comp, fwd, sync, static_bytes, act_per_row;  // comp/fwd/sync/static_bytes: [i * configs + k]
  std::vector<double> inputs;  // [i * (pieces + 1) + j]: input_bytes_per_row of pieces [i, j)
  std::vector<std::vector<OpId>> parts;  // the ops of each piece
  explicit Prefix(int k = 0)
      : configs(k), comp(k, 0), fwd(k, 0), sync(k, 0), static_bytes(k, 0), act_per_row(1, 0) {}
  void push(const Agg& a) {
    const std::size_t base = comp.size() - configs;
    for (int k = 0; k < configs; ++k) {
      comp.push_back(comp[base + k] + a.comp[k]);
      fwd.push_back(fwd[base + k] + a.fwd[k]);
      sync.push_back(sync[base + k] + a.sync[k]);
      static_bytes.push_back(static_bytes[base + k] + a.static_bytes[k]);
    }
    act_per_row.push_back(act_per_row.back() + a.act_per_row);
  }
  // Fills `inputs` for pieces of these ops (in the order pushed): input_bytes_per_row
  // (estimate.h) of every run, grown one piece at a time instead of per run.
  void set_inputs(const graph::OpGraph& g, const std::vector<std::vector<OpId>>& pieces);
  double inputs_of(int i, int j) const { return inputs[static_cast<std::size_t>(i) * (act_per_row.size()) + j]; }
};

// How a plan splits a run of pieces (a suffix [i, ...) of a series, or
// branches [i, j] of a parallel piece) on d devices; emit_suffix /
// emit_split follow it.
struct Choice {
  enum class Kind {
    kNone,         // no plan
    kStage,        // pieces (or branches) up to `j` become one stage on `dev` devices, of `u` units
    kBranches,     // the parallel piece at i is split among its branches on `dev` devices
    kBranchSplit,  // branches [i, j] split after branch `j`: the first part on `dev` devices
    kJoinMerged,   // See Note [Fork and join stages]: the join, pieces up to `j` and one branch
                   // group (`side`, `l`) form a stage on `dev`; the other branches get `d1`
    kForkMerged,   // the same for the fork: the pieces before `j`, the fork and one group
    kForkAndJoin,  // the fork with one group on `dev`, the join with the other on `d1`
  };
  Kind kind = Kind::kNone;
  int j = 0, dev = 0;
  // kJoinMerged, kForkMerged, kForkAndJoin: the merged group is branches
  // [0, l] when side is 0, else [l + 1, n); d1 devices go to the other part.
  int side = 0, l = 0, d1 = 0;
  // The micro-batch units of the stage on `dev` and (kForkAndJoin) of the
  // join stage on `d1`.
  int u = 1, u1 = 1;
};

// A run [i, j) of a Prefix.
struct Span {
  const Prefix* p;
  int i, j;
};

class Engine {
 public:
  // Stages run at b x 1, 2, ..., `ratio` (see Note [Per-stage micro-batch sizes]).
  Engine(const Planner& p, const graph::SpDecomposition& sp, int b, int ratio);

  // Whether some plan could finish an iteration within `bound_s`: every
  // stage computes B x compute/b and syncs within it. An iteration lasts at
  // least its busiest stage's compute and at least any stage's sync, so if
  // none fits, no plan at this micro-batch can beat `bound_s`.
  bool prune(double bound_s);

  // Feasibility at target T; fills `out` with a least-depth partition.
  bool solve(double target, Planner::Search* out);

 private:
  struct Piece {
    std::vector<OpId> ops;
    int parallel = -1;
    Agg agg;
  };
  // A memo cell: valid when `solve` equals the engine's current solve.
  struct Cell {
    int solve = -1;
    int devices = 0;
  };
  // Cells by δ (allocated when first used: most sub-problems see few δ),
  // then by position and depth budget.
  using Memo = std::vector<std::vector<Cell>>;
  struct Series {
    std::vector<Piece> pieces;
    std::vector<int> next_parallel;  // per piece: the first parallel piece at or after it (or n)
    std::vector<int> deepest;        // per piece i: the deepest plan of pieces i..n-1 (n: 0)
    Prefix prefix;                   // over pieces
    Memo memo;                       // [δ][i * (deepest[0] + 1) + h]
    std::vector<int> fast, fast_solve;  // last_fast's answers [i * configs + k], and their solve
  };
  struct Parallel {
    std::vector<int> children;  // series indices
    std::vector<int> deepest;   // [i * n + j]: the deepest plan of branches i..j (j >= i)
    Prefix prefix;              // over children
    Memo memo;                  // [δ][(i * n + j) * (deepest of all + 1) + h]
  };

  Agg zero() const {
    Agg a;
    a.comp.assign(configs_.size(), 0), a.fwd.assign(configs_.size(), 0), a.sync.assign(configs_.size(), 0);
    a.static_bytes.assign(configs_.size(), 0);
    return a;
  }
  int index_of(int replicas, int units) const {
    for (int k = 0; k < config_count(); ++k)
      if (dev(k) == replicas && this->units(k) == units) return k;
    return -1;
  }
  Agg agg_of(const std::vector<OpId>& ops) const {
    Agg a = zero();
    for (OpId id : ops) a.add(op_agg_[id]);
    return a;
  }
  int config_count() const { return static_cast<int>(configs_.size()); }
  int dev(int k) const { return configs_[k].replicas; }
  int units(int k) const { return configs_[k].units; }
  int size(int k) const { return b_ * configs_[k].units; }  // the stage's micro-batch

  int add_series(const SpNode& node);

  int add_parallel(const SpNode& node);

  // Merges the cheapest adjacent pair of plain pieces until at most
  // max_pieces remain, keeping parallel pieces whole.
  void coarsen(std::vector<Piece>& pieces) const;

  double tps(const Agg& a, int k) const { return a.comp[k] / size(k) + a.sync[k] / mini_; }
  // A stage's totals over its runs (several: a branch group and a fork or
  // join), with its input bytes per row (see Note [Pricing recomputation]).
  struct Totals {
    double comp = 0, fwd = 0, sync = 0, stat = 0, act = 0;
  };
  Totals totals(std::initializer_list<Span> spans, int k) const {
    Totals t;
    for (const auto& s : spans) {
      const int n = s.p->configs;
      t.comp += s.p->comp[s.j * n + k] - s.p->comp[s.i * n + k];
      t.fwd += s.p->fwd[s.j * n + k] - s.p->fwd[s.i * n + k];
      t.sync += s.p->sync[s.j * n + k] - s.p->sync[s.i * n + k];
      t.stat += s.p->static_bytes[s.j * n + k] - s.p->static_bytes[s.i * n + k];
      t.act += s.p->act_per_row[s.j] - s.p->act_per_row[s.i];
    }
    return t;
  }
  // A stage's input bytes per row: exact for one run; several runs feed each
  // other, so their union's are computed (and memoised).
  double inputs(std::initializer_list<Span> spans) const {
    const Span* one = nullptr;
    int runs = 0;
    for (const auto& s : spans)
      if (s.j > s.i) one = &s, ++runs;
    if (runs > 1) return merged_inputs(spans);
    return one ? one->p->inputs_of(one->i, one->j) : 0;
  }
  // The input bytes per row of a stage of several runs (a run feeds the
  // next, so their sum would count what passes inside), memoised.
  double merged_inputs(std::initializer_list<Span> spans) const;
  mutable std::map<std::vector<std::intptr_t>, double> merged_inputs_;
  // Whether a stage of config k computing `comp` per micro-batch meets the
  // target (see prune() for bound_s_).
  bool time_ok(double comp, double sync, int k) const {
    if (bound_s_ > 0) return comp / size(k) * mini_ <= bound_s_ && sync <= bound_s_;
    return comp / size(k) + sync / mini_ <= target_;
  }
  // The stage meets the target — recomputing when the rule is always; under
  // auto, fits() adds the recomputing stage's time where it needs it.
  bool tps_ok(std::initializer_list<Span> spans, int k) const {
    const Totals t = totals(spans, k);
    return time_ok(recompute_ == Recompute::kAlways ? t.comp + t.fwd : t.comp, t.sync, k);
  }
  // Memory at `height` units (see Note [Stage memory], see Note [Recomputation
  // costs], see Note [Per-stage micro-batch sizes]).
  bool fits(std::initializer_list<Span> spans, int k, int height) const {
    const Totals t = totals(spans, k);
    const double rows = static_cast<double>(size(k) / dev(k)), h = in_flight_at(height, units(k), m_);
    const bool plain = t.stat + h * t.act * rows <= cap_;
    if (recompute_ == Recompute::kNever || (plain && recompute_ == Recompute::kAuto)) return plain;
    if (recompute_ == Recompute::kAuto && !time_ok(t.comp + t.fwd, t.sync, k)) return false;
    return t.stat + t.act * rows + h * inputs(spans) * rows <= cap_;
  }
  // The most units of stages that may lie downstream of a stage of `spans`
  // in config k with δ = delta besides the sub-problem's own (its height is
  // delta + that + units(k)): -1 when it fits at no height, kInf when at any.
  int room(std::initializer_list<Span> spans, int k, int delta) const;
  // The same for the pieces [i, j) of a prefix.
  bool tps_ok(const Prefix& p, int i, int j, int k) const { return tps_ok({Span{&p, i, j}}, k); }
  bool fits(const Prefix& p, int i, int j, int k, int height) const { return fits({Span{&p, i, j}}, k, height); }

  // The memo cell of S(i, h, δ) / P(i..j, h, δ), h and δ already clamped.
  Cell& cell(Series& s, int i, int h, int delta);
  Cell& cell(Parallel& q, int i, int j, int h, int delta);

  // S(i, h, δ): the fewest devices for pieces i.. of series si with depth at
  // most h, or kInf when more than the cluster has.
  //
  // Note [Longest groups]
  // ~~~~~~~~~~~~~~~~~~~~~
  // For the first group i..j on one replica count: the fast groups are a
  // prefix of j (a longer group is slower), the budget r left to the rest
  // (the deepest the group's memory allows, at most h - 1) only shrinks as j
  // grows, and fewer pieces never need more devices (drop a piece from a
  // plan and it still runs). So for each budget the longest group that keeps
  // it needs the fewest devices: a few candidates per replica count, found
  // by bisection, instead of every j.
  int suffix(int si, int i, int h, int delta);

  // The last j whose group i..j in config k meets the target
  // (i - 1: none), kept for the current solve.
  int last_fast(Series& s, int i, int k);

  // The last x in [lo, hi] with pred(x), for pred true on a prefix of it
  // (lo - 1 when pred(lo) is false).
  template <class Pred>
  static int last_true(int lo, int hi, Pred pred) {
    int good = lo - 1, bad = hi + 1;
    while (bad - good > 1) {
      const int mid = good + (bad - good) / 2;
      if (pred(mid)) {
        good = mid;
      } else {
        bad = mid;
      }
    }
    return good;
  }

  // P(i..j, h, δ) of parallel piece pi.
  int split(int pi, int i, int j, int h, int delta);

  // A stage of Note [Fork and join stages]: the branch group `group` of
  // parallel piece `par` with the series' pieces `pieces` (for a fork and
  // join, the join stage; the fork stage is `fork_group` with `fork_pieces`).
  // The other branches are olo..ohi, inclusive. `t` is the last piece joined
  // (join, fork and join) or the parallel piece (fork).
  struct Merge {
    int t = 0, side = 0, l = 0, par = 0, olo = 0, ohi = 0;
    Span group, pieces, fork_group, fork_pieces;
  };
  // The group at one end of parallel piece par: branches [0, l] when side is
  // 0, else [l + 1, n).
  Merge merge(int par, int side, int l) const {
    const Parallel& q = parallels_[par];
    const int nq = static_cast<int>(q.children.size());
    Merge m;
    m.side = side, m.l = l, m.par = par;
    m.group = side ? Span{&q.prefix, l + 1, nq} : Span{&q.prefix, 0, l + 1};
    m.olo = side ? 0 : l + 1, m.ohi = side ? l : nq - 1;
    return m;
  }
  // Every merge of one kind for pieces i.. of series si, in a fixed order,
  // to visit(m). Join and fork-and-join grow the run of joined pieces while
  // more() holds and the shorter run had a stage that met the target (visit
  // returned true for some group).
  template <class More, class Visit>
  void joins(int si, int i, More more, Visit visit) const {
    const Series& s = series_[si];
    const int n = static_cast<int>(s.pieces.size()), par = s.pieces[i].parallel;
    const int nq = static_cast<int>(parallels_[par].children.size());
    for (int t = i + 1; t < n && more() && s.pieces[t].parallel < 0; ++t) {
      bool any_fast = false;
      for (int side = 0; side < 2; ++side) {
        for (int l = 0; l + 1 < nq; ++l) {
          Merge m = merge(par, side, l);
          m.t = t, m.pieces = Span{&s.prefix, i + 1, t + 1};
          if (visit(m)) any_fast = true;
        }
      }
      if (!any_fast) break;
    }
  }
  template <class Visit>
  void forks(int si, int i, Visit visit) const {
    const Series& s = series_[si];
    const int n = static_cast<int>(s.pieces.size()), p = s.next_parallel[i];
    if (p == i || p == n) return;
    const int nq = static_cast<int>(parallels_[s.pieces[p].parallel].children.size());
    for (int side = 0; side < 2; ++side) {
      for (int l = 0; l + 1 < nq; ++l) {
        Merge m = merge(s.pieces[p].parallel, side, l);
        m.t = p, m.pieces = Span{&s.prefix, i, p};
        visit(m);
      }
    }
  }
  template <class Visit>
  void fork_joins(int si, int i, Visit visit) const {
    const Series& s = series_[si];
    const int n = static_cast<int>(s.pieces.size()), p = s.next_parallel[i];
    if (p == i || p == n) return;
    const int par = s.pieces[p].parallel, nq = static_cast<int>(parallels_[par].children.size());
    for (int t = p + 1; t < n && s.pieces[t].parallel < 0; ++t) {
      bool any_fast = false;
      for (int side = 0; side < 2; ++side) {
        for (int l = 0; l + 1 < nq; ++l) {
          // side 0: the fork takes branches [0, l], the join the others.
          Merge m = merge(par, side, l);
          m.t = t, m.fork_group = m.group, m.fork_pieces = Span{&s.prefix, i, p};
          m.group = Span{m.group.p, m.olo, m.ohi + 1}, m.pieces = Span{&s.prefix, p + 1, t + 1};
          if (visit(m)) any_fast = true;
        }
      }
      if (!any_fast) break;
    }
  }

  void join(int si, int i, int h, int delta, int& best);

  // Fork: pieces i..p-1 (none parallel) precede parallel piece p and join a
  // branch group's stage, which feeds the other branches and the rest.
  void fork(int si, int i, int h, int delta, int& best);

  // Fork and join together: pieces i..p-1 join one end group of parallel
  // piece p, pieces p+1..t the other end group, so the parallel node runs as
  // two stages (the fork stage feeds the join stage).
  void fork_join(int si, int i, int h, int delta, int& best);

  // sp_replay.cc. The least depth of pieces i.. of series si on d devices
  // (kInf: none), and of branches i..j of parallel piece pi.
  int depth(int si, int i, int d, int delta);
  int split_depth(int pi, int i, int j, int d, int delta);

  // The first option of least depth for pieces i.. (i < n) on d devices, and
  // for branches i..j (i < j); the join, fork and fork-and-join options
  // lower (best, choice) where they do better.
  Choice choose_suffix(int si, int i, int d, int delta);
  Choice choose_split(int pi, int i, int j, int d, int delta);
  void choose_join(int si, int i, int d, int delta, int& best, Choice& choice);
  void choose_fork(int si, int i, int d, int delta, int& best, Choice& choice);
  void choose_fork_join(int si, int i, int d, int delta, int& best, Choice& choice);

  void add_branch_ops(int pi, int lo, int hi, std::vector<OpId>& out) const {  // children [lo, hi)
    for (int c = lo; c < hi; ++c)
      for (const auto& piece : series_[parallels_[pi].children[c]].pieces)
        out.insert(out.end(), piece.ops.begin(), piece.ops.end());
  }

  void emit_suffix(int si, int i, int d, int delta, std::vector<Planner::StageChoice>& out);

  void emit_split(int pi, int i, int j, int d, int delta, std::vector<Planner::StageChoice>& out);

  // Note [Monotone device splits]
  // ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
  // A sub-problem's least depth never grows with more devices: every plan
  // on d devices is a plan on d + 1. So where a loop gives x devices to one
  // part and the rest to another, the rest's depth g(x) is a non-decreasing
  // step function of x with few steps (depths are small), and for one value
  // of g the first part's depth h(x) is non-increasing. Within a step the
  // last x is therefore the best, and the first x that does as well is found
  // by bisection: O(steps x log D) depths per loop instead of D, and the
  // same choice as the plain loop (the smallest x of the least depth).
  //
  // for_each_step calls run(a, b, v) for each maximal run [a, b] of [lo, hi]
  // on which g is v (< kInf), in order, until run returns false.
  template <class G, class Run>
  static void for_each_step(int lo, int hi, G g, Run run) {
    for (int x = lo; x <= hi;) {
      const int v = g(x);
      if (v >= kInf) return;
      int good = x, bad = hi + 1;  // g(good) == v; g(bad) > v or bad is past hi
      for (int step = 1; good + step < bad; step *= 2) {
        if (g(good + step) != v) {
          bad = good + step;
          break;
        }
        good += step;
      }
      while (bad - good > 1) {
        const int mid = good + (bad - good) / 2;
        if (g(mid) == v) {
          good = mid;
        } else {
          bad = mid;
        }
      }
      if (!run(x, good, v)) return;
      x = good + 1;
    }
  }
  // The least x in [lo, hi] with h(x) <= v, for h non-increasing, h(hi) <= v.
  template <class H>
  static int first_at_most(int lo, int hi, H h, int v) {
    while (lo < hi) {
      const int mid = lo + (hi - lo) / 2;
      if (h(mid) <= v) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    return lo;
  }

  enum class Recompute { kNever, kAuto, kAlways };
  Recompute recompute_ = Recompute::kAuto;
  const Planner& p_;
  int max_pieces_ = 0;
  int b_, mini_ = 0, m_ = 0, devices_ = 0, hcap_ = 0, root_ = 0;
  int solve_ = 0;  // the current solve, for the memo
  double cap_ = 0, target_ = 0, bound_s_ = 0;
  std::vector<StageConfig> configs_;
  int max_units_ = 1;
  std::vector<std::pair<OpId, OpId>> added_edges_;  // the SP-ization's, for stage heights
  std::vector<Agg> op_agg_;
  std::vector<Series> series_;
  std::vector<Parallel> parallels_;
};

}  // namespace trident::planner::detail
