// Fork and join stages for the SP dynamic program, as fewest devices for a
// depth budget h: Note [Fork and join stages] in sp_engine.h.
#include "sp_engine.h"

namespace trident::plan::detail {

// Join: piece i is parallel; pieces i+1..t join a branch group's stage,
// which is then the last stage of the unit (height delta + rest + 1). The
// rest gets depth r, the other branches h - 1 - r.
void Engine::join(int si, int i, int h, int delta, int& best) {
  const Series& s = series_[si];
  const int n = static_cast<int>(s.pieces.size()), par = s.pieces[i].parallel;
  const Parallel& q = parallels_[par];
  const int nq = static_cast<int>(q.children.size());
  if (h < 2) return;
  for (int t = i + 1; t < n; ++t) {
    if (s.pieces[t].parallel >= 0) break;
    bool any_fast = false;
    for (int side = 0; side < 2; ++side) {
      for (int l = 0; l + 1 < nq; ++l) {
        const int lo = side ? l + 1 : 0, hi = side ? nq : l + 1;    // absorbing [lo, hi)
        const int olo = side ? 0 : l + 1, ohi = side ? l : nq - 1;  // others, inclusive
        const Span a{&q.prefix, lo, hi}, b{&s.prefix, i + 1, t + 1};
        for (int k = 0; k < degree_count(); ++k) {
          if (!tps_ok({a, b}, k)) continue;
          any_fast = true;
          const int dev = degrees_[k];
          if (dev >= best) break;
          const int most = std::min({h - 2, room({a, b}, k, delta), s.deepest[t + 1]});
          for (int r = 0; r <= most; ++r) {
            const int rest = suffix(si, t + 1, r, delta);
            if (dev + rest >= best) continue;
            const int other = split(par, olo, ohi, h - 1 - r, delta + r + 1);
            best = std::min(best, dev + rest + other);
          }
        }
      }
    }
    if (!any_fast) break;
  }
}

// Fork: pieces i..p-1 (none parallel) precede parallel piece p and join a
// branch group's stage, which feeds the other branches (depth o) and the
// rest (depth r): its height is delta + r + o + 1.
void Engine::fork(int si, int i, int h, int delta, int& best) {
  const Series& s = series_[si];
  const int n = static_cast<int>(s.pieces.size());
  const int p = s.next_parallel[i];
  if (p == i || p == n || h < 2) return;
  const int par = s.pieces[p].parallel;
  const Parallel& q = parallels_[par];
  const int nq = static_cast<int>(q.children.size());
  for (int side = 0; side < 2; ++side) {
    for (int l = 0; l + 1 < nq; ++l) {
      const int lo = side ? l + 1 : 0, hi = side ? nq : l + 1;
      const int olo = side ? 0 : l + 1, ohi = side ? l : nq - 1;
      const Span a{&q.prefix, lo, hi}, b{&s.prefix, i, p};
      for (int k = 0; k < degree_count(); ++k) {
        if (!tps_ok({a, b}, k)) continue;
        const int dev = degrees_[k];
        if (dev >= best) break;
        const int below = room({a, b}, k, delta);  // r + o at most
        for (int r = 0; r <= std::min(h - 2, s.deepest[p + 1]); ++r) {
          // The others get the deepest budget the stage's memory allows.
          const int o = std::min(h - 1 - r, below - r);
          if (o < 1) break;
          const int rest = suffix(si, p + 1, r, delta);
          if (dev + rest >= best) continue;
          const int other = split(par, olo, ohi, o, delta + r);
          best = std::min(best, dev + rest + other);
        }
      }
    }
  }
}

// Fork and join together: pieces i..p-1 join one end group of parallel
// piece p, pieces p+1..t the other end group, so the parallel node runs as
// two stages (the fork stage feeds the join stage); the rest gets depth r.
void Engine::fork_join(int si, int i, int h, int delta, int& best) {
  const Series& s = series_[si];
  const int n = static_cast<int>(s.pieces.size());
  const int p = s.next_parallel[i];
  if (p == i || p == n || h < 2) return;
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
        for (int kj = 0; kj < degree_count(); ++kj) {
          if (!tps_ok({jb, jp}, kj)) continue;
          any_fast = true;
          if (degrees_[kj] >= best) break;
          const int join_room = room({jb, jp}, kj, delta);
          if (join_room < 0) continue;
          for (int kf = 0; kf < degree_count() && degrees_[kf] + degrees_[kj] < best; ++kf) {
            if (!tps_ok({fb, fp}, kf)) continue;
            // The join stage's height is delta + r + 1, the fork's one more.
            const int r = std::min({h - 2, join_room, room({fb, fp}, kf, delta) - 1, s.deepest[t + 1]});
            if (r < 0) continue;
            const int rest = suffix(si, t + 1, r, delta);
            best = std::min(best, degrees_[kf] + degrees_[kj] + rest);
          }
        }
      }
    }
    if (!any_fast) break;
  }
}

}  // namespace trident::plan::detail
