// Fork and join stages for the SP dynamic program: Note [Fork and join
// stages] in sp_engine.h.
#include "sp_engine.h"

namespace trident::plan::detail {

// Join: piece i is parallel; pieces i+1..t join a branch group's stage,
// which is then the last stage of the unit (height delta + rest + 1).
void Engine::join(int si, int i, int d, int delta, int& best, Choice& choice) {
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
              choice = {Choice::Kind::kJoinMerged, t, degrees_[k], side, l, d1};
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
void Engine::fork(int si, int i, int d, int delta, int& best, Choice& choice) {
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
            choice = {Choice::Kind::kForkMerged, p, degrees_[k], side, l, d1};
          }
        }
      }
    }
  }
}

// Fork and join together: pieces i..p-1 join one end group of parallel
// piece p, pieces p+1..t the other end group, so the parallel node runs as
// two stages (the fork stage feeds the join stage).
void Engine::fork_join(int si, int i, int d, int delta, int& best, Choice& choice) {
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
            choice = {Choice::Kind::kForkAndJoin, t, degrees_[kf], side, l, degrees_[kj]};
          }
        }
      }
    }
    if (!any_fast) break;
  }
}

}  // namespace trident::plan::detail
