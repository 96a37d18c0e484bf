// Poseidon's parameter server: a bucket's round trip — this member's push,
// the server's sum and update, its pull (see the split in ps_sync.h).
#include <algorithm>

#include "ps_sync.h"

namespace trident::sync::detail {

torch::Tensor PsSync::acquire(torch::ScalarType dtype) {
  auto t = pool_.acquire(dtype);
  stats_.buffer_bytes = pool_.bytes();
  return t;
}

void PsSync::launch(std::size_t b) {
  serving_ = {-1, true, copy_ ? std::numeric_limits<std::size_t>::max() : b, true};
  touch_ = {-1, true, b, true};
  const auto& l = layouts_[b];
  rounds_.back().flights[b].pieces.resize(static_cast<std::size_t>(l.pieces));
  const auto need = (size() > 1 ? 2 : 1) * pool_.capacity() * static_cast<std::int64_t>(c10::elementSize(push_dtype_));
  for (int k = 0; k < l.pieces; ++k) {
    ensure_room(need);
    push(rounds_.back(), b, k);
  }
  // Poseidon's overlap: buckets up to b are done with in this backward
  // (their gradients are complete, so no autograd node still reads their
  // parameters), so what has arrived for them — pushes to serve, pulls to
  // land — is taken now, while the layers below are still in backward.
  // With a server copy (s > 0) serving touches no parameter, so every
  // bucket that has arrived is served (see Note [Server copy]).
  serve(serving_);
  receive(touch_, nullptr);
  issue_pulls();
}

void PsSync::push(Round& round, std::size_t b, int k) {
  const auto& l = layouts_[b];
  auto& f = round.flights[b];
  auto& p = f.pieces[static_cast<std::size_t>(k)];
  const auto length = l.length(k);
  p.out = acquire(push_dtype_);
  auto out = rows(p.out, length);
  for (int j = 0; j < size(); ++j) {
    const auto lo = j * l.block + k * l.chunk;
    auto row = out[j];
    const auto real = std::clamp(l.elements - lo, std::int64_t{0}, length);
    if (real < length) row.narrow(0, real, length - real).zero_();
    l.segments(lo, lo + real, [&](int i, std::int64_t at, std::int64_t into, std::int64_t n) {
      row.narrow(0, into, n).copy_(grad_or_zeros(i).reshape(-1).narrow(0, at, n));
    });
  }
  if (k == 0) f.push_start = std::chrono::steady_clock::now();
  ++f.pushed;
  if (size() == 1) return;  // its own server: what it sends is what it receives
  p.in = acquire(push_dtype_);
  std::vector<std::int64_t> even;
  auto in = detail::gloo_view(rows(p.in, length)), sent = detail::gloo_view(out);
  try {
    p.work = group_.pg().alltoall_base(in, sent, even, even);
  } catch (const std::exception& e) {
    fail("push of gradient bucket " + std::to_string(b) + " (" + params_[l.params.front()].first + " ...)", e);
  }
}

void PsSync::take_push(Round& round, std::size_t b) {
  const auto& l = layouts_[b];
  auto& f = round.flights[b];
  const int k = f.summed;
  auto& p = f.pieces[static_cast<std::size_t>(k)];
  if (p.work) wait(*p.work, "push", round, b);
  p.work.reset();
  const auto mine = l.end(me()) - l.begin(me()), lo = k * l.chunk, length = l.length(k);
  if (!f.sum.defined()) f.sum = torch::empty({mine}, options_.dtype(torch::kFloat));
  const auto n = std::clamp(mine - lo, std::int64_t{0}, length);
  if (n > 0) {
    auto in = rows(p.in.defined() ? p.in : p.out, length);
    auto sum = f.sum.narrow(0, lo, n);
    sum.copy_(in[0].narrow(0, 0, n));
    for (int j = 1; j < size(); ++j) sum.add_(in[j].narrow(0, 0, n));
  }
  pool_.release(p.out), pool_.release(p.in);
  if (++f.summed == l.pieces) event("ps push bucket " + std::to_string(b), f.push_start);
}

bool PsSync::sum_pushes(Round& round, std::size_t b, bool must) {
  auto& f = round.flights[b];
  while (f.summed < f.pushed) {
    const auto& p = f.pieces[static_cast<std::size_t>(f.summed)];
    if (!p.work || p.work->isCompleted()) {
      take_push(round, b);
    } else if (!must) {
      return false;
    } else if (!retire_oldest()) {
      throw comm::CommError(group_.member(me()) + ": ps: a push of bucket " + std::to_string(b) + " is in flight but not among the pieces");
    }
  }
  return f.summed == layouts_[b].pieces;
}

void PsSync::serve(const Scope& scope) {
  for (auto& round : rounds_) {
    const bool current = round.clock >= clock_;
    if (current && (!scope.current || !round.update)) return;
    for (std::size_t b = 0; b < round.flights.size(); ++b) {
      auto& f = round.flights[b];
      if (f.state != Flight::State::kPushing) continue;
      if (b > scope.last_bucket || f.pushed < layouts_[b].pieces) return;  // not allowed, or not pushed yet
      const bool must = round.clock <= scope.bound;
      if (!must && !scope.take_arrived) return;
      if (!sum_pushes(round, b, must)) return;
      update(round, b);
    }
  }
}

void PsSync::wait(c10d::Work& work, const char* what, const Round& round, std::size_t b) {
  try {
    work.wait(group_.timeout());
  } catch (const std::exception& e) {
    fail(std::string(what) + " of gradient bucket " + std::to_string(b) + " (" +
             params_[layouts_[b].params.front()].first + " ...) at clock " + std::to_string(round.clock),
         e);
  }
}

void PsSync::update(Round& round, std::size_t b) {
  const auto& l = layouts_[b];
  auto& f = round.flights[b];
  const auto begin = l.begin(me()), len = l.end(me()) - begin;
  const auto t0 = std::chrono::steady_clock::now();
  torch::NoGradGuard no_grad;
  if (copy_ && !server_[b].defined())
    server_[b] = torch::empty({len}, options_);
  for (std::size_t k = 0; k < l.params.size(); ++k) {
    const int i = l.params[k];
    const auto& s = span_[i];
    if (s.size() <= 0) continue;
    const auto at = l.offset[k] + s.begin - begin;
    auto values = copy_ ? server_[b].narrow(0, at, s.size()) : flat(i).narrow(0, s.begin, s.size());
    if (copy_ && !server_fresh_[b]) values.copy_(flat(i).narrow(0, s.begin, s.size()));
    round.update(params_[i].first, values, f.sum.narrow(0, at, s.size()));
  }
  server_fresh_[b] = 1;
  event("ps update bucket " + std::to_string(b), t0);
  f.sum = torch::Tensor();
  f.pieces.assign(static_cast<std::size_t>(l.pieces), Piece{});
  if (size() == 1 && !copy_) {  // updated in place: nothing to pull
    f.state = Flight::State::kLanded;
    newest_[b] = round.clock;
    return;
  }
  f.state = Flight::State::kPulling;
}

void PsSync::pull(Round& round, std::size_t b) {
  const auto& l = layouts_[b];
  auto& f = round.flights[b];
  const int k = f.pulled;
  auto& p = f.pieces[static_cast<std::size_t>(k)];
  const auto begin = l.begin(me()), mine = l.end(me()) - begin, lo = k * l.chunk, length = l.length(k);
  const auto n = std::clamp(mine - lo, std::int64_t{0}, length);
  const auto dtype = options_.dtype().toScalarType();
  auto source = acquire(dtype);
  auto row = rows(source, length)[0];
  if (n < length) row.narrow(0, n, length - n).zero_();
  if (copy_) {
    row.narrow(0, 0, n).copy_(server_[b].narrow(0, lo, n));
  } else {
    l.segments(begin + lo, begin + lo + n, [&](int i, std::int64_t at, std::int64_t into, std::int64_t c) {
      row.narrow(0, into, c).copy_(flat(i).narrow(0, at, c));
    });
  }
  if (k == 0) f.pull_start = std::chrono::steady_clock::now();
  ++f.pulled;
  if (size() == 1) {
    p.in = std::move(source);
    return;
  }
  p.out = std::move(source);
  auto out = rows(p.out, length);
  for (int j = 1; j < size(); ++j) out[j].copy_(out[0]);
  p.in = acquire(dtype);
  auto in = rows(p.in, length);
  std::vector<std::int64_t> even;
  try {
    p.work = pull_group_.pg().alltoall_base(in, out, even, even);
  } catch (const std::exception& e) {
    fail("pull of gradient bucket " + std::to_string(b), e);
  }
}

void PsSync::issue_pulls() {
  const auto need = (size() > 1 ? 2 : 1) * pool_.capacity() * static_cast<std::int64_t>(options_.dtype().itemsize());
  while (const auto next = oldest_pending()) {
    if (pool_.active() > 0 && pool_.active() + need > budget_) return;
    pull(*next->round, next->bucket);
  }
}

}  // namespace trident::sync::detail
