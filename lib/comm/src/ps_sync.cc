// Poseidon's parameter server: a block-sharded KV store with colocated
// servers and stale-synchronous pulls (see Note [Sharded parameter server] and
// See Note [Staleness] in grad_sync.h), moving bounded pieces (Note [PS pieces]
// in ps_pieces.h).
#include <deque>
#include <limits>

#include "ordered_sync.h"
#include "ps_pieces.h"
#include "trident/cost/comm.h"

namespace trident::comm {
namespace {

using detail::BufferPool;
using detail::Layout;
using TimePoint = std::chrono::steady_clock::time_point;

// One piece on its way: what this member sends ([P × length]) and receives.
struct Piece {
  c10::intrusive_ptr<c10d::Work> work;
  torch::Tensor out, in;  // pool buffers (see Note [PS buffers])
};

// One bucket of one iteration on its way: push, server update, pull.
struct Flight {
  enum class State { kPushing, kPulling, kLanded } state = State::kPushing;
  std::vector<Piece> pieces;          // the push's; once served, the pull's
  int pushed = 0, summed = 0;         // push pieces launched; waited for and added to `sum`
  int pulled = 0, waited = 0, landed = 0;  // pull pieces launched; waited for; written to the parameters
  torch::Tensor sum;  // this server's block of the summed gradients (fp32), piece by piece
  TimePoint push_start, pull_start;
};

struct Round {
  std::int64_t clock = 0;
  std::vector<Flight> flights;  // by bucket
  GradSync::Update update;      // set by set_update() before backward, or by apply()
};

// What progress may touch: iterations up to `bound` must be done (waited
// for); later ones are taken if they have arrived and `take_arrived`; only
// buckets up to `last_bucket`; the current iteration (armed, not yet
// applied) only with `current` — during its backward. In a forward
// (`forward`), pulls land only in buckets no op has read since apply().
struct Scope {
  std::int64_t bound = -1;
  bool take_arrived = false;
  std::size_t last_bucket = std::numeric_limits<std::size_t>::max();
  bool current = false;
  bool forward = false;
};

// A piece's place in the order of Note [PS pieces].
struct Place {
  std::int64_t clock = 0;
  std::size_t bucket = 0;
  int pull = 0, piece = 0;
  bool operator<(const Place& o) const {
    return std::tie(clock, bucket, pull, piece) < std::tie(o.clock, o.bucket, o.pull, o.piece);
  }
};

constexpr auto kNoBound = std::numeric_limits<std::int64_t>::max();

class PsSync final : public detail::OrderedSync {
 public:
  PsSync(Group group, NamedParams params, std::vector<std::vector<int>> buckets, const PsOptions& options)
      : OrderedSync(std::move(group), std::move(params), std::move(buckets), true),
        staleness_(options.staleness),
        copy_(options.staleness > 0),
        push_dtype_(options.push_dtype),
        budget_(options.buffer_bytes),
        pull_group_(group_.size() > 1 ? group_.subgroup(members(group_.size()), "ps-pull") : group_) {
    lay_out(options.bucket_bytes);
    if (options.graph) map_ops(*options.graph);
    read_.assign(items_.size(), 0);
    server_.resize(items_.size());
    server_fresh_.assign(items_.size(), 0);
    newest_.assign(items_.size(), -1);
    install_grad_hooks();
  }

  void arm() override {
    if (!rounds_.empty() && rounds_.back().clock == clock_)  // a round per clock: apply() closes it
      throw CommError(group_.member(group_.rank()) + ": ps: arm() twice without apply() between");
    // Spans that ended after the last report (pulls landing in this
    // forward) are kept, timed from the new arm().
    const auto before = start_;
    std::vector<SyncEvent> late(stats_.events.begin() + static_cast<std::ptrdiff_t>(reported_), stats_.events.end());
    OrderedSync::arm();
    const double shift = std::chrono::duration<double>(before - start_).count();
    for (auto& e : late) stats_.events.push_back({e.name, e.start_s + shift, e.end_s + shift});
    Round round;
    round.clock = clock_;
    round.flights.resize(items_.size());
    round.update = std::move(next_update_);
    next_update_ = {};
    rounds_.push_back(std::move(round));
  }

  void set_update(const Update& update) override { next_update_ = update; }

