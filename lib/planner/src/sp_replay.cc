// Reading a plan out of the SP dynamic program's table: see Note [Devices for a
// depth] in sp_engine.h. Each step takes, for a run of pieces on d devices,
// the first option of least depth, in the order of the device-count form of
// Algorithm 1: the first group i..j as one stage (shortest group first, for
// each the fewest replicas that fit), the branches of a parallel piece on
// the fewest devices, a join, a fork, a fork and join.
#include "sp_engine.h"

namespace trident::planner::detail {

int Engine::depth(int si, int i, int d, int delta) {
  const Series& s = series_[si];
  if (i == static_cast<int>(s.pieces.size())) return 0;
  if (d <= 0 || suffix(si, i, s.deepest[i], delta) > d) return kInf;
  // Counting up: shallow budgets touch few sub-problems.
  int h = 1;
  while (suffix(si, i, h, delta) > d) ++h;
  return h;
}

int Engine::split_depth(int pi, int i, int j, int d, int delta) {
  const Parallel& q = parallels_[pi];
  if (i == j) return depth(q.children[i], 0, d, delta);
  const int most = q.deepest[i * static_cast<int>(q.children.size()) + j];
  if (d <= 0 || split(pi, i, j, most, delta) > d) return kInf;
  int h = 1;
  while (split(pi, i, j, h, delta) > d) ++h;
  return h;
}

Choice Engine::choose_suffix(int si, int i, int d, int delta) {
  const Series& s = series_[si];
  const int n = static_cast<int>(s.pieces.size());
  const Prefix& pre = s.prefix;
  int best = kInf;
  Choice choice;
  for (int j = i; j < n; ++j) {
    // Splitting off a group leaves depth >= 2: with best <= 2 only the
    // whole suffix as one stage can still improve.
    if (best <= 2 && j + 1 < n) j = n - 1;
    bool any_fast = false;
    int fewest_units = kInf;  // of a stage i..j that fits
    for (int k = 0; k < config_count() && dev(k) <= d; ++k) {
      if (!tps_ok(pre, i, j + 1, k)) continue;
      any_fast = true;
      // More devices for this group only leave fewer for the rest: only
      // fewer units can still help.
      if (units(k) >= fewest_units) continue;
      const int rest = depth(si, j + 1, d - dev(k), delta);
      if (rest >= kInf || !fits(pre, i, j + 1, k, delta + rest + units(k))) continue;
      fewest_units = units(k);
      if (units(k) + rest < best) best = units(k) + rest, choice = {Choice::Kind::kStage, j, dev(k)}, choice.u = units(k);
    }
    const int par = s.pieces[i].parallel;
    if (j == i && par >= 0) {
      // See Note [Monotone device splits]: d1 devices for the branches.
      const int branches = static_cast<int>(parallels_[par].children.size());
      auto rest_of = [&](int d1) { return depth(si, i + 1, d - d1, delta); };
      for_each_step(1, d, rest_of, [&](int lo, int hi, int rest) {
        auto branches_on = [&](int d1) { return split_depth(par, 0, branches - 1, d1, delta + rest); };
        const int u = branches_on(hi);
        if (u < kInf && u + rest < best)
          best = u + rest, choice = {Choice::Kind::kBranches, i, first_at_most(lo, hi, branches_on, u)};
        return true;
      });
      choose_join(si, i, d, delta, best, choice);
    }
    if (!any_fast) break;  // a longer group is slower still
  }
  choose_fork(si, i, d, delta, best, choice);
  choose_fork_join(si, i, d, delta, best, choice);
  return choice;
}

Choice Engine::choose_split(int pi, int i, int j, int d, int delta) {
  const Prefix& pre = parallels_[pi].prefix;
  int best = kInf;
  Choice choice;
  for (int k = 0; k < config_count() && dev(k) <= d; ++k) {
    if (units(k) < best && tps_ok(pre, i, j + 1, k) && fits(pre, i, j + 1, k, delta + units(k)))
      best = units(k), choice = {Choice::Kind::kStage, j, dev(k)}, choice.u = units(k);
  }
  // See Note [Monotone device splits]: d1 devices for branches i..l.
  for (int l = i; l < j && best > 1; ++l) {
    auto left = [&](int d1) { return split_depth(pi, i, l, d1, delta); };
    auto right = [&](int d1) { return split_depth(pi, l + 1, j, d - d1, delta); };
    for_each_step(1, d - 1, right, [&](int lo, int hi, int r) {
      if (r >= best) return false;
      const int v = std::max(left(hi), r);
      if (v < best) best = v, choice = {Choice::Kind::kBranchSplit, l, first_at_most(lo, hi, left, v)};
      return true;
    });
  }
  return choice;
}

void Engine::choose_join(int si, int i, int d, int delta, int& best, Choice& choice) {
  joins(si, i, [&] { return best > 2; }, [&](const Merge& m) {
    bool fast = false;
    for (int k = 0; k < config_count() && dev(k) < d; ++k) {
      if (!tps_ok({m.group, m.pieces}, k)) continue;
      fast = true;
      // See Note [Monotone device splits]: d1 devices for the other branches.
      const int dev = this->dev(k), u = units(k);
      auto rest_of = [&](int d1) { return depth(si, m.t + 1, d - dev - d1, delta); };
      for_each_step(1, d - dev, rest_of, [&](int lo, int hi, int rest) {
        if (u + rest >= best) return false;
        if (!fits({m.group, m.pieces}, k, delta + rest + u)) return true;
        auto others_on = [&](int d1) { return split_depth(m.par, m.olo, m.ohi, d1, delta + rest + u); };
        const int other = others_on(hi);
        if (other < kInf && rest + u + other < best) {
          best = rest + u + other;
          choice = {Choice::Kind::kJoinMerged, m.t, dev, m.side, m.l, first_at_most(lo, hi, others_on, other)};
          choice.u = u;
        }
        return true;
      });
    }
    return fast;
  });
}

void Engine::choose_fork(int si, int i, int d, int delta, int& best, Choice& choice) {
  if (best <= 2) return;
  forks(si, i, [&](const Merge& m) {
    for (int k = 0; k < config_count() && dev(k) < d; ++k) {
      if (!tps_ok({m.group, m.pieces}, k)) continue;
      // See Note [Monotone device splits]: d1 devices for the other branches.
      const int dev = this->dev(k), u = units(k);
      auto rest_of = [&](int d1) { return depth(si, m.t + 1, d - dev - d1, delta); };
      for_each_step(1, d - dev, rest_of, [&](int lo, int hi, int rest) {
        if (u + rest >= best) return false;
        auto others_on = [&](int d1) { return split_depth(m.par, m.olo, m.ohi, d1, delta + rest); };
        const int other = others_on(hi);
        if (other >= kInf || !fits({m.group, m.pieces}, k, delta + rest + other + u)) return true;
        if (rest + other + u < best) {
          best = rest + other + u;
          choice = {Choice::Kind::kForkMerged, m.t, dev, m.side, m.l, first_at_most(lo, hi, others_on, other)};
          choice.u = u;
        }
        return true;
      });
    }
  });
}

void Engine::choose_fork_join(int si, int i, int d, int delta, int& best, Choice& choice) {
  if (best <= 2) return;
  fork_joins(si, i, [&](const Merge& m) {
    bool fast = false;
    for (int kj = 0; kj < config_count() && dev(kj) < d; ++kj) {
      if (!tps_ok({m.group, m.pieces}, kj)) continue;
      fast = true;
      for (int kf = 0; kf < config_count() && dev(kf) + dev(kj) <= d; ++kf) {
        if (!tps_ok({m.fork_group, m.fork_pieces}, kf)) continue;
        const int rest = depth(si, m.t + 1, d - dev(kf) - dev(kj), delta);
        const int both = units(kf) + units(kj);
        if (rest >= kInf || rest + both >= best) continue;
        if (!fits({m.group, m.pieces}, kj, delta + rest + units(kj)) ||
            !fits({m.fork_group, m.fork_pieces}, kf, delta + rest + both))
          continue;
        best = rest + both;
        choice = {Choice::Kind::kForkAndJoin, m.t, dev(kf), m.side, m.l, dev(kj)};
        choice.u = units(kf), choice.u1 = units(kj);
      }
    }
    return fast;
  });
}

void Engine::emit_suffix(int si, int i, int d, int delta, std::vector<Planner::StageChoice>& out) {
  const Series& s = series_[si];
  if (i == static_cast<int>(s.pieces.size())) return;
  delta = std::min(delta, hcap_);
  const Choice c = choose_suffix(si, i, d, delta);
  if (c.kind == Choice::Kind::kStage) {
    Planner::StageChoice st{{}, c.dev, b_ * c.u};
    for (int p = i; p <= c.j; ++p) st.ops.insert(st.ops.end(), s.pieces[p].ops.begin(), s.pieces[p].ops.end());
    std::sort(st.ops.begin(), st.ops.end());
    out.push_back(std::move(st));
    emit_suffix(si, c.j + 1, d - c.dev, delta, out);
  } else if (c.kind == Choice::Kind::kForkAndJoin) {
    int p = i;
    while (s.pieces[p].parallel < 0) ++p;
    const int par = s.pieces[p].parallel;
    const int nq = static_cast<int>(parallels_[par].children.size());
    Planner::StageChoice fork{{}, c.dev, b_ * c.u}, join{{}, c.d1, b_ * c.u1};
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
    const int rest = depth(si, c.j + 1, left, delta);
    Planner::StageChoice st{{}, c.dev, b_ * c.u};
    add_branch_ops(par, lo, hi, st.ops);
    for (int p = join ? i + 1 : i; p < (join ? c.j + 1 : c.j); ++p)
      st.ops.insert(st.ops.end(), s.pieces[p].ops.begin(), s.pieces[p].ops.end());
    std::sort(st.ops.begin(), st.ops.end());
    out.push_back(std::move(st));
    emit_split(par, olo, ohi, c.d1, join ? delta + rest + c.u : delta + rest, out);
    emit_suffix(si, c.j + 1, left, delta, out);
  } else if (c.kind == Choice::Kind::kBranches) {
    const int rest = depth(si, i + 1, d - c.dev, delta);
    const int par = s.pieces[i].parallel;
    emit_split(par, 0, static_cast<int>(parallels_[par].children.size()) - 1, c.dev, delta + rest, out);
    emit_suffix(si, i + 1, d - c.dev, delta, out);
  } else {
    throw plan::PlanError("internal: the search's table has no plan for pieces " + std::to_string(i) + ".. on " +
                        std::to_string(d) + " devices",
                    ErrorKind::kFailure);
  }
}

void Engine::emit_split(int pi, int i, int j, int d, int delta, std::vector<Planner::StageChoice>& out) {
  const Parallel& q = parallels_[pi];
  if (i == j) return emit_suffix(q.children[i], 0, d, delta, out);
  delta = std::min(delta, hcap_);
  const Choice c = choose_split(pi, i, j, d, delta);
  if (c.kind == Choice::Kind::kStage) {
    Planner::StageChoice st{{}, c.dev, b_ * c.u};
    for (int b = i; b <= j; ++b) {
      for (const auto& piece : series_[q.children[b]].pieces)
        st.ops.insert(st.ops.end(), piece.ops.begin(), piece.ops.end());
    }
    std::sort(st.ops.begin(), st.ops.end());
    out.push_back(std::move(st));
  } else if (c.kind == Choice::Kind::kBranchSplit) {
    emit_split(pi, i, c.j, c.dev, delta, out);
    emit_split(pi, c.j + 1, j, d - c.dev, delta, out);
  } else {
    throw plan::PlanError("internal: the search's table has no plan for branches " + std::to_string(i) + ".." +
                        std::to_string(j) + " on " + std::to_string(d) + " devices",
                    ErrorKind::kFailure);
  }
}

}  // namespace trident::planner::detail
