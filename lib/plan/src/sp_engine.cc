#include "sp_engine.h"

namespace trident::plan::detail {

Engine::Engine(const Planner& p, const graph::SpDecomposition& sp, int b) : p_(p), b_(b) {
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
  const int widest = req.max_replicas > 0 ? std::min(req.devices, req.max_replicas) : req.devices;
  for (int d = 1; d <= std::min(widest, b); d *= 2)
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
bool Engine::prune(double bound_s) {
  bound_s_ = bound_s;
  Planner::Search unused;
  const bool possible = solve(std::numeric_limits<double>::infinity(), &unused);
  bound_s_ = 0;
  return !possible;
}

// Feasibility at target T; fills `out` with a least-depth partition.
bool Engine::solve(double target, Planner::Search* out) {
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

int Engine::add_series(const SpNode& node) {
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

int Engine::add_parallel(const SpNode& node) {
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
void Engine::coarsen(std::vector<Piece>& pieces) const {
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

int Engine::suffix(int si, int i, int d, int delta) {
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
      if (1 + rest < best) best = 1 + rest, choice = {Choice::Kind::kStage, j, degrees_[k]};
      break;  // more devices for this group only leave fewer for the rest
    }
    const int par = series_[si].pieces[i].parallel;
    if (j == i && par >= 0) {
      const int branches = static_cast<int>(parallels_[par].children.size());
      for (int d1 = 1; d1 <= d; ++d1) {
        const int rest = suffix(si, i + 1, d - d1, delta);
        if (rest >= kInf) continue;
        const int u = split(par, 0, branches - 1, d1, delta + rest);
        if (u < kInf && u + rest < best) best = u + rest, choice = {Choice::Kind::kBranches, i, d1};
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

int Engine::split(int pi, int i, int j, int d, int delta) {
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
      best = 1, choice = {Choice::Kind::kStage, j, degrees_[k]};
      break;
    }
  }
  for (int l = i; l < j && best > 1; ++l) {
    for (int d1 = 1; d1 < d; ++d1) {
      const int left = split(pi, i, l, d1, delta);
      if (left >= best) continue;
      const int right = split(pi, l + 1, j, d - d1, delta);
      const int v = std::max(left, right);
      if (v < best) best = v, choice = {Choice::Kind::kBranchSplit, l, d1};
    }
  }
  parallels_[pi].memo[at] = best;
  parallels_[pi].choice[at] = choice;
  return best;
}

void Engine::emit_suffix(int si, int i, int d, int delta, std::vector<Planner::StageChoice>& out) {
  const Series& s = series_[si];
  if (i == static_cast<int>(s.pieces.size())) return;
  delta = std::min(delta, hcap_);
  const Choice c = s.choice[sidx(i, d, delta)];
  if (c.kind == Choice::Kind::kStage) {
    Planner::StageChoice st{{}, c.dev};
    for (int p = i; p <= c.j; ++p) st.ops.insert(st.ops.end(), s.pieces[p].ops.begin(), s.pieces[p].ops.end());
    std::sort(st.ops.begin(), st.ops.end());
    out.push_back(std::move(st));
    emit_suffix(si, c.j + 1, d - c.dev, delta, out);
  } else if (c.kind == Choice::Kind::kForkAndJoin) {
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
  } else if (c.kind == Choice::Kind::kJoinMerged || c.kind == Choice::Kind::kForkMerged) {
    // See Note [Fork and join stages].
    const bool join = c.kind == Choice::Kind::kJoinMerged;
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
  } else {  // Choice::Kind::kBranches
    const int rest = suffix(si, i + 1, d - c.dev, delta);
    const int par = s.pieces[i].parallel;
    emit_split(par, 0, static_cast<int>(parallels_[par].children.size()) - 1, c.dev, delta + rest, out);
    emit_suffix(si, i + 1, d - c.dev, delta, out);
  }
}

void Engine::emit_split(int pi, int i, int j, int d, int delta, std::vector<Planner::StageChoice>& out) {
  delta = std::min(delta, hcap_);
  const Parallel& q = parallels_[pi];
  if (i == j) return emit_suffix(q.children[i], 0, d, delta, out);
  const Choice c = q.choice[pidx(q, i, j, d, delta)];
  if (c.kind == Choice::Kind::kStage) {
    Planner::StageChoice st{{}, c.dev};
    for (int b = i; b <= j; ++b) {
      for (const auto& piece : series_[q.children[b]].pieces)
        st.ops.insert(st.ops.end(), piece.ops.begin(), piece.ops.end());
    }
    std::sort(st.ops.begin(), st.ops.end());
    out.push_back(std::move(st));
    return;
  }
  // Choice::Kind::kBranchSplit
  emit_split(pi, i, c.j, c.dev, delta, out);
  emit_split(pi, c.j + 1, j, d - c.dev, delta, out);
}

}  // namespace trident::plan::detail