  void apply(const Update& update) override {
    if (rounds_.empty() || rounds_.back().clock != clock_)
      throw CommError(group_.member(group_.rank()) + ": ps: apply() without a backward since the last one");
    rounds_.back().update = update;
    ++clock_;
    report_staleness();
    std::fill(read_.begin(), read_.end(), 0);
    const auto bound = clock_ - 1 - staleness_;
    serving_ = {bound, true};
    touch_ = {};  // backward is over: every parameter may be touched
    serve(serving_);
    receive({gated_ ? -1 : bound, true}, nullptr);
    issue_pulls();
    if (!gated_)  // the next forward reads what is here now
      for (std::size_t b = 0; b < items_.size(); ++b) count_read(b);
    reported_ = stats_.events.size();
    double last = stats_.backward_end_s;
    for (const auto& e : stats_.events) last = std::max(last, e.end_s);
    stats_.exposed_s = last - stats_.backward_end_s;  // pulls waited for by the next forward not included
  }

  OpGate gate() override {
    if (by_op_.empty()) return {};
    gated_ = true;
    return [this](graph::OpId op) {
      auto it = by_op_.find(op);
      if (it == by_op_.end() || rounds_.empty()) return;
      // What the bound requires, and newer pulls that have arrived for a
      // bucket no op has read since apply(): once one has (and saved it for
      // backward), an arrival must not overwrite it in place until the next
      // apply(). Without a server copy (s = 0) server updates write the
      // parameters too, so they wait for apply() (see Note [Server copy]).
      const auto bound = clock_ - 1 - staleness_;
      serving_ = {bound, copy_};
      touch_ = {-1, false, std::numeric_limits<std::size_t>::max(), false, true};
      serve(serving_);
      for (int b : it->second) {
        const std::vector<int> one{b};
        receive({bound, !read_[b]}, &one);
        if (!read_[b]) count_read(b);
        read_[b] = 1;
      }
      issue_pulls();
    };
  }

  void flush() override {
    serving_ = {kNoBound, false};
    touch_ = {};
    serve(serving_);
    receive(serving_, nullptr);
    reported_ = stats_.events.size();
    // Everything landed: the parameters hold the server copies, and may be
    // changed (a checkpoint loaded) before the next update reads them again.
    std::fill(server_fresh_.begin(), server_fresh_.end(), 0);
  }

  std::optional<Span> shard(const std::string& name) const override {
    auto it = index_.find(name);
    if (it == index_.end()) return std::nullopt;
    return span_[it->second];
  }

  std::string name() const override { return "ps"; }

  // See Note [Global gradient norm]: the blocks this server serves.
  double grad_square_sum() override {
    if (rounds_.empty() || rounds_.back().clock != clock_)
      throw CommError(group_.member(group_.rank()) + ": ps: grad_square_sum() without a backward since apply()");
    auto& round = rounds_.back();
    touch_ = {-1, false, std::numeric_limits<std::size_t>::max(), true};  // backward is over
    double total = 0;
    for (std::size_t b = 0; b < round.flights.size(); ++b) {
      const auto& f = round.flights[b];
      if (f.state != Flight::State::kPushing || f.pushed < layouts_[b].pieces)
        throw CommError(group_.member(group_.rank()) + ": ps: bucket " + std::to_string(b) +
                        " was updated before the gradient norm (set_update must not be given when clipping)");
      sum_pushes(round, b, true);
      total += square_sum(f.sum);
    }
    return total;
  }

 private:
  static std::vector<int> members(int n) {
    std::vector<int> all(n);
    for (int r = 0; r < n; ++r) all[r] = r;
    return all;
  }

  int size() const { return group_.size(); }
  int me() const { return group_.rank(); }

