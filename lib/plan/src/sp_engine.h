// Internal: the dynamic program of GraphPipe's partitioner (docs/algorithms.md §2,
// Algorithm 1) over an SP decomposition, for one micro-batch size. Planner::
// search (search.cc) runs it inside a binary search on the target TPS.
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
//
// sp_engine.cc holds the construction and the plain series / parallel cases;
// fork_join.cc the stages that join a branch group with the pieces before or
// after its parallel node (Note [Fork and join stages]).
#pragma once

#include <algorithm>
#include <initializer_list>
#include <limits>
#include <vector>

#include "estimate.h"
#include "trident/graph/sp.h"

namespace trident::plan::detail {

using graph::OpId;
using graph::SpNode;
constexpr int kInf = 1 << 20;

// Stage quantities that add up over ops, per data-parallel degree index.
struct Agg {
  std::vector<double> comp, sync;  // per micro-batch slice / per iteration
  double static_bytes = 0, act_per_row = 0;
  void add(const Agg& o) {
    for (std::size_t k = 0; k < comp.size(); ++k) comp[k] += o.comp[k], sync[k] += o.sync[k];
    static_bytes += o.static_bytes, act_per_row += o.act_per_row;
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

// How the search split a run of pieces (a suffix [i, ...) of a series, or
// branches [i, j] of a parallel piece); emit_suffix / emit_split replay it.
struct Choice {
  enum class Kind {
    kNone,         // not searched yet
    kStage,        // pieces (or branches) up to `j` become one stage on `dev` devices
    kBranches,     // the parallel piece at i is split among its branches on `dev` devices
    kBranchSplit,  // branches [i, j] split after branch `j`: the first part on `dev` devices
    kJoinMerged,   // Note [Fork and join stages]: the join, pieces up to `j` and one branch
                   // group (`side`, `l`) form a stage on `dev`; the other branches get `d1`
    kForkMerged,   // the same for the fork: the pieces before `j`, the fork and one group
    kForkAndJoin,  // the fork with one group on `dev`, the join with the other on `d1`
  };
  Kind kind = Kind::kNone;
  int j = 0, dev = 0;
  // kJoinMerged, kForkMerged, kForkAndJoin: the merged group is branches
  // [0, l] when side is 0, else [l + 1, n); d1 devices go to the other part.
  int side = 0, l = 0, d1 = 0;
};

// A run [i, j) of a Prefix.
struct Span {
  const Prefix* p;
  int i, j;
};
class Engine {
 public:
  Engine(const Planner& p, const graph::SpDecomposition& sp, int b);

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

  int add_series(const SpNode& node);

  int add_parallel(const SpNode& node);

  // Merges the cheapest adjacent pair of plain pieces until at most
  // max_pieces remain, keeping parallel pieces whole.
  void coarsen(std::vector<Piece>& pieces) const;

  double tps(const Agg& a, int k) const { return a.comp[k] / b_ + a.sync[k] / mini_; }
  // A stage made of several runs (a branch group and a fork or join).
  // (see prune() for bound_s_)
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
  bool tps_ok(const Prefix& p, int i, int j, int k) const { return tps_ok({Span{&p, i, j}}, k); }
  bool fits(const Prefix& p, int i, int j, int k, int height) const { return fits({Span{&p, i, j}}, k, height); }
  std::size_t sidx(int i, int d, int delta) const {
    return (static_cast<std::size_t>(i) * (devices_ + 1) + d) * (hcap_ + 1) + delta;
  }
  std::size_t pidx(const Parallel& q, int i, int j, int d, int delta) const {
    const std::size_t n = q.children.size();
    return ((static_cast<std::size_t>(i) * n + j) * (devices_ + 1) + d) * (hcap_ + 1) + delta;
  }

  int suffix(int si, int i, int d, int delta);

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
  void join(int si, int i, int d, int delta, int& best, Choice& choice);

  // Fork: pieces i..p-1 (none parallel) precede parallel piece p and join a
  // branch group's stage, which feeds the other branches and the rest.
  void fork(int si, int i, int d, int delta, int& best, Choice& choice);

  // Fork and join together: pieces i..p-1 join one end group of parallel
  // piece p, pieces p+1..t the other end group, so the parallel node runs as
  // two stages (the fork stage feeds the join stage).
  void fork_join(int si, int i, int d, int delta, int& best, Choice& choice);

  void add_branch_ops(int pi, int lo, int hi, std::vector<OpId>& out) const {  // children [lo, hi)
    for (int c = lo; c < hi; ++c)
      for (const auto& piece : series_[parallels_[pi].children[c]].pieces)
        out.insert(out.end(), piece.ops.begin(), piece.ops.end());
  }

  int split(int pi, int i, int j, int d, int delta);

  void emit_suffix(int si, int i, int d, int delta, std::vector<Planner::StageChoice>& out);

  void emit_split(int pi, int i, int j, int d, int delta, std::vector<Planner::StageChoice>& out);

  const Planner& p_;
  int max_pieces_ = 0;
  int b_, mini_ = 0, m_ = 0, devices_ = 0, hcap_ = 0, root_ = 0;
  double cap_ = 0, target_ = 0, bound_s_ = 0;
  std::vector<int> degrees_;
  std::vector<Agg> op_agg_;
  std::vector<Series> series_;
  std::vector<Parallel> parallels_;
};

}  // namespace trident::plan::detail
