#include "sp_engine.h"

#include <cmath>

namespace trident::planner::detail {

Engine::Engine(const Planner& p, const graph::SpDecomposition& sp, int b, int ratio) : p_(p), b_(b) {
  // A linearised graph is one series holding every op: give it the cut
  // points that a tree's several series would have together.
  const bool chain = sp.root.is_chain();
  max_pieces_ = chain ? 2 * p.request().max_pieces : p.request().max_pieces;
  const auto& req = p.request();
  recompute_ = req.recompute == "never" ? Recompute::kNever : req.recompute == "always" ? Recompute::kAlways
                                                                                        : Recompute::kAuto;
  mini_ = req.mini_batch;
  m_ = req.mini_batch / b;
  cap_ = p.memory_cap();
  configs_ = stage_configs(req, b, ratio);
  for (const auto& c : configs_) max_units_ = std::max(max_units_, c.units);
  devices_ = req.devices;
  // Heights past the micro-batches change no stage's in-flight count.
  hcap_ = std::min(m_, devices_ * max_units_ + 1);
  op_agg_.resize(p.graph().size());
  for (OpId id = 0; id < p.graph().size(); ++id) {
    Agg& a = op_agg_[id];
    for (const auto& c : configs_) {
      const int size = b * c.units;
      auto e = estimate_stage(p, {id}, c.replicas, size, p.cluster().packed_link(c.replicas));
      a.comp.push_back(e.forward_s + e.backward_s);
      a.fwd.push_back(e.forward_s);
      a.sync.push_back(e.sync_s);
      a.static_bytes.push_back(e.static_bytes);
      a.act_per_row = e.activation_bytes / (size / c.replicas);
    }
  }
  added_edges_ = sp.added_edges;
  root_ = add_series(sp.root);
}

bool Engine::prune(double bound_s) {
  bound_s_ = bound_s;
  Planner::Search unused;
  const bool possible = solve(std::numeric_limits<double>::infinity(), &unused);
  bound_s_ = 0;
  return !possible;
}

bool Engine::solve(double target, Planner::Search* out) {
  target_ = target;
  ++solve_;
  // Feasible at all with the deepest budget? Then the least depth, counting
  // up: shallow budgets touch few sub-problems.
  if (suffix(root_, 0, series_[root_].deepest[0], 0) >= kInf) return false;
  int depth = 1;
  while (suffix(root_, 0, depth, 0) >= kInf) ++depth;
  out->stages.clear();
  emit_suffix(root_, 0, devices_, 0, out->stages);
  out->depth = depth;
  // Each stage's TPS as it will run: recomputing where the rule says so, or
  // (auto) where it does not fit otherwise at its height (Note
  // [Recomputation costs]).
  std::vector<std::vector<OpId>> ops;
  std::vector<int> units;
  for (const auto& st : out->stages) ops.push_back(st.ops), units.push_back(st.micro_batch / b_);
  const auto heights = stage_heights(p_.graph(), ops, added_edges_, units);
  out->tps = 0;
  for (std::size_t i = 0; i < out->stages.size(); ++i) {
    Agg a = zero();
    for (OpId id : ops[i]) a.add(op_agg_[id]);
    const int k = index_of(out->stages[i].replicas, units[i]);
    const double rows = static_cast<double>(size(k) / dev(k));
    const int h = in_flight_at(heights.empty() ? m_ : heights[i], units[i], m_);
    const bool plain = recompute_ == Recompute::kNever ||
                       (recompute_ == Recompute::kAuto && a.static_bytes[k] + h * a.act_per_row * rows <= cap_);
    out->tps = std::max(out->tps, tps(a, k) + (plain ? 0 : a.fwd[k] / size(k)));
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
  const int n = static_cast<int>(s.pieces.size());
  s.prefix = Prefix(config_count());
  std::vector<std::vector<OpId>> parts;
  for (const auto& piece : s.pieces) s.prefix.push(piece.agg), parts.push_back(piece.ops);
  s.prefix.set_inputs(p_.graph(), parts);
  s.next_parallel.assign(n + 1, n);
  s.deepest.assign(n + 1, 0);
  for (int i = n - 1; i >= 0; --i) {
    const int par = s.pieces[i].parallel;
    s.next_parallel[i] = par >= 0 ? i : s.next_parallel[i + 1];
    // No plan is deeper than its stages, each on a device of its own.
    const int piece = par >= 0 ? parallels_[par].deepest[parallels_[par].children.size() - 1] : max_units_;
    s.deepest[i] = std::min(devices_ * max_units_, s.deepest[i + 1] + piece);
  }
  s.memo.resize(hcap_ + 1);
  s.fast.assign(n * configs_.size(), 0);
  s.fast_solve.assign(s.fast.size(), -1);
  series_.push_back(std::move(s));
  return static_cast<int>(series_.size()) - 1;
}

int Engine::add_parallel(const SpNode& node) {
  Parallel q;
  q.prefix = Prefix(config_count());
  std::vector<std::vector<OpId>> parts;
  for (const auto& c : node.children) {
    q.children.push_back(add_series(c));
    parts.push_back(c.ops());
    q.prefix.push(agg_of(parts.back()));
  }
  q.prefix.set_inputs(p_.graph(), parts);
  const int n = static_cast<int>(q.children.size());
  q.deepest.assign(n * n, 0);
  for (int i = 0; i < n; ++i) {
    int most = 0;
    for (int j = i; j < n; ++j) {
      most = std::max(most, series_[q.children[j]].deepest[0]);
      q.deepest[i * n + j] = most;
    }
  }
  q.memo.resize(hcap_ + 1);
  parallels_.push_back(std::move(q));
  return static_cast<int>(parallels_.size()) - 1;
}

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

int Engine::room(std::initializer_list<Span> spans, int k, int delta) const {
  const int own = units(k);
  if (fits(spans, k, m_)) return kInf;
  if (!fits(spans, k, delta + own)) return -1;
  // The tallest height that fits lies in [delta + own, m_): estimate it from
  // the bytes (the larger of the plain and the recomputing stage's) in
  // micro-batches of the stage's own, then settle it with fits itself so
  // that the two agree.
  const Totals t = totals(spans, k);
  const double rows = static_cast<double>(size(k) / dev(k));
  auto tallest = [&](double fixed, double per) {
    return per > 0 ? std::min<double>(m_ - 1, own * std::floor((cap_ - fixed) / per)) : m_ - 1;
  };
  double estimate = tallest(t.stat, t.act * rows);
  if (recompute_ != Recompute::kNever)
    estimate = std::max(estimate, tallest(t.stat + t.act * rows, inputs(spans) * rows));
  // fits is monotone in the height: check the estimate's step, else bisect
  // on the side it points to (a recomputing estimate can be far above the
  // answer where recomputing misses the target).
  const int lo = delta + own, hi = m_ - 1;
  const int guess = std::clamp(static_cast<int>(estimate), lo, hi);
  int height;
  if (fits(spans, k, guess)) {
    height = guess + 1 > hi || !fits(spans, k, guess + 1) ? guess
                                                           : last_true(guess + 1, hi, [&](int x) { return fits(spans, k, x); });
  } else {
    height = last_true(lo, guess - 1, [&](int x) { return fits(spans, k, x); });
  }
  return height - delta - own;
}

double Engine::merged_inputs(std::initializer_list<Span> spans) const {
  std::vector<std::intptr_t> key;
  for (const auto& s : spans) key.insert(key.end(), {reinterpret_cast<std::intptr_t>(s.p), s.i, s.j});
  auto it = merged_inputs_.find(key);
  if (it != merged_inputs_.end()) return it->second;
  std::vector<OpId> ops;
  for (const auto& s : spans)
    for (int x = s.i; x < s.j; ++x) ops.insert(ops.end(), s.p->parts[x].begin(), s.p->parts[x].end());
  return merged_inputs_[key] = input_bytes_per_row(p_.graph(), ops);
}

void Prefix::set_inputs(const graph::OpGraph& g, const std::vector<std::vector<OpId>>& pieces) {
  parts = pieces;
  const std::size_t n = pieces.size();
  inputs.assign((n + 1) * (n + 1), 0);
  std::vector<std::size_t> inside(g.size(), 0), counted(g.size(), 0);  // marks: run start + 1
  for (std::size_t i = 0; i < n; ++i) {
    double bytes = 0;
    for (std::size_t j = i; j < n; ++j) {
      // Pieces are in dependency order: a run's producers lie in it or before it.
      for (OpId id : pieces[j]) inside[id] = i + 1;
      for (OpId id : pieces[j])
        for (const auto& in : g.op(id).inputs)
          if (inside[in.producer] != i + 1 && counted[in.producer] != i + 1) {
            counted[in.producer] = i + 1;
            bytes += static_cast<double>(g.op(in.producer).output.bytes());
          }
      inputs[i * (n + 1) + j + 1] = bytes;
    }
  }
}

int Engine::last_fast(Series& s, int i, int k) {
  const std::size_t at = static_cast<std::size_t>(i) * configs_.size() + k;
  if (s.fast_solve[at] != solve_) {
    const int n = static_cast<int>(s.pieces.size());
    s.fast[at] = last_true(i, n - 1, [&](int j) { return tps_ok(s.prefix, i, j + 1, k); });
    s.fast_solve[at] = solve_;
  }
  return s.fast[at];
}

Engine::Cell& Engine::cell(Series& s, int i, int h, int delta) {
  const int depths = s.deepest[0] + 1;
  auto& row = s.memo[delta];
  if (row.empty()) row.resize(s.pieces.size() * depths);
  return row[static_cast<std::size_t>(i) * depths + h];
}

Engine::Cell& Engine::cell(Parallel& q, int i, int j, int h, int delta) {
  const std::size_t n = q.children.size();
  const int depths = q.deepest[n - 1] + 1;  // branches 0..n-1
  auto& row = q.memo[delta];
  if (row.empty()) row.resize(n * n * depths);
  return row[(i * n + j) * depths + h];
}

int Engine::suffix(int si, int i, int h, int delta) {
  Series& s = series_[si];
  const int n = static_cast<int>(s.pieces.size());
  if (i == n) return 0;
  h = std::min(h, s.deepest[i]);  // a larger budget buys nothing
  if (h <= 0) return kInf;
  delta = std::min(delta, hcap_);
  Cell& memo = cell(s, i, h, delta);
  if (memo.solve == solve_) return memo.devices;
  int best = devices_ + 1;  // more is as bad as impossible
  const Prefix& pre = s.prefix;
  // See Note [Longest groups]: the first group i..j on one replica count.
  for (int k = 0; k < config_count() && dev(k) < best; ++k) {
    if (units(k) > h) continue;
    const int fast = last_fast(s, i, k);
    for (int j = i; j <= fast;) {
      // The rest gets the deepest budget the stage's memory allows.
      const int r = std::min(h - units(k), room({Span{&pre, i, j + 1}}, k, delta));
      if (r < 0) break;  // a longer group fits even less
      auto keeps = [&](int x) { return fits(pre, i, x + 1, k, delta + r + units(k)); };
      const int end = keeps(fast) ? fast : last_true(j, fast, keeps);
      // See Note [Pricing recomputation]: a recomputing stage keeps its inputs, so
      // the rest may need more devices when it starts later (its first
      // stage then keeps a wider tensor) and Note [Longest groups] no longer
      // holds. Under always every shorter end is tried too; under auto, only
      // while the rest has no plan (the search stays near its speed without
      // recomputation; the exhaustive test bounds what this misses).
      int rest = suffix(si, end + 1, r, delta);
      const bool scan = recompute_ == Recompute::kAlways;
      for (int e = end - 1; e >= j && recompute_ != Recompute::kNever && (scan || rest >= kInf); --e)
        rest = std::min(rest, suffix(si, e + 1, r, delta));
      best = std::min(best, dev(k) + rest);
      j = end + 1;
    }
  }
  const int par = s.pieces[i].parallel;
  if (par >= 0) {
    // The branches with depth h - r, the rest with r.
    const int branches = static_cast<int>(parallels_[par].children.size());
    for (int r = 0; r <= std::min(h - 1, s.deepest[i + 1]); ++r) {
      const int rest = suffix(si, i + 1, r, delta);
      if (rest >= best) continue;
      best = std::min(best, rest + split(par, 0, branches - 1, h - r, delta + r));
    }
    join(si, i, h, delta, best);
  }
  fork(si, i, h, delta, best);
  fork_join(si, i, h, delta, best);
  memo = {solve_, best > devices_ ? kInf : best};
  return memo.devices;
}

int Engine::split(int pi, int i, int j, int h, int delta) {
  Parallel& q = parallels_[pi];
  if (i == j) return suffix(q.children[i], 0, h, delta);
  const int n = static_cast<int>(q.children.size());
  h = std::min(h, q.deepest[i * n + j]);
  if (h <= 0) return kInf;
  delta = std::min(delta, hcap_);
  Cell& memo = cell(q, i, j, h, delta);
  if (memo.solve == solve_) return memo.devices;
  int best = devices_ + 1;
  const Prefix& pre = q.prefix;
  for (int k = 0; k < config_count() && dev(k) < best; ++k) {
    if (units(k) <= h && tps_ok(pre, i, j + 1, k) && fits(pre, i, j + 1, k, delta + units(k))) {
      best = dev(k);
      break;
    }
  }
  for (int l = i; l < j; ++l) {
    const int left = split(pi, i, l, h, delta);
    if (left >= best) continue;
    const int right = split(pi, l + 1, j, h, delta);
    best = std::min(best, left + right);
  }
  memo = {solve_, best > devices_ ? kInf : best};
  return memo.devices;
}

}  // namespace trident::planner::detail
