// Poseidon's parameter server: pieces in flight — waited for in the order
// of Note [PS pieces], landed in the parameters where the current call may,
// within the byte budget (see the split in ps_sync.h).
#include <algorithm>

#include "ps_sync.h"

namespace trident::sync::detail {

void PsSync::take_pull(Round& round, std::size_t b) {
  auto& f = round.flights[b];
  auto& p = f.pieces[static_cast<std::size_t>(f.waited)];
  if (p.work) wait(*p.work, "pull", round, b);
  p.work.reset();
  pool_.release(p.out);
  pool_.park(p.in);
  ++f.waited;
}

void PsSync::land(Round& round, std::size_t b) {
  const auto& l = layouts_[b];
  auto& f = round.flights[b];
  torch::NoGradGuard no_grad;
  for (; f.landed < f.waited; ++f.landed) {
    const int k = f.landed;
    auto& p = f.pieces[static_cast<std::size_t>(k)];
    auto in = rows(p.in, l.length(k));
    for (int j = 0; j < size(); ++j) {
      if (j == me() && !copy_) continue;
      const auto lo = j * l.block + k * l.chunk;
      const auto row = in[j];
      l.segments(lo, lo + row.numel(), [&](int i, std::int64_t at, std::int64_t into, std::int64_t c) {
        flat(i).narrow(0, at, c).copy_(row.narrow(0, into, c));
      });
    }
    pool_.unpark(p.in);
    pool_.release(p.in);
  }
  if (f.landed < l.pieces) return;
  event("ps pull bucket " + std::to_string(b), f.pull_start);
  f.state = Flight::State::kLanded;
  newest_[b] = round.clock;
}

bool PsSync::touchable(const Round& round, std::size_t b) const {
  if (b > touch_.last_bucket || (round.clock >= clock_ && !touch_.current)) return false;
  return !touch_.forward || !read_[b];
}

void PsSync::land_arrived(std::size_t b) {
  for (auto& round : rounds_) {
    auto& f = round.flights[b];
    if (f.state == Flight::State::kLanded) continue;
    if (f.state == Flight::State::kPushing || !touchable(round, b)) return;
    land(round, b);
    if (f.state != Flight::State::kLanded) return;
  }
}

std::optional<PsSync::At> PsSync::oldest_active() {
  for (auto& round : rounds_)
    for (std::size_t b = 0; b < round.flights.size(); ++b) {
      const auto& f = round.flights[b];
      if (f.state == Flight::State::kPushing && f.summed < f.pushed) return At{&round, b, {round.clock, b, 0, f.summed}};
      if (f.state == Flight::State::kPulling && f.waited < f.pulled) return At{&round, b, {round.clock, b, 1, f.waited}};
    }
  return std::nullopt;
}

std::optional<PsSync::At> PsSync::oldest_pending() {
  for (auto& round : rounds_)
    for (std::size_t b = 0; b < round.flights.size(); ++b) {
      const auto& f = round.flights[b];
      if (f.state == Flight::State::kPulling && f.pulled < layouts_[b].pieces)
        return At{&round, b, {round.clock, b, 1, f.pulled}};
    }
  return std::nullopt;
}

bool PsSync::retire_oldest() {
  auto oldest = oldest_active();
  if (auto pending = oldest_pending(); pending && (!oldest || pending->place < oldest->place)) {
    pull(*pending->round, pending->bucket);
    oldest = oldest_active();
  }
  if (!oldest) return false;
  if (oldest->round->flights[oldest->bucket].state == Flight::State::kPushing) {
    take_push(*oldest->round, oldest->bucket);
  } else {
    take_pull(*oldest->round, oldest->bucket);
    land_arrived(oldest->bucket);
  }
  return true;
}

void PsSync::ensure_room(std::int64_t need) {
  while (pool_.active() > 0 && pool_.active() + need > budget_) {
    if (!retire_oldest()) return;
    serve(serving_);
  }
}

void PsSync::receive(const Scope& scope, const std::vector<int>* only) {
  auto one = [&](std::size_t b) {
    if (b > scope.last_bucket) return;
    for (auto& round : rounds_) {
      if (round.clock >= clock_ && !scope.current) return;
      auto& f = round.flights[b];
      if (f.state == Flight::State::kLanded) continue;
      if (f.state == Flight::State::kPushing) return;
      const bool must = round.clock <= scope.bound;
      if (!must && !scope.take_arrived) return;
      if (!pull_through(round, b, must)) return;
    }
  };
  if (only) {
    for (int b : *only) one(static_cast<std::size_t>(b));
  } else {
    for (std::size_t b = 0; b < items_.size(); ++b) one(b);
  }
  while (!rounds_.empty() && rounds_.front().clock < clock_ && landed(rounds_.front())) rounds_.pop_front();
}

bool PsSync::pull_through(Round& round, std::size_t b, bool must) {
  auto& f = round.flights[b];
  for (;;) {
    while (f.waited < f.pulled && (!f.pieces[static_cast<std::size_t>(f.waited)].work ||
                                   f.pieces[static_cast<std::size_t>(f.waited)].work->isCompleted()))
      take_pull(round, b);
    land(round, b);
    if (f.state == Flight::State::kLanded) return true;
    if (!must) {
      issue_pulls();
      return false;
    }
    if (!retire_oldest())
      throw comm::CommError(group_.member(me()) + ": ps: the pull of bucket " + std::to_string(b) + " has pieces that never launched");
    issue_pulls();
  }
}

bool PsSync::landed(const Round& round) {
  for (const auto& f : round.flights)
    if (f.state != Flight::State::kLanded) return false;
  return true;
}

}  // namespace trident::sync::detail