  void lay_out(std::int64_t bucket_bytes) {
    const int p = size();
    span_.resize(params_.size());
    // A piece's P rows hold at most a bucket's bytes (see Note [PS pieces]).
    if (!params_.empty()) options_ = params_.front().second.options().requires_grad(false);
    const auto element = static_cast<std::int64_t>(c10::elementSize(options_.dtype().toScalarType()));
    const auto chunk = std::max<std::int64_t>(1, bucket_bytes / element / p);
    std::int64_t widest = 1;
    for (const auto& item : items_) {
      Layout l;
      l.params = item;
      for (int i : item) {
        l.offset.push_back(l.elements);
        l.sizes.push_back(params_[i].second.numel());
        l.elements += l.sizes.back();
      }
      l.block = (l.elements + p - 1) / p;
      l.chunk = std::max<std::int64_t>(1, std::min(chunk, l.block));
      l.pieces = static_cast<int>(std::max<std::int64_t>(1, (l.block + l.chunk - 1) / l.chunk));
      widest = std::max(widest, l.chunk);
      for (std::size_t k = 0; k < item.size(); ++k) {
        const auto n = params_[item[k]].second.numel();
        const auto lo = std::clamp(l.begin(me()) - l.offset[k], std::int64_t{0}, n);
        const auto hi = std::clamp(l.end(me()) - l.offset[k], lo, n);
        span_[item[k]] = {lo, hi};
      }
      layouts_.push_back(std::move(l));
    }
    pool_ = BufferPool(p * widest, options_);
    for (std::size_t i = 0; i < params_.size(); ++i) {
      const auto& [name, t] = params_[i];
      index_[name] = static_cast<int>(i);
      const double bytes = static_cast<double>(t.numel() * t.element_size());
      const double push_scale = static_cast<double>(c10::elementSize(push_dtype_)) / static_cast<double>(t.element_size());
      stats_.sent[name] = stats_.received[name] = cost::ps_bytes(bytes, p, push_scale);
    }
  }

  void map_ops(const graph::OpGraph& g) {
    std::map<std::string, int> bucket_of;
    for (std::size_t b = 0; b < items_.size(); ++b)
      for (int i : items_[b]) bucket_of[params_[i].first] = static_cast<int>(b);
    for (const auto& op : g.ops())
      for (const auto& p : op.params)
        if (auto it = bucket_of.find(p.name); it != bucket_of.end()) {
          auto& list = by_op_[g.id_of(op.name)];
          if (std::find(list.begin(), list.end(), it->second) == list.end()) list.push_back(it->second);
        }
  }

  torch::Tensor acquire(torch::ScalarType dtype) {  // See Note [PS buffers]
    auto t = pool_.acquire(dtype);
    stats_.buffer_bytes = pool_.bytes();
    return t;
  }

  // A pool buffer as a piece's P rows of `length` elements.
  torch::Tensor rows(const torch::Tensor& buffer, std::int64_t length) const {
    return buffer.narrow(0, 0, size() * length).view({size(), length});
  }

  // A parameter's elements, flat, sharing its storage.
  torch::Tensor flat(int i) const { return params_[i].second.detach().view(-1); }

