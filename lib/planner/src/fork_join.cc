// Fork and join stages for the SP dynamic program, as fewest devices for a
// depth budget h: see Note [Fork and join stages] in planner/planner.h.
#include "sp_engine.h"

namespace trident::planner::detail {

// Join: piece i is parallel; pieces i+1..t join a branch group's stage,
// which is then the last stage of the unit (height delta + rest + u for a
// stage of u units). The rest gets depth r, the other branches h - u - r.
void Engine::join(int si, int i, int h, int delta, int& best) {
  if (h < 2) return;
  const Series& s = series_[si];
  joins(si, i, [] { return true; }, [&](const Merge& m) {
    bool fast = false;
    for (int k = 0; k < config_count(); ++k) {
      if (!tps_ok({m.group, m.pieces}, k)) continue;
      fast = true;
      const int dev = this->dev(k), u = units(k);
      if (dev >= best) break;
      const int most = std::min({h - u - 1, room({m.group, m.pieces}, k, delta), s.deepest[m.t + 1]});
      for (int r = 0; r <= most; ++r) {
        const int rest = suffix(si, m.t + 1, r, delta);
        if (dev + rest >= best) continue;
        best = std::min(best, dev + rest + split(m.par, m.olo, m.ohi, h - u - r, delta + r + u));
      }
    }
    return fast;
  });
}

// Fork: pieces i..p-1 (none parallel) precede parallel piece p and join a
// branch group's stage, which feeds the other branches (depth o) and the
// rest (depth r): its height is delta + r + o + u for a stage of u units.
void Engine::fork(int si, int i, int h, int delta, int& best) {
  if (h < 2) return;
  const Series& s = series_[si];
  forks(si, i, [&](const Merge& m) {
    for (int k = 0; k < config_count(); ++k) {
      if (!tps_ok({m.group, m.pieces}, k)) continue;
      const int dev = this->dev(k), u = units(k);
      if (dev >= best) break;
      const int below = room({m.group, m.pieces}, k, delta);  // r + o at most
      for (int r = 0; r <= std::min(h - u - 1, s.deepest[m.t + 1]); ++r) {
        // The others get the deepest budget the stage's memory allows.
        const int o = std::min(h - u - r, below - r);
        if (o < 1) break;
        const int rest = suffix(si, m.t + 1, r, delta);
        if (dev + rest >= best) continue;
        best = std::min(best, dev + rest + split(m.par, m.olo, m.ohi, o, delta + r));
      }
    }
  });
}

// Fork and join together: pieces i..p-1 join one end group of parallel
// piece p, pieces p+1..t the other end group, so the parallel node runs as
// two stages (the fork stage feeds the join stage); the rest gets depth r.
void Engine::fork_join(int si, int i, int h, int delta, int& best) {
  if (h < 2) return;
  const Series& s = series_[si];
  fork_joins(si, i, [&](const Merge& m) {
    bool fast = false;
    for (int kj = 0; kj < config_count(); ++kj) {
      if (!tps_ok({m.group, m.pieces}, kj)) continue;
      fast = true;
      if (dev(kj) >= best) break;
      const int join_room = room({m.group, m.pieces}, kj, delta);
      if (join_room < 0) continue;
      for (int kf = 0; kf < config_count() && dev(kf) + dev(kj) < best; ++kf) {
        if (!tps_ok({m.fork_group, m.fork_pieces}, kf)) continue;
        // The join stage's height is delta + r + units(kj), the fork's
        // units(kf) more.
        const int fork_room = room({m.fork_group, m.fork_pieces}, kf, delta + units(kj));
        const int r = std::min({h - units(kf) - units(kj), join_room, fork_room, s.deepest[m.t + 1]});
        if (r < 0) continue;
        best = std::min(best, dev(kf) + dev(kj) + suffix(si, m.t + 1, r, delta));
      }
    }
    return fast;
  });
}

}  // namespace trident::planner::detail