  // Backward produced bucket b's gradients: push its pieces, piece k's row j
  // to server j, as room allows (see Note [PS pieces]).
  void launch(std::size_t b) override {
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

  // Nothing to wait for at the end of backward: pushes complete when their
  // server needs them (serve()).
  void complete(std::size_t) override {}

  void push(Round& round, std::size_t b, int k) {
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

  // Waits for push piece `summed` of bucket b and adds its P rows into this
  // server's block of the sum, in member order, in fp32.
  void take_push(Round& round, std::size_t b) {
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

  // Sums what has arrived of bucket b's pushes (with `must`, waits for all
  // of them, oldest piece first); true once every piece is summed.
  bool sum_pushes(Round& round, std::size_t b, bool must) {
    auto& f = round.flights[b];
    while (f.summed < f.pushed) {
      const auto& p = f.pieces[static_cast<std::size_t>(f.summed)];
      if (!p.work || p.work->isCompleted()) {
        take_push(round, b);
      } else if (!must) {
        return false;
      } else if (!retire_oldest()) {
        throw CommError(group_.member(me()) + ": ps: a push of bucket " + std::to_string(b) + " is in flight but not among the pieces");
      }
    }
    return f.summed == layouts_[b].pieces;
  }

  // Server side, strictly in (iteration, bucket) order so every member
  // launches its pulls in the same order (Scope says what may be touched).
  void serve(const Scope& scope) {
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

  // Waits for a push or pull of bucket b; a failure names the bucket, the
  // clock and (Group::diagnose) a lost member.
  void wait(c10d::Work& work, const char* what, const Round& round, std::size_t b) {
    try {
      work.wait(group_.timeout());
    } catch (const std::exception& e) {
      fail(std::string(what) + " of gradient bucket " + std::to_string(b) + " (" +
               params_[layouts_[b].params.front()].first + " ...) at clock " + std::to_string(round.clock),
           e);
    }
  }

  // The optimizer on this server's block of bucket b, once every push piece
  // is summed; its pull pieces are launched later, in order (issue_pulls()).
  void update(Round& round, std::size_t b) {
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

  // Launches pull piece `pulled` of bucket b: every row this server's new
  // values of the piece's elements (an alltoall whose every block is this
  // server's: Gloo's all-gather took three times as long for the same
  // bytes, docs/benchmarks.md). Alone, it pulls from itself: a copy that
  // lands as the gates allow.
  void pull(Round& round, std::size_t b) {
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

  // Launches pull pieces in order while the budget allows.
  void issue_pulls() {
    const auto need = (size() > 1 ? 2 : 1) * pool_.capacity() * static_cast<std::int64_t>(options_.dtype().itemsize());
    while (const auto next = oldest_pending()) {
      if (pool_.active() > 0 && pool_.active() + need > budget_) return;
      pull(*next->round, next->bucket);
    }
  }

  // Waits for pull piece `waited` of bucket b; its input buffer goes back,
  // what arrived waits to land (parked).
  void take_pull(Round& round, std::size_t b) {
    auto& f = round.flights[b];
    auto& p = f.pieces[static_cast<std::size_t>(f.waited)];
    if (p.work) wait(*p.work, "pull", round, b);
    p.work.reset();
    pool_.release(p.out);
    pool_.park(p.in);
    ++f.waited;
  }

  // Writes the arrived pull pieces of bucket b into the parameters: every
  // member's block but this server's own when it updated it in place.
  void land(Round& round, std::size_t b) {
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

  // Where the current call may write parameters (touch_, set by each entry).
  bool touchable(const Round& round, std::size_t b) const {
    if (b > touch_.last_bucket || (round.clock >= clock_ && !touch_.current)) return false;
    return !touch_.forward || !read_[b];
  }

  // Lands bucket b's arrived pieces, iteration by iteration (a newer block
  // never gives way to an older one), where the current call may.
  void land_arrived(std::size_t b) {
    for (auto& round : rounds_) {
      auto& f = round.flights[b];
      if (f.state == Flight::State::kLanded) continue;
      if (f.state == Flight::State::kPushing || !touchable(round, b)) return;
      land(round, b);
      if (f.state != Flight::State::kLanded) return;
    }
  }

  struct At {
    Round* round = nullptr;
    std::size_t bucket = 0;
    Place place;
  };
  // The first piece in flight in the order of Note [PS pieces], if any.
  std::optional<At> oldest_active() {
    for (auto& round : rounds_)
      for (std::size_t b = 0; b < round.flights.size(); ++b) {
        const auto& f = round.flights[b];
        if (f.state == Flight::State::kPushing && f.summed < f.pushed) return At{&round, b, {round.clock, b, 0, f.summed}};
        if (f.state == Flight::State::kPulling && f.waited < f.pulled) return At{&round, b, {round.clock, b, 1, f.waited}};
      }
    return std::nullopt;
  }
  // The first pull piece of a served bucket not launched yet, if any.
  std::optional<At> oldest_pending() {
    for (auto& round : rounds_)
      for (std::size_t b = 0; b < round.flights.size(); ++b) {
        const auto& f = round.flights[b];
        if (f.state == Flight::State::kPulling && f.pulled < layouts_[b].pieces)
          return At{&round, b, {round.clock, b, 1, f.pulled}};
      }
    return std::nullopt;
  }
  // Blocks on the first piece in flight — after launching a pull piece
  // before it, over the budget if need be (see Note [PS pieces]) — and
  // takes it: a push summed; a pull landed where the current call may.
  // False when nothing is in flight or waiting to launch.
  bool retire_oldest() {
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

  // Room for `need` more bytes in flight: takes the oldest pieces, serving
  // what that completes, until they fit (one piece always may go).
  void ensure_room(std::int64_t need) {
    while (pool_.active() > 0 && pool_.active() + need > budget_) {
      if (!retire_oldest()) return;
      serve(serving_);
    }
  }

  // Worker side: lands pulls into the parameters, per bucket in iteration
  // order (a newer block never gives way to an older one), as `scope`
  // allows; `only`: these buckets (an op's), else all.
  void receive(const Scope& scope, const std::vector<int>* only) {
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

  // Lands bucket b's pull of `round`: what has arrived, or (`must`) all of
  // it, taking older pieces first; true once it has landed.
  bool pull_through(Round& round, std::size_t b, bool must) {
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
        throw CommError(group_.member(me()) + ": ps: the pull of bucket " + std::to_string(b) + " has pieces that never launched");
      issue_pulls();
    }
  }

  static bool landed(const Round& round) {
    for (const auto& f : round.flights)
      if (f.state != Flight::State::kLanded) return false;
    return true;
  }

  // Note [Server copy]
  // ~~~~~~~~~~~~~~~~~~
  // Under staleness s > 0 a server keeps its block in a
  // tensor of its own — the optimizer updates that, and the worker's
  // parameters change only when the pull lands (its own block too). So a
  // server updates a block at the first call-in after its last push
  // arrived (an op's gate, a bucket's launch in backward, apply()), even
  // while this worker's forward holds the parameters for backward; without
  // the copy it had to wait for apply(). Measured (docs/benchmarks.md,
  // "Bounded staleness and accuracy"): read staleness 1.46-1.49 → 1.33 at
  // s = 2. A server thread serving each push the moment it arrives was
  // tried on top and measured no fresher on 2 cores; not kept. Under BSP the
  // server updates the parameters in place (no copy): every pull lands
  // before the next forward reads it anyway. The copy costs 1/P of the
  // bucket's elements per member; update() takes it from the parameters at
  // the first update after construction or flush().
  // How many iterations' updates a read of bucket b misses against BSP's
  // (which reads every update up to the last iteration).
  void count_read(std::size_t b) {
    stale_sum_ += static_cast<double>(clock_ - 1 - newest_[b]);
    ++stale_reads_;
  }
  void report_staleness() {
    stats_.read_staleness = stale_reads_ ? stale_sum_ / static_cast<double>(stale_reads_) : 0;
    stale_sum_ = 0, stale_reads_ = 0;
  }

  std::int64_t staleness_ = 0;
  bool copy_ = false;  // See Note [Server copy]
  torch::ScalarType push_dtype_;  // See Note [Push dtype]
  std::int64_t budget_;           // bytes pieces in flight may hold (see Note [PS pieces])
  Group pull_group_;
  std::vector<Layout> layouts_;               // by bucket
  torch::TensorOptions options_ = torch::TensorOptions().dtype(torch::kFloat);  // the parameters'
  BufferPool pool_;                           // See Note [PS buffers]
  Scope serving_, touch_;                     // what the current call may serve, and where it may land pulls
  std::vector<Span> span_;                    // by parameter: the elements this member serves
  std::map<std::string, int> index_;          // parameter name -> index
  std::map<graph::OpId, std::vector<int>> by_op_;  // op -> buckets of the parameters it reads
  std::deque<Round> rounds_;                  // iterations not yet landed everywhere here
  std::int64_t clock_ = 0;                    // iterations applied
  bool gated_ = false;
  Update next_update_;                        // set_update(): for the next arm()
  std::vector<char> read_;                    // by bucket: read by an op since the last apply()
  std::vector<torch::Tensor> server_;         // by bucket: this server's block (see Note [Server copy])
  std::vector<char> server_fresh_;            // by bucket: server_ holds the block's current values
  std::vector<std::int64_t> newest_;          // by bucket: the newest iteration landed here (-1: none)
  double stale_sum_ = 0;                      // read staleness since the last apply()
  std::int64_t stale_reads_ = 0;
  std::size_t reported_ = 0;                  // events the caller has seen
};

}  // namespace

std::unique_ptr<GradSync> make_ps_sync(Group group, NamedParams params, PsOptions options) {
  if (options.staleness < 0) throw CommError("ps: staleness must be >= 0, got " + std::to_string(options.staleness));
  if (options.buffer_bytes < 1)
    throw CommError("ps: buffer_bytes must be >= 1, got " + std::to_string(options.buffer_bytes));
  auto buckets = detail::reverse_buckets(params, options.bucket_bytes);
  return std::make_unique<PsSync>(std::move(group), std::move(params), std::move(buckets), options);
}

}  // namespace trident::comm
